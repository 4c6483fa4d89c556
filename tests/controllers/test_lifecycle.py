"""The release lifecycle with real helm 4 and helm 3: remediation of failed installs and upgrades
(uninstall, rollback), retries and RetriesExceeded, helm tests, CRD policies, resetAt/forceAt, and a
new revision cancelling a helm action stuck waiting on a rollout that will never be ready."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
import yaml

from tests.controllers.conftest import (
    ChartRepo,
    Operator,
    apply,
    condition,
    events,
    eventually,
    get,
    ready,
    settled,
    watched,
)
from tests.tools import Run

pytestmark = pytest.mark.helm_versions  # remediation, rollback, tests, CRDs, drift: helm's own behaviour

DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  # always set, so that helm 3's three-way merge also takes "fail" away again
  annotations: {sandbox.helmop.dev/simulate: {{ if .Values.fail }}fail{{ else }}"no"{{ end }}}
spec:
  replicas: {{ .Values.replicaCount }}
  selector: {matchLabels: {app: {{ .Release.Name }}}}
  template:
    metadata: {labels: {app: {{ .Release.Name }}}}
    spec: {containers: [{name: app, image: "nginx:1"}]}
"""
TEST_POD = """apiVersion: v1
kind: Pod
metadata:
  name: {{ .Release.Name }}-check
  annotations:
    helm.sh/hook: test
    helm.sh/hook-delete-policy: before-hook-creation
    {{- if .Values.testFail }}
    sandbox.helmop.dev/simulate: fail
    {{- end }}
spec: {restartPolicy: Never, containers: [{name: check, image: busybox, command: ["true"]}]}
"""


def crd(group: str, description: str) -> str:
    return yaml.safe_dump({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "description": description,
                     "x-kubernetes-preserve-unknown-fields": True}}}]}})


@pytest.fixture(scope="module")
def flaky(chart_repo: ChartRepo) -> str:
    """A chart whose Deployment never becomes ready with `fail: true`, and whose test fails with
    `testFail: true` (published once per module, as 0.1.0 and 0.2.0)."""
    name = f"flaky-{uuid.uuid4().hex[:5]}"
    for version in ("0.1.0", "0.2.0"):
        chart_repo.publish(name, version, templates={"deployment.yaml": DEPLOYMENT,
                                                     "tests/test-connection.yaml": TEST_POD})
    return name


def release(name: str, repo: ChartRepo, chart: str, version: str = "0.1.0", values: dict[str, Any] | None = None,
            **spec: Any) -> str:
    return yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease", "metadata": {"name": name},
                           "spec": {"interval": "1h", "timeout": "3s",
                                    "chart": {"repository": {"url": repo.url, "name": chart, "version": version}},
                                    "values": {"fail": False, "replicaCount": 1, **(values or {})}, **spec}})


def status_of(kube: Run, ns: str, name: str) -> dict[str, Any]:
    return (get(kube, ns, "hr", name).get("status") or {})


def reasons(kube: Run, ns: str, name: str) -> list[str]:
    return [e["reason"] for e in sorted(events(kube, ns, name), key=lambda e: e.get("lastTimestamp") or "")]


def helm_history(kube: Run, ns: str, name: str) -> list[dict[str, Any]]:
    done = kube("helm", "history", name, "-n", ns, "-o", "json", check=False)
    return json.loads(done.stdout) if done.returncode == 0 else []


def test_failed_install_is_uninstalled_between_retries(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo,
                                                      flaky: str) -> None:
    spec = {"install": {"remediation": {"retries": 2}}}
    apply(kube, ns, release("inst", chart_repo, flaky, values={"fail": True}, **spec))
    seen: set[int] = set()

    def stalled() -> bool:
        seen.add(int(status_of(kube, ns, "inst").get("installFailures", 0)))
        return condition(get(kube, ns, "hr", "inst"), "Stalled").get("reason") == "RetriesExceeded"

    eventually(stalled, timeout=90, interval=0.1)
    status = status_of(kube, ns, "inst")
    assert status["installFailures"] == 3 and status["lastAttemptedReleaseAction"] == "install"
    assert {1, 2, 3} <= seen | {3}
    assert reasons(kube, ns, "inst").count("UninstallSucceeded") == 3  # between tries, and the last failure
    assert condition(get(kube, ns, "hr", "inst"), "Remediated")["status"] == "True"
    assert not helm_history(kube, ns, "inst")  # the failed release was remediated away
    # A values fix installs at once.
    apply(kube, ns, release("inst", chart_repo, flaky, **spec))
    obj = ready(kube, ns, "inst")
    # (a count of 0 is left out of the status, as Flux leaves it out)
    assert "installFailures" not in obj["status"] and not condition(obj, "Remediated")


