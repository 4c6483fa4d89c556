"""The typed status of each kind is the CRD's status schema: the same fields, at every depth, of the same
types (so a field added to one and not the other fails here), and it reads and writes the API's JSON."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from helmop.api import crds
from helmop.api.status import Status, merge_patch, parse, to_json
from helmop.api.status.app import AppStatus
from helmop.api.status.configsync import ConfigSyncStatus
from helmop.api.status.helmrelease import HelmReleaseStatus
from helmop.api.status.images import ImagePolicyStatus, ImageRepositoryStatus, ImageUpdateAutomationStatus
from helmop.api.status.preview import PreviewStatus
from helmop.api.status.project import ProjectStatus
from helmop.api.status.receiver import ReceiverStatus
from helmop.api.status.sources import (
    ArtifactGeneratorStatus,
    BucketStatus,
    ExternalArtifactStatus,
    GitRepositoryStatus,
    HelmChartStatus,
    HelmRepositoryStatus,
    OCIRepositoryStatus,
)

TYPES = {"HelmRelease": HelmReleaseStatus, "GitRepository": GitRepositoryStatus, "ConfigSync": ConfigSyncStatus,
         "Project": ProjectStatus, "Jenkins": AppStatus, "HelmRepository": HelmRepositoryStatus,
         "OCIRepository": OCIRepositoryStatus, "Bucket": BucketStatus, "HelmChart": HelmChartStatus,
         "ExternalArtifact": ExternalArtifactStatus, "ArtifactGenerator": ArtifactGeneratorStatus,
         "ImageRepository": ImageRepositoryStatus, "ImagePolicy": ImagePolicyStatus,
         "ImageUpdateAutomation": ImageUpdateAutomationStatus, "Receiver": ReceiverStatus, "Preview": PreviewStatus}
JSON_TYPES = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean",
              "array": "array", "object": "object"}


def _crd_status(kind: str) -> dict[str, Any]:
    crd = next(c for c in crds.definitions() if c["spec"]["names"]["kind"] == kind)
    return dict(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"])


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """The schema msgspec generates, with references followed and ``X | None`` read as X."""
    if "$ref" in node:
        return _resolve(defs[node["$ref"].rpartition("/")[2]], defs)
    if "anyOf" in node:
        (real,) = [n for n in node["anyOf"] if n.get("type") != "null"]
        return _resolve(real, defs)
    return node


def _differences(model: dict[str, Any], crd: dict[str, Any], defs: dict[str, Any], at: str) -> list[str]:
    model = _resolve(model, defs)
    if crd.get("x-kubernetes-preserve-unknown-fields") and "properties" not in crd:
        return [f"{at}: the CRD does not say what it holds"]
    if JSON_TYPES.get(str(crd.get("type"))) != model.get("type"):
        return [f"{at}: the CRD says {crd.get('type')}, the type {model.get('type')}"]
    if model["type"] == "array":
        return _differences(model["items"], crd.get("items") or {}, defs, at + "[]")
    if model["type"] != "object":
        return []
    ours, theirs = set(model.get("properties") or {}), set(crd.get("properties") or {})
    found = [f"{at}.{name}: only in the type" for name in sorted(ours - theirs)]
    found += [f"{at}.{name}: only in the CRD" for name in sorted(theirs - ours)]
    for name in sorted(ours & theirs):
        found += _differences(model["properties"][name], crd["properties"][name], defs, f"{at}.{name}")
    return found


@pytest.mark.parametrize("kind", sorted(TYPES))
def test_each_status_type_is_its_crds_status_schema(kind: str) -> None:
    (schema,), defs = msgspec.json.schema_components([TYPES[kind]])
    assert _differences(schema, _crd_status(kind), defs, "status") == []


def test_the_comparison_sees_a_missing_field() -> None:
    crd = _crd_status("GitRepository")
    del crd["properties"]["webhookPath"]
    (schema,), defs = msgspec.json.schema_components([GitRepositoryStatus])
    assert _differences(schema, crd, defs, "status") == ["status.webhookPath: only in the type"]


def test_status_reads_the_apis_json_and_writes_it_back() -> None:
    data = {"observedGeneration": 3, "conditions": [{"type": "Ready", "status": "True", "reason": "UpToDate",
                                                     "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "history": [{"revision": 2, "chartVersion": "1.0.0", "status": "deployed"}],
            "inventory": {"entries": [{"id": "ns_web_apps_Deployment", "v": "v1"}]}, "installFailures": 1}
    status = parse(HelmReleaseStatus, data)
    assert status.is_true("Ready") and status.history[0].revision == 2 and status.inventory is not None
    assert to_json(status) == data


def test_a_status_that_does_not_fit_is_read_as_empty() -> None:
    assert parse(HelmReleaseStatus, {"history": "not a list", "observedGeneration": 2}) == HelmReleaseStatus()
    assert parse(ConfigSyncStatus, None) == ConfigSyncStatus()


def test_a_condition_moves_its_transition_time_only_when_it_flips() -> None:
    first = Status().with_condition("Ready", True, "A", "a", 1, at="t1")
    same = first.with_condition("Ready", True, "B", "b", 2, at="t2")
    flipped = same.with_condition("Ready", False, "C", "c", 3, at="t3")
    assert [s.conditions[0].last_transition_time for s in (first, same, flipped)] == ["t1", "t1", "t3"]
    assert same.conditions[0].reason == "B" and not flipped.is_true("Ready")
    assert flipped.without("Ready").conditions == ()


def test_merge_patch_removes_what_the_new_status_leaves_out() -> None:
    old = {"a": 1, "gone": 2, "nested": {"keep": 1, "drop": 2}, "list": [1, 2]}
    new = {"a": 1, "nested": {"keep": 1}, "list": [1]}
    assert merge_patch(old, new) == {"gone": None, "nested": {"drop": None}, "list": [1]}
    assert merge_patch(new, new) == {}
