"""Flux's helm-controller options as helmop reads and runs them (pure): strategies, server-side apply flags,
post-renderer images and hooks, literal values, chart renames, the history's digests."""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path

import pytest
import yaml

from helmop.api.actions import Action
from helmop.api.durations import go_duration
from helmop.api.errors import SpecError
from helmop.api.helmrelease import Remediation, ValuesReference, parse_spec
from helmop.decisions import Desired, Observed, Reason, Release, decide
from helmop.helm import storage
from helmop.helm.engine import RollbackRequest, UpgradeRequest, rollback_args, upgrade_args
from helmop.helm.postrender import NOTHING, render
from helmop.helm.releases import ReleaseState
from helmop.helm.request import upgrade_request
from helmop.helm.values import compose

CHART = {"repository": {"url": "https://charts.example.com", "name": "web", "version": "1.0.0"}}
RETRY = Remediation(retry=True, retry_interval=120)


def test_strategies_parse_with_flux_rules() -> None:
    spec = parse_spec({"chart": CHART, "install": {"strategy": {"name": "RetryOnFailure"}},
                       "upgrade": {"strategy": {"name": "RetryOnFailure", "retryInterval": "1m"}}}, "w", "ns")
    assert (spec.install.remediation.retry, spec.install.remediation.retry_interval) == (True, 300)
    assert spec.upgrade.remediation.retry_interval == 60
    with pytest.raises(SpecError, match=r"retryInterval can only be set when spec\.install\.strategy\.name"):
        parse_spec({"chart": CHART, "install": {"strategy": {"name": "RemediateOnFailure", "retryInterval": "1m"}}},
                   "w", "ns")
    with pytest.raises(SpecError, match=r"spec\.upgrade\.serverSideApply must be one of"):
        parse_spec({"chart": CHART, "upgrade": {"serverSideApply": True}}, "w", "ns")


def test_retry_on_failure_waits_then_upgrades_and_never_remediates() -> None:
    desired = Desired(config_digest="d", owner="o", install=RETRY, upgrade=RETRY)
    failed = Release("failed", "o", "d", 1)
    waiting = decide(desired, Observed(failed, last_attempted_digest="d", install_failures=1, retry_in=30))
    assert (waiting.action, waiting.reason, waiting.message) == (Action.NONE, Reason.RETRYING,
                                                                 "install failed (1x); retrying after 2m0s")
    due = decide(desired, Observed(failed, last_attempted_digest="d", install_failures=9))
    assert due.action is Action.UPGRADE and not due.remediation
    assert decide(desired, Observed(None, last_attempted_digest="d", install_failures=3)).action is Action.INSTALL


def test_a_renamed_chart_is_reinstalled_unless_updated_in_place() -> None:
    desired = Desired(config_digest="new", owner="o", chart_name="web2")
    deployed = Release("deployed", "o", "old", 3, last_good=2, chart_name="web")
    renamed = decide(desired, Observed(deployed))
    assert (renamed.action, renamed.reason) == (Action.UNINSTALL, Reason.CHART_RENAMED) and not renamed.remediation
    in_place = decide(Desired(config_digest="new", owner="o", chart_name="web2", reinstall_on_rename=False),
                      Observed(deployed))
    assert in_place.action is Action.UPGRADE


def test_helm_flags_for_server_side_apply_waits_and_ownership() -> None:
    spec = parse_spec({"chart": CHART, "waitStrategy": {"name": "legacy"},
                       "upgrade": {"serverSideApply": "disabled", "disableTakeOwnership": True,
                                   "disableSchemaValidation": True, "preserveValues": True,
                                   "disableWaitForJobs": True}}, "w", "ns")
    install = upgrade_request(spec, "ns", "w", chart=Path("c"), values={}, digest="d",
                              action=Action.INSTALL)
    args = upgrade_args(install, 4)
    assert {"--server-side=true", "--force-conflicts", "--take-ownership", "--wait=legacy",
            "--wait-for-jobs"} <= set(args) and "--reuse-values" not in args
    upgrade = upgrade_request(spec, "ns", "w", chart=Path("c"), values={}, digest="d",
                              action=Action.UPGRADE)
    args = upgrade_args(upgrade, 4)
    assert {"--server-side=false", "--skip-schema-validation", "--reuse-values", "--wait=legacy"} <= set(args)
    assert not {"--force-conflicts", "--take-ownership", "--wait-for-jobs"} & set(args)
    assert not [a for a in upgrade_args(install, 3) if a.startswith("--server-side")]  # helm 3 has no such flag
    forced = UpgradeRequest("r", "ns", Path("c"), {}, 60, force=True)
    assert "--server-side=false" in upgrade_args(forced, 4) and "--force-conflicts" not in upgrade_args(forced, 4)
    rollback = RollbackRequest("r", "ns", 2, 60, recreate=True)
    assert "--recreate-pods" in rollback_args(rollback, 3) and "--recreate-pods" not in rollback_args(rollback, 4)


