"""Flux's helm-controller options with real helm 4 and helm 3: RetryOnFailure (tries counted, nothing
remediated, never stalled), server-side apply beside another field manager (conflicts forced, its other
fields kept, no drift flapping), postRenderStrategy both ways with kustomize images, and objects adopted
or refused by disableTakeOwnership."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
import yaml

from tests.controllers.conftest import ChartRepo, Operator, apply, condition, events, eventually, get, ready, settled
from tests.controllers.test_lifecycle import DEPLOYMENT, helm_history, status_of
from tests.tools import Run

pytestmark = pytest.mark.helm_versions

CONFIGMAP = """apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Release.Name }}}
data: {a: {{ .Values.a | quote }}, b: {{ .Values.b | quote }}}
"""
HOOK = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-hook
  annotations: {helm.sh/hook: post-install}
data: {hook: "yes"}
"""


@pytest.fixture(scope="module")
def charts(chart_repo: ChartRepo) -> str:
    """A chart of a Deployment (never ready with ``fail``), a ConfigMap and a post-install hook, alone."""
    name = f"opts-{uuid.uuid4().hex[:5]}"
    chart_repo.publish(name, "0.1.0", bare=True, values={"fail": False, "replicaCount": 1, "a": "1", "b": "1"},
                       templates={"deployment.yaml": DEPLOYMENT, "configmap.yaml": CONFIGMAP, "hook.yaml": HOOK})
    return name


def release(name: str, repo: ChartRepo, chart: str, values: dict[str, Any] | None = None, **spec: Any) -> str:
    return yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease", "metadata": {"name": name},
                           "spec": {"interval": "1h", "timeout": "3s",
                                    "chart": {"repository": {"url": repo.url, "name": chart, "version": "0.1.0"}},
                                    "values": values or {}, **spec}})


def reasons(kube: Run, ns: str, name: str) -> set[str]:
    return {e["reason"] for e in events(kube, ns, name)}


def test_retry_on_failure_tries_again_without_remediation(operator: Operator, kube: Run, ns: str,
                                                          chart_repo: ChartRepo, charts: str) -> None:
    retry = {"name": "RetryOnFailure", "retryInterval": "1s"}
    spec = {"install": {"strategy": retry}, "upgrade": {"strategy": retry}}
    apply(kube, ns, release("again", chart_repo, charts, {"fail": True}, **spec))
    # the failed install is upgraded again and again (a failed release, never uninstalled nor rolled back)
    obj = eventually(lambda: (o := get(kube, ns, "hr", "again"))
                     and int((o.get("status") or {}).get("upgradeFailures", 0)) >= 2 and o, timeout=90)
    assert obj["status"]["installFailures"] == 1
    assert condition(obj)["status"] == "False" and not condition(obj, "Stalled") and not condition(obj, "Remediated")
    retrying = condition(obj, "Reconciling")
    assert (retrying["status"], retrying["reason"], retrying["message"]) == ("True", "ProgressingWithRetry",
                                                                             "retrying after 1s")
    assert not reasons(kube, ns, "again") & {"UninstallSucceeded", "RollbackSucceeded", "RetriesExceeded"}
    assert len(helm_history(kube, ns, "again")) >= 3
    # a fix deploys, and the failures are forgotten
    apply(kube, ns, release("again", chart_repo, charts, {"fail": False}, **spec))
    obj = ready(kube, ns, "again")
    assert not {"installFailures", "upgradeFailures"} & set(obj["status"]) and not condition(obj, "Reconciling")


def managers(kube: Run, ns: str, name: str) -> dict[str, str]:
    live = json.loads(kube("kubectl", "-n", ns, "get", "cm", name, "-o", "json", "--show-managed-fields").stdout)
    return {m["manager"]: m["operation"] for m in live["metadata"]["managedFields"]}


