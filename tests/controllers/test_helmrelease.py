"""HelmRelease end to end: kubectl apply -> the operator (real kopf) -> real helm -> the sandbox.

Tests of helm's own behaviour (marked helm_versions) run with helm 4 and with helm 3.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from helmop.helm.releases import Gateway, ReleaseState
from tests.controllers.conftest import (
    MIRRORED,
    ChartRepo,
    Operator,
    apply,
    condition,
    events,
    eventually,
    failing,
    get,
    hr,
    ready,
    settled,
    watched,
)
from tests.tools import Run


@pytest.mark.helm_versions
def test_install_upgrade_noop_and_uninstall(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo) -> None:
    apply(kube, ns, hr("web", chart_repo, version="0.1.0", values={"replicaCount": 2}))
    obj = ready(kube, ns, "web")
    assert condition(obj)["reason"] == "InstallSucceeded"
    assert obj["status"]["lastAppliedRevision"] == "0.1.0"
    assert obj["status"]["history"][0]["revision"] == 1
    assert get(kube, ns, "deploy", "web")["spec"]["replicas"] == 2
    releases = json.loads(kube("helm", "list", "-n", ns, "-o", "json").stdout)
    assert [(r["name"], r["status"]) for r in releases] == [("web", "deployed")]
    wait = kube("kubectl", "-n", ns, "wait", "--for=condition=Ready", "hr/web", "--timeout=5s")
    assert "condition met" in wait.stdout

    # The same spec again, and a label change: no helm process at all.
    before = len(operator.helm_actions())
    apply(kube, ns, hr("web", chart_repo, version="0.1.0", values={"replicaCount": 2}))
    kube("kubectl", "-n", ns, "label", "hr", "web", "team=a")
    settled(kube, ns, "hr", "web")
    assert len(operator.helm_actions()) == before

    # A values change: an upgrade to revision 2 that changes the objects.
    apply(kube, ns, hr("web", chart_repo, version="0.1.0", values={"replicaCount": 3}))
    obj = ready(kube, ns, "web", generation=2)
    assert condition(obj)["reason"] == "UpgradeSucceeded"
    assert obj["status"]["history"][0]["revision"] == 2
    assert get(kube, ns, "deploy", "web")["spec"]["replicas"] == 3
    assert len(operator.helm_actions()) == before + 1
    reasons = eventually(lambda: "UpgradeSucceeded" in (r := [e["reason"] for e in events(kube, ns, "web")]) and r)
    assert reasons.count("InstallSucceeded") == 1 and reasons.count("UpgradeSucceeded") == 1  # (after the status)

    # spec.uninstall.deletionPropagation reaches helm (either major accepts --cascade)
    apply(kube, ns, hr("web", chart_repo, version="0.1.0", values={"replicaCount": 3},
                       uninstall={"deletionPropagation": "foreground"}))
    kube("kubectl", "-n", ns, "delete", "hr", "web", "--timeout=60s")
    assert not get(kube, ns, "hr", "web")
    assert json.loads(kube("helm", "list", "-n", ns, "-o", "json").stdout) == []
    assert not get(kube, ns, "deploy", "web")
    assert any(a.startswith("uninstall web ") and "--cascade=foreground" in a for a in operator.helm_actions())


def test_helms_storage_is_read_once_per_action(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The release gateway reads helm's storage Secrets once for a decision and once after an action (the
    next decision's state): an upgrade costs two lists of them, whatever status, history and inventory need."""
    reads: list[tuple[str, str]] = []
    read = Gateway.read

    async def counting(self: Gateway, release: str, namespace: str) -> ReleaseState:
        reads.append((release, namespace))
        return await read(self, release, namespace)

    monkeypatch.setattr(Gateway, "read", counting)
    apply(kube, ns, hr("counted", chart_repo, version="0.1.0"))
    ready(kube, ns, "counted")
    reads.clear()
    apply(kube, ns, hr("counted", chart_repo, version="0.1.0", values={"replicaCount": 2}))
    obj = ready(kube, ns, "counted", generation=2)
    assert obj["status"]["history"][0]["revision"] == 2 and obj["status"]["inventory"]["entries"]
    assert reads == [("counted", ns), ("counted", ns)]