def test_a_failed_first_install_is_never_counted_as_an_upgrade(operator: Operator, kube: Run, ns: str,
                                                              chart_repo: ChartRepo, flaky: str) -> None:
    apply(kube, ns, release("once", chart_repo, flaky, values={"fail": True}))
    watched(kube, ns, "hr", "once", lambda obj: condition(obj, "Stalled").get("reason") == "RetriesExceeded")
    settled(kube, ns, "hr", "once")  # a reconcile after the backoff must not try again as an "upgrade"
    status = status_of(kube, ns, "once")
    assert (status["installFailures"], status.get("upgradeFailures", 0)) == (1, 0)
    assert status["lastAttemptedReleaseAction"] == "install"
    assert [h["status"] for h in helm_history(kube, ns, "once")] == ["failed"]
    # helm's error, not its log, and the action named once
    for message in [e["message"] for e in events(kube, ns, "once") if e["type"] == "Warning"]:
        assert "level=" not in message and "Error:" not in message and "FAILED:" not in message, message
        assert message.lower().count("install failed") <= 1, message
    assert reasons(kube, ns, "once").count("InstallFailed") + reasons(kube, ns, "once").count("Timeout") == 1


def test_failed_upgrade_is_rolled_back_to_the_last_good_revision(operator: Operator, kube: Run, ns: str,
                                                                chart_repo: ChartRepo, flaky: str) -> None:
    spec = {"upgrade": {"remediation": {"retries": 0, "remediateLastFailure": True}}}
    apply(kube, ns, release("up", chart_repo, flaky, values={"replicaCount": 2}, **spec))
    ready(kube, ns, "up")
    apply(kube, ns, release("up", chart_repo, flaky, version="0.2.0", values={"fail": True, "replicaCount": 5}, **spec))
    obj = eventually(lambda: (o := get(kube, ns, "hr", "up")) and condition(o, "Remediated").get("status") == "True"
                     and o, timeout=60)
    assert condition(obj, "Remediated")["reason"] == "RollbackSucceeded"
    history = helm_history(kube, ns, "up")
    assert [h["status"] for h in history][-2:] == ["failed", "deployed"]
    assert history[-1]["chart"] == f"{flaky}-0.1.0"  # the last good chart version
    assert get(kube, ns, "deploy", "up")["spec"]["replicas"] == 2  # and its values
    watched(kube, ns, "hr", "up", lambda obj: condition(obj, "Stalled").get("reason") == "RetriesExceeded")
    assert condition(get(kube, ns, "hr", "up"))["status"] == "False"


def test_failed_upgrade_with_strategy_uninstall(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo,
                                               flaky: str) -> None:
    spec = {"upgrade": {"remediation": {"retries": 1, "strategy": "uninstall"}}}
    apply(kube, ns, release("gone", chart_repo, flaky, **spec))
    ready(kube, ns, "gone")
    # (a spec change too: the sandbox judges a rollout, not an annotation)
    apply(kube, ns, release("gone", chart_repo, flaky, values={"fail": True, "replicaCount": 2}, **spec))
    eventually(lambda: "UninstallSucceeded" in reasons(kube, ns, "gone"), timeout=60)
    # the next try installs afresh (and fails again with these values)
    eventually(lambda: status_of(kube, ns, "gone").get("lastAttemptedReleaseAction") == "install", timeout=60)
    apply(kube, ns, release("gone", chart_repo, flaky, values={"replicaCount": 3}, **spec))
    ready(kube, ns, "gone")
    assert get(kube, ns, "deploy", "gone")["spec"]["replicas"] == 3