def test_server_side_apply_beside_another_field_manager(operator: Operator, kube: Run, ns: str,
                                                        chart_repo: ChartRepo, charts: str) -> None:
    spec = {"driftDetection": {"mode": "enabled"}}
    apply(kube, ns, release("shared", chart_repo, charts, **spec))
    ready(kube, ns, "shared")
    # helm 4 applies server-side (helm-controller's default); helm 3 cannot, and updates
    assert managers(kube, ns, "shared")["helm"] == ("Apply" if operator.helm == "helm" else "Update")
    # another manager applies a field of its own and takes one of the chart's
    other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared", "labels": {"team": "other"}},
             "data": {"b": "theirs", "extra": "theirs"}}
    kube("kubectl", "-n", ns, "apply", "--server-side", "--force-conflicts", "--field-manager=other", "-f", "-",
         stdin=yaml.safe_dump(other))
    for _ in range(2):  # their fields are theirs: no drift, reconcile after reconcile
        settled(kube, ns, "hr", "shared")
        assert condition(get(kube, ns, "hr", "shared"), "Drifted").get("status") != "True"
    assert "DriftDetected" not in reasons(kube, ns, "shared")
    # an upgrade forces the chart's fields back and leaves the rest of theirs alone
    apply(kube, ns, release("shared", chart_repo, charts, {"a": "2"}, **spec))
    ready(kube, ns, "shared")
    live = get(kube, ns, "cm", "shared")
    assert live["data"]["a"] == "2" and live["data"]["extra"] == "theirs" and live["metadata"]["labels"]["team"] == \
        "other"
    if operator.helm == "helm":
        assert live["data"]["b"] == "1"  # forced: helm-controller's way with server-side apply


def test_post_render_strategies_and_images(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo,
                                           charts: str) -> None:
    common = {"commonMetadata": {"labels": {"stamped": "yes"}},
              "postRenderers": [{"kustomize": {"images": [{"name": "nginx", "newName": "mirror.local/nginx",
                                                           "newTag": "1.27"}]}}]}
    apply(kube, ns, release("nohooks", chart_repo, charts, postRenderStrategy="nohooks", **common))
    apply(kube, ns, release("combined", chart_repo, charts, postRenderStrategy="combined", **common))
    for name in ("nohooks", "combined"):
        ready(kube, ns, name)
        assert get(kube, ns, "cm", name)["metadata"]["labels"]["stamped"] == "yes"
        image = get(kube, ns, "deploy", name)["spec"]["template"]["spec"]["containers"][0]["image"]
        assert image == "mirror.local/nginx:1.27"
    assert "stamped" not in (get(kube, ns, "cm", "nohooks-hook")["metadata"].get("labels") or {})
    hook_labels = get(kube, ns, "cm", "combined-hook")["metadata"].get("labels") or {}
    message = condition(get(kube, ns, "hr", "combined"))["message"]
    if operator.helm == "helm":
        assert hook_labels.get("stamped") == "yes" and "not applied" not in message
    else:  # helm 3 never hands hooks to a post-renderer: said, not silently ignored
        assert "stamped" not in hook_labels
        assert "not applied: spec.postRenderStrategy combined needs helm 4" in message, message


def test_existing_objects_are_adopted_unless_take_ownership_is_disabled(operator: Operator, kube: Run, ns: str,
                                                                        chart_repo: ChartRepo, charts: str) -> None:
    for name in ("adopting", "refusing"):
        kube("kubectl", "-n", ns, "create", "configmap", name, "--from-literal=a=mine")
    apply(kube, ns, release("adopting", chart_repo, charts))
    apply(kube, ns, release("refusing", chart_repo, charts, install={"disableTakeOwnership": True}))
    ready(kube, ns, "adopting")
    assert get(kube, ns, "cm", "adopting")["data"]["a"] == "1"
    refused = eventually(lambda: (c := condition(get(kube, ns, "hr", "refusing"))).get("reason") == "ResourceConflict"
                         and c, timeout=60)
    assert "refusing" in refused["message"] and get(kube, ns, "cm", "refusing")["data"] == {"a": "mine"}
    assert status_of(kube, ns, "refusing").get("installFailures") == 1