def test_values_from_configmap_and_secret(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo) -> None:
    kube("kubectl", "-n", ns, "create", "configmap", "web-values", "--from-literal=values.yaml=replicaCount: 2\n")
    kube("kubectl", "-n", ns, "create", "secret", "generic", "web-secret", "--from-literal=tag=1.2.3")
    apply(kube, ns, hr("vf", chart_repo, version="0.1.0", values={"service": {"port": 8080}},
                       valuesFrom=[{"kind": "ConfigMap", "name": "web-values"},
                                   {"kind": "Secret", "name": "web-secret", "valuesKey": "tag",
                                    "targetPath": "image.tag"}]))
    ready(kube, ns, "vf")
    deploy = get(kube, ns, "deploy", "vf")
    assert deploy["spec"]["replicas"] == 2
    assert deploy["spec"]["template"]["spec"]["containers"][0]["image"].endswith(":1.2.3")
    assert get(kube, ns, "svc", "vf")["spec"]["ports"][0]["port"] == 8080
    # Changing the referenced ConfigMap is noticed without touching the HelmRelease.
    patch = json.dumps({"data": {"values.yaml": "replicaCount: 4\n"}})
    kube("kubectl", "-n", ns, "patch", "configmap", "web-values", "--type=merge", "-p", patch)
    obj = eventually(lambda: (o := get(kube, ns, "hr", "vf"))["status"]["history"][0]["revision"] == 2
                     and condition(o).get("reason") == "UpgradeSucceeded" and o)
    assert condition(obj)["status"] == "True"
    assert get(kube, ns, "deploy", "vf")["spec"]["replicas"] == 4


def test_version_constraint_and_newly_published_chart(operator: Operator, kube: Run, ns: str,
                                                      chart_repo: ChartRepo) -> None:
    name = f"constraint-{ns}"  # a chart name of this test's own, so publishing does not disturb others
    chart_repo.publish(name, "0.2.0")
    chart_repo.publish(name, "0.2.3")
    chart_repo.publish(name, "1.0.0")
    apply(kube, ns, hr("pick", chart_repo, chart=name, version="~0.2", interval="2s"))
    obj = ready(kube, ns, "pick")
    assert obj["status"]["lastAppliedRevision"] == "0.2.3"
    chart_repo.publish(name, "0.2.7")
    watched(kube, ns, "hr", "pick", lambda obj: obj["status"].get("lastAppliedRevision") == "0.2.7")
    assert get(kube, ns, "hr", "pick")["status"]["history"][0]["chartVersion"] == "0.2.7"


def test_bad_inputs_give_specific_conditions_and_recover(operator: Operator, kube: Run, ns: str,
                                                         chart_repo: ChartRepo) -> None:
    # chart not found
    apply(kube, ns, hr("bad", chart_repo, chart="nope"))
    obj = failing(kube, ns, "bad", "ChartNotFound")
    assert "nope" in condition(obj)["message"] and condition(obj, "Stalled")["status"] == "True"
    # the Event follows the status
    eventually(lambda: any(e["reason"] == "ChartNotFound" and e["type"] == "Warning" for e in events(kube, ns, "bad")))
    # version not found
    apply(kube, ns, hr("bad", chart_repo, version=">=9.0"))
    assert "9.0" in condition(failing(kube, ns, "bad", "VersionNotFound"))["message"]
    # repository unreachable (nothing listens there)
    unreachable = hr("bad", chart_repo).replace(chart_repo.url, "http://127.0.0.1:9")
    apply(kube, ns, unreachable)
    assert "unreachable" in condition(failing(kube, ns, "bad", "RepositoryUnreachable"))["message"]
    # values that are not YAML
    kube("kubectl", "-n", ns, "create", "configmap", "bad-values", "--from-literal=values.yaml=a: [unclosed")
    apply(kube, ns, hr("bad", chart_repo, valuesFrom=[{"kind": "ConfigMap", "name": "bad-values"}]))
    message = condition(failing(kube, ns, "bad", "ValuesInvalid"))["message"]
    assert "bad-values" in message and "not valid YAML" in message
    # a chart that does not render
    apply(kube, ns, hr("bad", chart_repo, chart="broken"))
    assert "deliberately broken" in condition(failing(kube, ns, "bad", "RenderFailed"))["message"]
    # the target namespace does not exist
    apply(kube, ns, hr("bad", chart_repo, targetNamespace="nowhere"))
    assert "nowhere" in condition(failing(kube, ns, "bad", "NamespaceNotFound"))["message"]
    # fixed: the same object becomes Ready with nothing left over
    apply(kube, ns, hr("bad", chart_repo, version="0.1.0"))
    obj = ready(kube, ns, "bad")
    assert not condition(obj, "Stalled")