def test_failed_tests_roll_back_unless_ignored(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo,
                                              flaky: str) -> None:
    spec = {"test": {"enable": True}, "upgrade": {"remediation": {"remediateLastFailure": True}}}
    apply(kube, ns, release("tested", chart_repo, flaky, **spec))
    obj = eventually(lambda: (o := get(kube, ns, "hr", "tested")) and condition(o, "TestSuccess").get("status")
                     == "True" and o)
    assert condition(obj)["status"] == "True" and obj["status"]["history"][0]["tests"] == "passed"
    apply(kube, ns, release("tested", chart_repo, flaky, values={"testFail": True, "replicaCount": 2}, **spec))
    obj = eventually(lambda: (o := get(kube, ns, "hr", "tested")) and condition(o, "Remediated").get("status")
                     == "True" and o, timeout=60)
    eventually(lambda: "TestFailed" in reasons(kube, ns, "tested"))  # the Event follows the status
    assert [h["status"] for h in helm_history(kube, ns, "tested")][-1] == "deployed"
    assert get(kube, ns, "deploy", "tested")["spec"]["replicas"] == 1  # rolled back

    ignoring = {"test": {"enable": True, "ignoreFailures": True}}
    apply(kube, ns, release("lenient", chart_repo, flaky, values={"testFail": True}, **ignoring))
    obj = eventually(lambda: (o := get(kube, ns, "hr", "lenient")) and condition(o, "TestSuccess").get("status")
                     == "False" and o)
    assert condition(obj)["status"] == "True" and "ignored" in condition(obj)["message"]


def test_crd_policies(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo) -> None:
    group = f"{ns}.example.com"
    chart = f"crds-{ns}"
    chart_repo.publish(chart, "0.1.0", files={"crds/widget.yaml": crd(group, "first")})
    chart_repo.publish(chart, "0.2.0", files={"crds/widget.yaml": crd(group, "second")})
    apply(kube, ns, release("skipped", chart_repo, chart, install={"crds": "Skip"}))
    ready(kube, ns, "skipped")
    assert kube("kubectl", "get", "crd", f"widgets.{group}", check=False).returncode != 0
    kube("kubectl", "-n", ns, "delete", "hr", "skipped", "--timeout=60s")

    apply(kube, ns, release("kept", chart_repo, chart, upgrade={"crds": "CreateReplace"}))
    ready(kube, ns, "kept")

    def description() -> str:
        live = json.loads(kube("kubectl", "get", "crd", f"widgets.{group}", "-o", "json").stdout)
        return str(live["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"])

    assert description() == "first"
    apply(kube, ns, release("kept", chart_repo, chart, version="0.2.0", upgrade={"crds": "CreateReplace"}))
    ready(kube, ns, "kept", generation=2)
    assert description() == "second"
    kube("kubectl", "-n", ns, "delete", "hr", "kept", "--timeout=60s")
    assert description() == "second"  # CRDs are never deleted by helmop
    kube("kubectl", "delete", "crd", f"widgets.{group}")


def test_a_new_revision_cancels_a_stuck_rollout(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo,
                                               flaky: str) -> None:
    apply(kube, ns, release("stuck", chart_repo, flaky, timeout="5m"))
    ready(kube, ns, "stuck")
    apply(kube, ns, release("stuck", chart_repo, flaky, timeout="5m", values={"fail": True, "replicaCount": 3}))
    watched(kube, ns, "hr", "stuck", lambda obj: condition(obj, "Reconciling").get("status") == "True")
    # helm is now waiting for a rollout that never becomes ready (for up to 5 minutes)
    eventually(lambda: any(a.startswith("upgrade stuck") for a in operator.helm_actions()[-1:]))
    started = time.monotonic()
    apply(kube, ns, release("stuck", chart_repo, flaky, timeout="5m", values={"replicaCount": 2}))
    ready(kube, ns, "stuck", generation=3)
    assert time.monotonic() - started < 15
    cancelled = [e["message"] for e in events(kube, ns, "stuck") if e["reason"] == "ActionCancelled"]
    assert cancelled and "stopped: generation 3 of its spec arrived" in cancelled[0], cancelled
    assert get(kube, ns, "deploy", "stuck")["spec"]["replicas"] == 2