def test_fields_of_one_helm_major_are_named() -> None:
    spec = parse_spec({"chart": CHART, "postRenderStrategy": "combined", "rollback": {"recreate": True},
                       "install": {"serverSideApply": True}}, "w", "ns")
    assert spec.helm_major_fields == (("spec.install.serverSideApply", 4), ("spec.rollback.recreate", 3),
                                      ("spec.postRenderStrategy combined", 4))


DEPLOY = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
          "spec": {"template": {"spec": {"containers": [{"name": "a", "image": "registry:5000/team/app:1"},
                                                        {"name": "b", "image": "nginx@sha256:" + "a" * 64}],
                                         "initContainers": [{"name": "c", "image": "nginx:1.25"}]}}}}
HOOK = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "h", "annotations": {"helm.sh/hook": "test"}}}


def test_post_renderer_images_hooks_and_empty_output() -> None:
    spec = parse_spec({"chart": CHART, "postRenderStrategy": "nohooks", "commonMetadata": {"labels": {"x": "y"}},
                       "postRenderers": [{"kustomize": {"images": [
                           {"name": "registry:5000/team/app", "newTag": "2"},
                           {"name": "nginx", "newName": "mirror/nginx", "digest": "sha256:" + "b" * 64}]}}]},
                      "w", "ns")
    deploy, hook = yaml.safe_load_all(render(yaml.safe_dump_all([DEPLOY, HOOK]), spec.post_render))
    pod = deploy["spec"]["template"]["spec"]
    assert [c["image"] for c in pod["containers"] + pod["initContainers"]] == [
        "registry:5000/team/app:2", "mirror/nginx@sha256:" + "b" * 64, "mirror/nginx@sha256:" + "b" * 64]
    assert deploy["metadata"]["labels"] == {"x": "y"} and hook == HOOK  # nohooks: the hook as the chart made it
    assert render("", spec.post_render) == NOTHING and not list(yaml.safe_load_all(NOTHING))
    with pytest.raises(SpecError, match=r"postRenderers\[0\].kustomize.patches\[0\].target.kind"):
        parse_spec({"chart": CHART, "postRenderers": [{"kustomize": {"patches": [
            {"patch": "{a: 1}", "target": {"kind": "(unclosed"}}]}}]}, "w", "ns")


def test_literal_values_are_set_as_they_are() -> None:
    literal = ValuesReference("Secret", "s", target_path="a.b", literal=True)
    typed = ValuesReference("Secret", "s", target_path="a.c")
    assert compose([(literal, "1,{x}"), (typed, "true")], {}) == {"a": {"b": "1,{x}", "c": True}}


def test_history_digest_and_action_are_flux_shaped() -> None:
    def summary(record: dict) -> storage.Snapshot:  # of the record as helm stores it in its Secret
        data = base64.b64encode(base64.b64encode(gzip.compress(json.dumps(record).encode()))).decode()
        secret = {"metadata": {"name": "sh.helm.release.v1.w.v1", "labels": {}}, "data": {"release": data}}
        return storage.summary(storage.decode(secret))

    first = summary({"version": 1, "info": {"status": "deployed", "description": "Install complete"},
                     "config": {"b": 1, "a": {"z": 1, "y": 2}}})
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", first.config_digest) and first.action == "install"
    assert first.config_digest == storage.values_digest({"a": {"y": 2, "z": 1}, "b": 1})  # key order is no matter
    empty = summary({"version": 3, "info": {"status": "deployed", "description": "Rollback to 1"}})
    assert empty.config_digest.endswith("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    assert empty.action == "rollback"


def test_go_durations() -> None:
    assert [go_duration(s) for s in (300, 5400, 2.5, 0)] == ["5m0s", "1h30m0s", "2.5s", "0s"]


def test_auto_server_side_apply_follows_the_revision_it_continues() -> None:
    def secret(version: int, method: str | None) -> dict:
        record = {"version": version, "info": {"status": "superseded"}, **({"apply_method": method} if method else {})}
        data = base64.b64encode(base64.b64encode(gzip.compress(json.dumps(record).encode()))).decode()
        return {"metadata": {"name": f"sh.helm.release.v1.w.v{version}", "labels": {"version": str(version)}},
                "data": {"release": data}}

    state = ReleaseState("w", "ns", (secret(1, None), secret(2, "ssa"), secret(3, "csa")))
    assert (state.server_side(), state.server_side(2), state.server_side(1)) == ("false", "true", "false")
    assert ReleaseState("w", "ns").server_side() == "true"  # nothing yet: an install, server-side