@pytest.mark.helm_versions
def test_wait_timeout_is_reported(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo) -> None:
    apply(kube, ns, hr("slow", chart_repo, version="0.1.0", timeout="3s"))
    ready(kube, ns, "slow")
    kube("kubectl", "-n", ns, "annotate", "deploy", "slow", "sandbox.helmop.dev/simulate=fail")
    apply(kube, ns, hr("slow", chart_repo, version="0.1.0", timeout="3s", values={"replicaCount": 2}))
    obj = failing(kube, ns, "slow", "Timeout")
    assert obj["status"]["upgradeFailures"] == 1 and obj["status"]["lastAttemptedReleaseAction"] == "upgrade"
    # judged by helmop from its shared watch (helm did not wait), within the release's 3 s, as helm's own wait
    assert obj["status"]["readinessCheck"] == {"by": "helmop"}
    message = condition(obj)["message"]
    assert "timed out: not healthy within 3s: Deployment/slow: " in message and "/2 replicas ready" in message
    stall = watched(kube, ns, "hr", "slow", lambda obj: condition(obj, "Stalled"))
    assert stall["status"] == "True" and stall["reason"] == "RetriesExceeded"
    assert condition(obj, "Released")["status"] == "False"


def test_secret_values_never_reach_status_or_events(operator: Operator, kube: Run, ns: str,
                                                    chart_repo: ChartRepo) -> None:
    kube("kubectl", "-n", ns, "create", "secret", "generic", "creds", "--from-literal=password=hunter2-TOPSECRET")
    apply(kube, ns, hr("sec", chart_repo, chart="secretive",
                       valuesFrom=[{"kind": "Secret", "name": "creds", "valuesKey": "password",
                                    "targetPath": "password"}]))
    obj = failing(kube, ns, "sec", "RenderFailed")
    assert "bad password ***" in condition(obj)["message"]
    everything = json.dumps(obj) + json.dumps(events(kube, ns, "sec"))
    assert "hunter2" not in everything


@pytest.mark.helm_versions
def test_release_of_someone_else_is_not_taken_over(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo,
                                                   tmp_path: Any) -> None:
    kube("helm", "install", "taken", "demo", "--repo", chart_repo.url, "--version", "0.1.0", "-n", ns)
    apply(kube, ns, hr("taken", chart_repo, version="0.1.0"))
    obj = failing(kube, ns, "taken", "ReleaseOwnedElsewhere")
    assert condition(obj, "Stalled")["status"] == "True"
    # A second HelmRelease aiming at the release of a first one is refused the same way.
    apply(kube, ns, hr("first", chart_repo, version="0.1.0"))
    ready(kube, ns, "first")
    apply(kube, ns, hr("second", chart_repo, version="0.2.0", releaseName="first"))
    failing(kube, ns, "second", "ReleaseOwnedElsewhere")
    releases = json.loads(kube("helm", "list", "-n", ns, "-o", "json").stdout)
    assert {(r["name"], r["chart"]) for r in releases} == {("taken", "demo-0.1.0"), ("first", "demo-0.1.0")}
    # Deleting the refused HelmRelease leaves the other's release alone.
    kube("kubectl", "-n", ns, "delete", "hr", "second", "--timeout=30s")
    assert "first" in kube("helm", "list", "-n", ns, "-q").stdout.split()