def test_a_deletion_during_an_install_says_it_cancelled_it(operator: Operator, kube: Run, ns: str,
                                                           chart_repo: ChartRepo, flaky: str) -> None:
    apply(kube, ns, release("gone", chart_repo, flaky, timeout="5m", values={"fail": True}))
    watched(kube, ns, "hr", "gone", lambda obj: condition(obj, "Reconciling").get("status") == "True")
    eventually(lambda: any(a.split()[:2] in (["install", "gone"], ["upgrade", "gone"])
                           for a in operator.helm_actions()))  # helm waits for pods that never get ready
    kube("kubectl", "-n", ns, "delete", "hr", "gone", "--timeout=60s")  # not after helm's 5 minutes
    cancelled = [e["message"] for e in events(kube, ns, "gone") if e["reason"] == "ActionCancelled"]
    assert cancelled and "stopped: the HelmRelease is being deleted" in cancelled[0], cancelled
    assert not helm_history(kube, ns, "gone")


def test_reset_force_and_requested(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo, flaky: str) -> None:
    apply(kube, ns, release("ann", chart_repo, flaky))
    ready(kube, ns, "ann")
    before = len(operator.helm_actions())
    kube("kubectl", "-n", ns, "annotate", "hr", "ann", "helmop.dev/requestedAt=now")
    eventually(lambda: status_of(kube, ns, "ann").get("lastHandledReconcileAt") == "now")
    assert len(operator.helm_actions()) == before  # up to date: a reconcile, no helm process
    kube("kubectl", "-n", ns, "annotate", "hr", "ann", "helmop.dev/forceAt=once")
    eventually(lambda: status_of(kube, ns, "ann").get("lastHandledForceAt") == "once")
    history = helm_history(kube, ns, "ann")
    assert [(h["revision"], h["status"]) for h in history][-1] == (2, "deployed"), history  # one forced upgrade
    assert any("--force" in a for a in operator.helm_actions()[before:])
    assert condition(get(kube, ns, "hr", "ann")).get("status") == "True"
    settled(kube, ns, "hr", "ann")
    assert [h["revision"] for h in helm_history(kube, ns, "ann")][-1] == 2  # and only one
    # spec.upgrade.force: every upgrade is forced, and succeeds
    apply(kube, ns, release("ann", chart_repo, flaky, upgrade={"force": True}, values={"replicaCount": 2}))
    ready(kube, ns, "ann", generation=2)
    assert [(h["revision"], h["status"]) for h in helm_history(kube, ns, "ann")][-1] == (3, "deployed")


def test_depends_on(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo, flaky: str) -> None:
    apply(kube, ns, release("db", chart_repo, flaky, values={"fail": True}))
    apply(kube, ns, release("app", chart_repo, flaky, dependsOn=[{"name": "db"}]))
    waiting = eventually(lambda: (o := get(kube, ns, "hr", "app")) and condition(o).get("reason")
                         == "DependencyNotReady" and o)
    assert f"{ns}/db" in condition(waiting)["message"]
    watched(kube, ns, "hr", "db", lambda obj: condition(obj).get("status") == "False")
    settled(kube, ns, "hr", "app")
    assert not helm_history(kube, ns, "app")  # no helm process for app while db is failing
    apply(kube, ns, release("db", chart_repo, flaky))  # db fixed: app follows without being touched
    ready(kube, ns, "db", generation=2)
    ready(kube, ns, "app")

    # a cycle is reported on each member
    apply(kube, ns, release("ping", chart_repo, flaky, dependsOn=[{"name": "pong"}]))
    apply(kube, ns, release("pong", chart_repo, flaky, dependsOn=[{"name": "ping"}]))
    for name in ("ping", "pong"):
        message = eventually(lambda n=name: (c := condition(get(kube, ns, "hr", n))).get("reason")
                             == "DependencyCycle" and c["message"])
        assert f"{ns}/ping" in message and f"{ns}/pong" in message

    # deleted together, even by two commands (what depends on db deleted a moment after it): app first
    kube("kubectl", "-n", ns, "delete", "hr", "db", "--wait=false")
    kube("kubectl", "-n", ns, "delete", "hr", "app", "--wait=false")
    watched(kube, ns, "hr", "db", lambda obj: not obj, timeout=90)
    uninstalls = eventually(lambda: len(u := [e for e in events(kube, ns, "app") + events(kube, ns, "db")
                                              if e["reason"] == "UninstallSucceeded"]) == 2 and u)
    # in the order they were written (timestamps have one-second resolution; both may fall in one second)
    written = sorted(uninstalls, key=lambda e: int(e["metadata"]["resourceVersion"]))
    order = [e["involvedObject"]["name"] for e in written]
    assert order == ["app", "db"], order


