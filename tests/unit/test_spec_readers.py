"""One reader per kind (decisions/specs.py), the operator's and the offline checks': the checks the controllers
used to add on their own (CEL compiled, semver ranges, the tenancy policy) refuse a spec offline too."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from helmop.api.errors import SpecError
from helmop.api.flux import convert
from helmop.api.images import HELMOP_IMAGES
from helmop.api.kinds import HELMOP, RECEIVER
from helmop.api.settings import Settings
from helmop.api.tenancy import Tenancy
from helmop.controllers.handlers import closing
from helmop.controllers.registration import controllers
from helmop.decisions.specs import READERS, read_spec

LOCKED = Tenancy(no_cross_namespace_refs=True)
CHART = {"repository": {"url": "https://charts.example", "name": "web", "version": "1.0.0"}}


def _body(spec: dict[str, Any], namespace: str = "apps") -> dict[str, Any]:
    return {"metadata": {"name": "x", "namespace": namespace}, "spec": spec}


def test_every_kind_the_operator_serves_has_a_reader() -> None:
    ctx: Any = SimpleNamespace(settings=Settings())
    rows = controllers(ctx, [], clusterwide=True, flux=True)
    assert {row.kind.kind for row in rows} >= {"HelmRelease", "Kustomization", "ImagePolicy", "Receiver", "Project"}
    assert not [row.kind.kind for row in rows if row.reader is None and row.kind.kind not in READERS]


@pytest.mark.parametrize(("kind", "spec", "reason"), [
    (HELMOP.helmrelease, {"chart": CHART, "healthCheckExprs": [
        {"apiVersion": "v1", "kind": "Pod", "current": "self.status.phase =="}]}, "InvalidSpec"),
    (HELMOP_IMAGES.policy, {"imageRepositoryRef": {"name": "app"}, "policy": {"semver": {"range": "one or two"}}},
     "InvalidPolicy"),
    (RECEIVER, {"type": "generic", "secretRef": {"name": "t"}, "resources": [{"kind": "GitRepository", "name": "a"}],
                "resourceFilter": "req.x =="}, "InvalidCELExpression"),
])
def test_what_the_controllers_checked_is_refused_by_the_reader(kind: Any, spec: dict[str, Any], reason: str) -> None:
    with pytest.raises(SpecError) as refused:
        read_spec(kind, _body(spec))
    assert refused.value.reason == reason


def test_the_tenancy_policy_is_the_readers_to_apply() -> None:
    other = {"chart": {"spec": {"chart": "web", "sourceRef": {"kind": "HelmRepository", "name": "charts",
                                                               "namespace": "shared"}}}}
    read_spec(HELMOP.helmrelease, _body(other))  # allowed by the default policy
    with pytest.raises(SpecError, match="references to other namespaces are disabled") as refused:
        read_spec(HELMOP.helmrelease, _body(other), LOCKED)
    assert refused.value.reason == "CrossNamespaceRef"
    policy = {"imageRepositoryRef": {"name": "app", "namespace": "shared"}, "policy": {"alphabetical": {}}}
    with pytest.raises(SpecError) as denied:  # image automation says Flux's reason for it
        read_spec(HELMOP_IMAGES.policy, _body(policy), LOCKED)
    assert denied.value.reason == "AccessDenied"


def test_convert_reads_the_spec_as_the_operator_does() -> None:
    policy = {"apiVersion": "image.toolkit.fluxcd.io/v1", "kind": "ImagePolicy", "metadata": {"name": "app"},
              "spec": {"imageRepositoryRef": {"name": "app"}, "policy": {"semver": {"range": "one or two"}}}}
    with pytest.raises(convert.Refused) as refused:
        convert.convert(policy, to_flux=False, read=read_spec)
    assert [r.reason for r in refused.value.refusals] == ["InvalidPolicy"]


def test_a_clean_up_reads_the_spec_with_the_model_alone() -> None:
    """What an object made under other rules (an older tenancy policy, a CEL expression edited since) still goes
    with it; a spec the model cannot read made nothing, but a kind whose clean-up needs no spec still cleans up."""
    ctx: Any = SimpleNamespace(settings=Settings(), tenancy=LOCKED)
    rows = {row.kind.kind: row for row in controllers(ctx, [], clusterwide=True)}
    refused_now = {"chart": {"spec": {"chart": "web", "sourceRef": {"kind": "HelmRepository", "name": "charts",
                                                                   "namespace": "shared"}}},
                   "healthCheckExprs": [{"apiVersion": "v1", "kind": "Pod", "current": "self.status.phase =="}]}

    async def scenario() -> None:
        release = await closing(ctx, rows["HelmRelease"], _body(refused_now))
        assert release is not None and release.spec.chart.repository == "charts"
        assert await closing(ctx, rows["HelmRelease"], _body({"chart": {}})) is None  # nothing could be installed
        generator = await closing(ctx, rows["ArtifactGenerator"], _body({"sources": "not a list"}))
        assert generator is not None and generator.spec is None  # what it made is found by its uid

    asyncio.run(scenario())