def test_suspend_and_requested_at(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo) -> None:
    apply(kube, ns, hr("sus", chart_repo, version="0.1.0"))
    ready(kube, ns, "sus")
    # The release vanishes behind helmop's back; requestedAt makes it come back at once.
    kube("helm", "uninstall", "sus", "-n", ns)
    kube("kubectl", "-n", ns, "annotate", "hr", "sus", "helmop.dev/requestedAt=one")
    eventually(lambda: "sus" in kube("helm", "list", "-n", ns, "-q").stdout.split())
    watched(kube, ns, "hr", "sus", lambda obj: obj["status"].get("lastHandledReconcileAt") == "one")
    # Suspended: changes are not acted on, and deletion leaves the release in place.
    reconciles = operator.reconciles("HelmRelease")
    before = len(operator.helm_actions())
    apply(kube, ns, hr("sus", chart_repo, version="0.1.0", suspend=True, values={"replicaCount": 5}))
    eventually(lambda: operator.reconciles("HelmRelease") > reconciles)  # the new generation was looked at
    assert len(operator.helm_actions()) == before
    assert get(kube, ns, "deploy", "sus")["spec"]["replicas"] == 1
    kube("kubectl", "-n", ns, "delete", "hr", "sus", "--timeout=30s")
    assert "sus" in kube("helm", "list", "-n", ns, "-q").stdout.split()


@pytest.mark.helm_versions
def test_release_stuck_pending_is_unlocked(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo) -> None:
    apply(kube, ns, hr("stuck", chart_repo, version="0.1.0"))
    ready(kube, ns, "stuck")
    # As if the operator had been killed mid-upgrade: the newest record says pending-upgrade.
    secret = get(kube, ns, "secret", "sh.helm.release.v1.stuck.v1")
    from helmop.helm import storage

    record = storage.decode(secret)
    record["info"]["status"] = "pending-upgrade"
    secret["data"]["release"] = storage.encode(record)
    secret["metadata"]["labels"]["status"] = "pending-upgrade"
    kube("kubectl", "-n", ns, "replace", "-f", "-", stdin=json.dumps(secret))
    kube("kubectl", "-n", ns, "annotate", "hr", "stuck", "helmop.dev/requestedAt=unlock")
    eventually(lambda: any(e["reason"] == "ReleaseUnlocked" for e in events(kube, ns, "stuck")))
    obj = eventually(lambda: (o := get(kube, ns, "hr", "stuck"))["status"]["history"][0]["revision"] == 2 and o)
    assert condition(obj)["status"] == "True"


def test_metrics_and_health_endpoints(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo) -> None:
    import requests

    apply(kube, ns, hr("metered", chart_repo, version="0.1.0"))
    ready(kube, ns, "metered")

    def scrape() -> str:
        return requests.get(f"{operator.metrics_url}/metrics", timeout=5).text

    # (the gauge follows the operator's watch, which may bring the Ready status a moment after the test saw it)
    ready_line = f'helmop_resource_ready{{kind="HelmRelease",name="metered",namespace="{ns}"}} 1.0'
    text = eventually(lambda: (t := scrape()) and ready_line in t and t)
    assert f'helmop_resource_suspended{{kind="HelmRelease",name="metered",namespace="{ns}"}} 0.0' in text
    assert 'helmop_helm_actions_total{action="install",result="success"}' in text
    assert 'helmop_helm_action_duration_seconds_bucket{action="install"' in text
    assert 'helmop_reconcile_duration_seconds_count{kind="HelmRelease",result="done"}' in text
    assert 'helmop_cache_requests_total{cache="charts",result="miss"}' in text
    assert requests.get(f"{operator.metrics_url}/healthz", timeout=5).text == "ok"
    assert requests.get(f"{operator.metrics_url}/readyz", timeout=5).status_code == 200