def test_inventory_lists_the_objects_of_the_manifest(operator: Operator, kube: Run, ns: str,
                                                     chart_repo: ChartRepo) -> None:
    apply(kube, ns, release("inv", chart_repo, "demo", values={"serviceAccount": {"create": True}}))
    obj = ready(kube, ns, "inv")
    manifest = [d for d in yaml.safe_load_all(kube("helm", "get", "manifest", "inv", "-n", ns).stdout) if d]
    expected = sorted({f"{d['metadata'].get('namespace') or ns}_{d['metadata']['name']}_"
                       f"{d['apiVersion'].rpartition('/')[0]}_{d['kind']}" for d in manifest})
    entries = obj["status"]["inventory"]["entries"]
    assert [e["id"] for e in entries] == expected and len(expected) >= 3
    assert {e["v"] for e in entries} <= {"v1"}


GIZMO = """apiVersion: {{ .Values.group }}/v1
kind: Gizmo
metadata: {name: {{ .Release.Name }}}
spec: {size: {{ .Values.size }}}
"""


def test_health_of_custom_resources_by_cel(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo) -> None:
    group = f"{ns}.example.com"
    definition = crd(group, "gizmos").replace("widget", "gizmo").replace("Widget", "Gizmo")
    kube("kubectl", "apply", "-f", "-", stdin=definition)
    chart = f"gizmo-{ns}"
    chart_repo.publish(chart, "0.1.0", templates={"gizmo.yaml": GIZMO})
    exprs = [{"apiVersion": f"{group}/v1", "kind": "Gizmo", "current": "self.status.phase == 'Ready'",
              "failed": "self.status.phase == 'Broken'"}]

    def gizmo(size: int) -> str:
        return release("giz", chart_repo, chart, timeout="30s", values={"group": group, "size": size},
                       healthCheckExprs=exprs)

    apply(kube, ns, gizmo(1))
    watched(kube, ns, "gizmo", "giz", lambda obj: obj)
    eventually(lambda: [h["status"] for h in helm_history(kube, ns, "giz")] == ["deployed"])
    assert condition(get(kube, ns, "hr", "giz")).get("status") != "True"  # helm is done; the gizmo is not
    kube("kubectl", "-n", ns, "patch", "gizmo", "giz", "--type=merge", "-p", '{"status": {"phase": "Ready"}}')
    ready(kube, ns, "giz")

    # the gizmo breaks; the next upgrade's health check sees it at once (no waiting for the timeout)
    kube("kubectl", "-n", ns, "patch", "gizmo", "giz", "--type=merge", "-p", '{"status": {"phase": "Broken"}}')
    apply(kube, ns, gizmo(2))
    obj = eventually(lambda: (o := get(kube, ns, "hr", "giz")) and condition(o).get("reason") == "HealthCheckFailed"
                     and o, timeout=20)
    assert get(kube, ns, "gizmo", "giz")["spec"]["size"] == 2
    assert "Gizmo" in condition(obj)["message"] and "failed" in condition(obj)["message"]
    assert [h["status"] for h in helm_history(kube, ns, "giz")][-1] == "failed"
    kube("kubectl", "-n", ns, "delete", "hr", "giz", "--timeout=60s")
    kube("kubectl", "delete", "crd", f"gizmos.{group}")


def test_invalid_health_expressions_are_refused(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo,
                                               flaky: str) -> None:
    bad = [{"apiVersion": "x.example.com/v1", "kind": "X", "current": "self.status.phase =="}]
    apply(kube, ns, release("badexpr", chart_repo, flaky, healthCheckExprs=bad))
    obj = eventually(lambda: (o := get(kube, ns, "hr", "badexpr")) and condition(o).get("reason") == "InvalidSpec"
                     and o)
    assert "healthCheckExprs[0].current" in condition(obj)["message"]


def test_common_metadata_and_patches(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo) -> None:
    # nothing here is meant to fail: the module's 3 s helm timeout timed an upgrade out on a loaded machine
    spec = {"timeout": "60s",
            "commonMetadata": {"labels": {"team": "shop"}, "annotations": {"owner": "shop@example.com"}},
            "postRenderers": [{"kustomize": {"patches": [
                {"target": {"kind": "Deployment"},
                 "patch": "- {op: replace, path: /spec/replicas, value: 4}\n"
                          "- {op: add, path: /metadata/annotations/patched, value: json6902}\n"},
                {"target": {"kind": "Service", "name": "post"},
                 "patch": "spec: {type: NodePort}\nmetadata: {labels: {exposed: 'yes'}}\n"}]}}]}
    apply(kube, ns, release("post", chart_repo, "demo", values={"fullnameOverride": "post"}, **spec))
    ready(kube, ns, "post")
    deploy, service = get(kube, ns, "deploy", "post"), get(kube, ns, "svc", "post")
    assert deploy["spec"]["replicas"] == 4 and deploy["metadata"]["annotations"]["patched"] == "json6902"
    assert deploy["metadata"]["labels"]["team"] == "shop" and deploy["metadata"]["annotations"]["owner"]
    assert service["spec"]["type"] == "NodePort" and service["metadata"]["labels"]["exposed"] == "yes"
    manifest = [d for d in yaml.safe_load_all(kube("helm", "get", "manifest", "post", "-n", ns).stdout) if d]
    assert all(d["metadata"]["labels"]["team"] == "shop" for d in manifest)
    assert next(d for d in manifest if d["kind"] == "Deployment")["spec"]["replicas"] == 4
    # a change of the patches is a change of the configuration: an upgrade
    spec["postRenderers"][0]["kustomize"]["patches"][0]["patch"] = "- {op: replace, path: /spec/replicas, value: 2}\n"
    apply(kube, ns, release("post", chart_repo, "demo", values={"fullnameOverride": "post"}, **spec))
    ready(kube, ns, "post", generation=2)
    assert get(kube, ns, "deploy", "post")["spec"]["replicas"] == 2


def test_drift_is_noticed_when_an_object_of_the_release_changes(operator: Operator, kube: Run, ns: str,
                                                                chart_repo: ChartRepo) -> None:
    """No interval and no request: the release's objects are watched (metadata only) and a change of
    one wakes the release for a drift check."""
    apply(kube, ns, release("watched", chart_repo, "demo", values={"fullnameOverride": "watched"},
                            driftDetection={"mode": "enabled"}))  # interval: 1h
    ready(kube, ns, "watched")  # a change right away is seen: by the watch, or by the check when it starts
    kube("kubectl", "-n", ns, "scale", "deploy/watched", "--replicas=5")
    watched(kube, ns, "deploy", "watched", lambda obj: obj["spec"]["replicas"] == 1, timeout=20)
    kube("kubectl", "-n", ns, "delete", "svc", "watched")
    watched(kube, ns, "svc", "watched", lambda obj: obj, timeout=20)
    # the correction's Event is posted once the object is back
    eventually(lambda: reasons(kube, ns, "watched").count("DriftCorrected") >= 2, timeout=20)