@pytest.mark.helm_versions
def test_fields_the_api_server_does_not_know_are_judged_as_raw_helm_sees_them(
        operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo) -> None:
    """helm runs without its client-side OpenAPI check (it only fetched schemas to learn that the server
    validates fields): the API server still judges, as for raw helm: helm 4 asks for strict validation and
    fails, helm 3 is warned and the field dropped."""
    apply(kube, ns, hr("strict", chart_repo, chart="unknownfield", version="0.1.0"))
    if operator.helm == "helm":
        message = condition(failing(kube, ns, "strict", "InstallFailed"))["message"]
        assert 'unknown field "bogus"' in message
    else:
        ready(kube, ns, "strict")
        assert "bogus" not in get(kube, ns, "configmap", "strict-extra")
    assert any(a.startswith("upgrade strict ") and "--disable-openapi-validation" in a
               for a in operator.helm_actions())


@pytest.mark.helm_versions
def test_service_account_impersonation(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo) -> None:
    kube("kubectl", "-n", ns, "create", "serviceaccount", "deployer")
    apply(kube, ns, hr("imp", chart_repo, version="0.1.0", serviceAccountName="deployer"))
    obj = failing(kube, ns, "imp", "InstallFailed")
    message = condition(obj)["message"]
    assert "forbidden" in message and f"system:serviceaccount:{ns}:deployer" in message
    assert not get(kube, ns, "deploy", "imp")  # helm acted with the account's (absent) rights
    kube("kubectl", "-n", ns, "create", "rolebinding", "deployer", "--clusterrole=cluster-admin",
         f"--serviceaccount={ns}:deployer")
    kube("kubectl", "-n", ns, "annotate", "hr", "imp", "helmop.dev/resetAt=granted")  # one more try
    ready(kube, ns, "imp")
    assert get(kube, ns, "deploy", "imp")


ENUM_CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: rules.{{ .Values.group }}}
spec:
  group: {{ .Values.group }}
  scope: Namespaced
  names: {plural: rules, singular: rule, kind: Rule}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          op:
            type: string
            enum:
            - =
            - "!="
            - y
            - "on"
            - 0777
"""


@pytest.mark.helm_versions
def test_a_chart_whose_yaml_only_go_reads_right_installs(operator: Operator, kube: Run, ns: str,
                                                         chart_repo: ChartRepo) -> None:
    """YAML 1.1's "=" (which PyYAML cannot build), y/on (booleans to Go) and 0777 (octal to Go) in a chart's
    manifest: helm installs it, and helmop reads the manifest as Go does (no exception, the inventory)."""
    chart = f"enums-{ns}"
    chart_repo.publish(chart, "0.1.0", templates={"crd.yaml": ENUM_CRD})
    apply(kube, ns, hr("enums", chart_repo, chart=chart, version="0.1.0", values={"group": f"{ns}.example.com"}))
    obj = ready(kube, ns, "enums")
    ids = [e["id"] for e in obj["status"]["inventory"]["entries"]]
    assert f"_rules.{ns}.example.com_apiextensions.k8s.io_CustomResourceDefinition" in ids
    served = json.loads(kube("kubectl", "get", "crd", f"rules.{ns}.example.com", "-o", "json").stdout)
    enum = served["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["op"]["enum"]
    assert enum == ["=", "!=", True, "on", 511]  # what Go made of it: helm and helmop agree


def test_a_chart_url_is_fetched_from_its_mirror(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo) -> None:
    """--chart-mirror: a HelmRelease written for a public repository runs unchanged behind the mirror (the test
    operator mirrors MIRRORED to the test repository), and its status names the repository it was written for."""
    body = yaml.safe_load(hr("mirrored", chart_repo, version="0.1.0"))
    body["spec"]["chart"]["repository"]["url"] = MIRRORED
    apply(kube, ns, yaml.safe_dump(body))
    obj = ready(kube, ns, "mirrored")
    assert obj["spec"]["chart"]["repository"]["url"] == MIRRORED
    assert chart_repo.url not in yaml.safe_dump(obj["status"])