def test_drift_warn_and_correct(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo) -> None:
    def drifting(mode: str) -> str:
        return release("drift", chart_repo, "demo", values={"fullnameOverride": "drift", "replicaCount": 1},
                       driftDetection={"mode": mode, "ignore": [
                           {"paths": ["/spec/template/spec/containers/0/image"], "target": {"kind": "Deployment"}}]})

    def check() -> None:
        kube("kubectl", "-n", ns, "annotate", "--overwrite", "hr", "drift", f"helmop.dev/requestedAt={uuid.uuid4()}")

    apply(kube, ns, drifting("warn"))
    ready(kube, ns, "drift")
    revisions = len(helm_history(kube, ns, "drift"))
    kube("kubectl", "-n", ns, "scale", "deploy/drift", "--replicas=9")
    check()
    obj = eventually(lambda: (o := get(kube, ns, "hr", "drift")) and condition(o, "Drifted").get("status") == "True"
                     and o)
    assert "Deployment/drift: /spec/replicas" in condition(obj, "Drifted")["message"]
    eventually(lambda: "DriftDetected" in reasons(kube, ns, "drift"))  # the Event follows the status
    assert get(kube, ns, "deploy", "drift")["spec"]["replicas"] == 9  # warn changes nothing

    apply(kube, ns, drifting("enabled"))
    watched(kube, ns, "deploy", "drift", lambda obj: obj["spec"]["replicas"] == 1)
    watched(kube, ns, "hr", "drift", lambda obj: condition(obj, "Drifted").get("status") == "False")
    eventually(lambda: "DriftCorrected" in reasons(kube, ns, "drift"))  # the Event follows the status
    # a correction re-applies a drifted object whole: let any still under way end before the next edits
    settled(kube, ns, "hr", "drift")
    # a deleted Service is re-created; an ignored path and a field another manager applied are left alone
    kube("kubectl", "-n", ns, "delete", "svc", "drift")
    kube("kubectl", "-n", ns, "set", "image", "deploy/drift", "demo=nginx:ignored")
    kube("kubectl", "-n", ns, "apply", "--server-side", "--field-manager=autoscaler", "--force-conflicts", "-f", "-",
         stdin=yaml.safe_dump({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "other"},
                               "spec": {"ports": [{"port": 1}]}}))
    check()
    watched(kube, ns, "svc", "drift", lambda obj: obj)
    settled(kube, ns, "hr", "drift")
    assert get(kube, ns, "deploy", "drift")["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:ignored"
    kube("kubectl", "-n", ns, "apply", "--server-side", "--field-manager=autoscaler", "--force-conflicts", "-f", "-",
         stdin=yaml.safe_dump({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "drift"},
                               "spec": {"replicas": 3}}))
    check()
    settled(kube, ns, "hr", "drift")
    assert get(kube, ns, "deploy", "drift")["spec"]["replicas"] == 3  # owned by the autoscaler now: not drift
    assert len(helm_history(kube, ns, "drift")) == revisions  # no helm revision for any of it


ALIASED_LABELS = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}
  labels: &labels {app: x}
  annotations: *labels
data: {a: "1"}
"""


def test_yaml_aliases_in_a_chart_are_not_drift(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo) -> None:
    """Go's YAML gives each alias a value of its own: helm's labels added to the ConfigMap's labels do not
    appear in its annotations (the same map in the template), and drift correction has nothing to do."""
    if not (chart_repo.dir / "aliased-0.1.0.tgz").exists():  # (once for both helm versions)
        chart_repo.publish("aliased", "0.1.0", templates={"aliased.yaml": ALIASED_LABELS})
    apply(kube, ns, release("aliased", chart_repo, "aliased", driftDetection={"mode": "enabled"}))
    ready(kube, ns, "aliased")
    before = get(kube, ns, "configmap", "aliased")["metadata"]
    settled(kube, ns, "hr", "aliased")  # a drift check of the deployed release
    hr = get(kube, ns, "hr", "aliased")
    assert condition(hr, "Drifted").get("status") != "True", condition(hr, "Drifted")
    after = get(kube, ns, "configmap", "aliased")["metadata"]
    # helm's own annotations and labels, each on its own map (as the API server has them after helm)
    assert after["annotations"] == {"app": "x", "meta.helm.sh/release-name": "aliased",
                                    "meta.helm.sh/release-namespace": ns}
    assert after["labels"] == {"app": "x", "app.kubernetes.io/managed-by": "Helm"}
    assert after["resourceVersion"] == before["resourceVersion"]
    assert "DriftCorrected" not in reasons(kube, ns, "aliased")
