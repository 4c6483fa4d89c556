"""One helmop delivering to other clusters (spec.kubeConfig): the management sandbox holds the HelmReleases and
ConfigSyncs, their status and Events; two more sandboxes are the remote clusters that get the releases (their
storage included), the applied objects, the drift corrections and the uninstalls. Stopping one remote leaves
the other and the operator's own health untouched."""

from __future__ import annotations

import base64
import json
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helmop_sandbox import Sandbox

from tests.chartrepo import ChartRepo
from tests.conftest import _runner
from tests.gitserver import Repo
from tests.tools import Run, eventually

from .conftest import GITREPO, Operator, apply, condition, events, failing, get, hr, ready, settled, watched

pytestmark = pytest.mark.timeout(300)


class Remote:
    """A sandbox as a remote cluster; one with ``state`` can be stopped and started again (same port, CA, token
    and objects)."""

    def __init__(self, state: Path | None = None) -> None:
        self.state = state
        self.sandbox = Sandbox(ready_delay=0.05, state_dir=state).start()
        self.kube = _runner(self.sandbox)

    def kubeconfig(self) -> str:
        return self.sandbox.kubeconfig.read_text()

    def stop(self) -> None:
        self.sandbox.stop()

    def restart(self) -> None:
        self.sandbox = Sandbox(ready_delay=0.05, state_dir=self.state).start()
        self.kube = _runner(self.sandbox)


@pytest.fixture(scope="module")
def remotes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Remote, Remote]]:
    east, west = Remote(), Remote(tmp_path_factory.mktemp("west-state"))
    yield east, west
    for remote in (east, west):
        remote.stop()


def kubeconfig_secret(kube: Run, ns: str, name: str, text: str, *, key: str = "value",
                      cluster: str = "") -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns,
                                                                 "labels": {"helmop.dev/cluster": cluster} if cluster
                                                                 else {}},
              "data": {key: base64.b64encode(text.encode()).decode()}}
    kube("kubectl", "apply", "-f", "-", stdin=json.dumps(secret))


def release_secrets(kube: Run, ns: str, release: str) -> list[dict[str, Any]]:
    listed = get(kube, ns, "secrets", "-l", f"owner=helm,name={release}")
    return list(listed.get("items") or [])


def remote_release(kube: Run, ns: str, name: str, repo: ChartRepo, **spec: Any) -> str:
    return hr(name, repo, kubeConfig={"secretRef": {"name": "east"}}, targetNamespace=ns,
              install={"createNamespace": True}, **spec)


def test_a_release_lives_on_the_remote_cluster(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo,
                                               remotes: tuple[Remote, Remote]) -> None:
    east, _ = remotes
    kubeconfig_secret(kube, ns, "east", east.kubeconfig(), cluster="east")
    # dependsOn across targets: a local release waits for the remote one (both judged by their Ready here)
    apply(kube, ns, hr("api", chart_repo, dependsOn=[{"name": "web"}]))
    apply(kube, ns, remote_release(kube, ns, "web", chart_repo, driftDetection={"mode": "enabled"},
                                   values={"replicaCount": 2}))
    assert ready(kube, ns, "web")["status"]["cluster"] == "east"
    assert "cluster" not in ready(kube, ns, "api")["status"] and get(kube, ns, "deploy", "api")
    assert operator.metric("helmop_remote_cluster_up", cluster="east") == 1
    assert operator.metric("helmop_remote_cluster_objects", cluster="east") >= 1
    # helm's records and the objects are there, not here
    assert [s["metadata"]["labels"]["version"] for s in release_secrets(east.kube, ns, "web")] == ["1"]
    assert not release_secrets(kube, ns, "web")
    assert get(east.kube, ns, "deploy", "web")["spec"]["replicas"] == 2
    assert not get(kube, ns, "deploy", "web")
    # drift on the remote object is corrected, without a new revision
    east.kube("kubectl", "-n", ns, "scale", "deploy/web", "--replicas=5")
    settled(kube, ns, "hr", "web")
    watched(east.kube, ns, "deploy", "web", lambda obj: obj["spec"]["replicas"] == 2, timeout=30)
    # the Event follows the status
    eventually(lambda: any(e["reason"] == "DriftCorrected" for e in events(kube, ns, "web")))
    assert len(release_secrets(east.kube, ns, "web")) == 1
    # deleting the HelmRelease uninstalls there
    kube("kubectl", "-n", ns, "delete", "hr", "api", "web", "--wait=true", "--timeout=60s")
    assert not release_secrets(east.kube, ns, "web")
    assert not get(east.kube, ns, "deploy", "web")


def _a_look_compares_nothing(operator: Operator, kube: Run, ns: str, name: str) -> bool:
    """Whether a requested look at release ``name`` compared no object (and passed some over)."""
    compared = operator.metric("helmop_drift_checks_total", result="compared")
    skipped = operator.metric("helmop_drift_checks_total", result="skipped")
    settled(kube, ns, "hr", name)
    return (operator.metric("helmop_drift_checks_total", result="compared") == compared
            and operator.metric("helmop_drift_checks_total", result="skipped") > skipped)


def test_a_remote_release_is_watched_for_drift(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo,
                                               remotes: tuple[Remote, Remote]) -> None:
    """The remote's own watches (its kubeconfig's identity, the release's namespace there) feed the drift memory:
    a look at an unchanged remote release compares none of its objects, and a `kubectl scale` or a deleted Service
    there wakes the release (interval 1h, no request) and is corrected."""
    east, _ = remotes
    kubeconfig_secret(kube, ns, "east", east.kubeconfig(), cluster="east")
    apply(kube, ns, remote_release(kube, ns, "watched", chart_repo, driftDetection={"mode": "enabled"}))
    ready(kube, ns, "watched")
    revisions = len(release_secrets(east.kube, ns, "watched"))
    # (a change before the watches of its kinds started is seen by their first list, which wakes the release)
    east.kube("kubectl", "-n", ns, "scale", "deploy/watched", "--replicas=4")
    watched(east.kube, ns, "deploy", "watched", lambda obj: obj["spec"]["replicas"] == 1, timeout=20)
    east.kube("kubectl", "-n", ns, "delete", "svc", "watched")
    watched(east.kube, ns, "svc", "watched", lambda obj: bool(obj), timeout=20)
    assert len(release_secrets(east.kube, ns, "watched")) == revisions, "corrected without a new revision"

    eventually(lambda: _a_look_compares_nothing(operator, kube, ns, "watched"), timeout=30)
    assert _a_look_compares_nothing(operator, kube, ns, "watched")  # and the next look too
    watches = {(attrs.resource, attrs.namespace) for _, attrs in east.sandbox.audit if attrs.verb == "watch"}
    assert {("deployments", ns), ("services", ns), ("serviceaccounts", ns)} <= watches, watches


def test_a_remote_identity_that_may_not_watch_still_finds_drift(operator: Operator, kube: Run, ns: str,
                                                                 chart_repo: ChartRepo,
                                                                 remotes: tuple[Remote, Remote]) -> None:
    """A kubeconfig whose user may do anything in its namespace but watch: its objects are never passed over, and
    drift there is found at a look (nothing wakes the release for it)."""
    _, west = remotes
    west.kube("kubectl", "create", "namespace", ns)
    west.kube("kubectl", "-n", ns, "create", "serviceaccount", "deployer")
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "no-watch",
                                                                                          "namespace": ns},
            "rules": [{"apiGroups": ["*"], "resources": ["*"],
                       "verbs": ["get", "list", "create", "update", "patch", "delete"]}]}
    west.kube("kubectl", "apply", "-f", "-", stdin=json.dumps(role))
    west.kube("kubectl", "-n", ns, "create", "rolebinding", "deployer", "--role=no-watch",
              f"--serviceaccount={ns}:deployer")
    config = yaml.safe_load(west.kubeconfig())
    config["users"][0]["user"] = {"token": west.kube("kubectl", "-n", ns, "create", "token", "deployer").stdout.strip()}
    kubeconfig_secret(kube, ns, "limited", yaml.safe_dump(config))
    apply(kube, ns, hr("limited", chart_repo, kubeConfig={"secretRef": {"name": "limited"}}, targetNamespace=ns,
                       driftDetection={"mode": "warn"}))
    ready(kube, ns, "limited")
    settled(kube, ns, "hr", "limited")  # its kinds were asked to be watched after its first status
    asked = {attrs.resource for who, attrs in west.sandbox.audit
               if who == f"system:serviceaccount:{ns}:deployer" and attrs.verb in ("list", "watch")}
    assert "deployments" in asked, "the remote's watches are made as its kubeconfig's user"
    for _ in range(2):
        compared = operator.metric("helmop_drift_checks_total", result="compared")
        settled(kube, ns, "hr", "limited")
        assert operator.metric("helmop_drift_checks_total", result="compared") >= compared + 3, "compared every look"
    west.kube("kubectl", "-n", ns, "scale", "deploy/limited", "--replicas=4")
    settled(kube, ns, "hr", "limited")
    assert "Deployment/limited: /spec/replicas" in condition(get(kube, ns, "hr", "limited"), "Drifted")["message"]


def test_a_config_sync_applies_and_prunes_on_the_remote_cluster(operator: Operator, kube: Run, ns: str, repo: Repo,
                                                                 remotes: tuple[Remote, Remote]) -> None:
    east, _ = remotes
    east.kube("kubectl", "create", "namespace", ns)
    kubeconfig_secret(kube, ns, "east", east.kubeconfig(), key="value.yaml")
    repo.commit({"apps/a.yaml": f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a, namespace: {ns}}}\n"
                                "data: {k: v}\n",
                 "apps/b.yaml": f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: b, namespace: {ns}}}\n"})
    apply(kube, ns, yaml.safe_dump_all([
        {"apiVersion": "helmop.dev/v1alpha1", "kind": "GitRepository", "metadata": {"name": "config"},
         "spec": {"url": repo.url, "interval": "1h", "ref": {"branch": "main"}}},
        {"apiVersion": "helmop.dev/v1alpha1", "kind": "ConfigSync", "metadata": {"name": "apps"},
         "spec": {"sourceRef": {"name": "config"}, "path": "apps", "interval": "1h", "wait": True,
                  "kubeConfig": {"secretRef": {"name": "east"}}}}]))

    def synced(names: set[str]) -> bool:
        sync = get(kube, ns, "configsync", "apps")
        return condition(sync).get("status") == "True" and {
            e["metadata"]["name"] for e in get(east.kube, ns, "configmaps")["items"]} >= names
    eventually(lambda: synced({"a", "b"}), timeout=60)
    assert not get(kube, ns, "configmap", "a"), "applied to the remote cluster only"
    repo.commit({"apps/b.yaml": None})
    kube("kubectl", "-n", ns, "annotate", GITREPO, "config", f"helmop.dev/requestedAt={uuid.uuid4().hex}")
    watched(east.kube, ns, "configmap", "b", lambda obj: not obj, timeout=60)
    kube("kubectl", "-n", ns, "delete", "configsync", "apps", "--wait=true", "--timeout=60s")
    assert not get(east.kube, ns, "configmap", "a"), "deleted with the ConfigSync (MirrorPrune)"


def test_flux_helmrelease_with_kubeconfig(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo,
                                          remotes: tuple[Remote, Remote]) -> None:
    _, west = remotes
    kubeconfig_secret(kube, ns, "west", west.kubeconfig())
    apply(kube, ns, yaml.safe_dump_all([
        {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmRepository", "metadata": {"name": "charts"},
         "spec": {"url": chart_repo.url, "interval": "1h"}},
        {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease", "metadata": {"name": "podinfo"},
         "spec": {"interval": "1h", "targetNamespace": ns, "install": {"createNamespace": True},
                  "kubeConfig": {"secretRef": {"name": "west"}},
                  "chart": {"spec": {"chart": "demo", "version": "0.1.0",
                                     "sourceRef": {"kind": "HelmRepository", "name": "charts"}}},
                  "values": {"fullnameOverride": "podinfo"}}}]))
    watched(kube, ns, "helmreleases.helm.toolkit.fluxcd.io", "podinfo", lambda obj: condition(obj).get("status")
               == "True", timeout=60)
    assert release_secrets(west.kube, ns, "podinfo") and not release_secrets(kube, ns, "podinfo")


def test_an_unreachable_cluster_holds_only_its_own_releases(operator: Operator, kube: Run, ns: str,
                                                            chart_repo: ChartRepo,
                                                            remotes: tuple[Remote, Remote]) -> None:
    east, west = remotes
    kubeconfig_secret(kube, ns, "east", east.kubeconfig())
    kubeconfig_secret(kube, ns, "west", west.kubeconfig())
    apply(kube, ns, hr("near", chart_repo, kubeConfig={"secretRef": {"name": "east"}}, targetNamespace=ns,
                       install={"createNamespace": True}))
    apply(kube, ns, hr("far", chart_repo, kubeConfig={"secretRef": {"name": "west"}}, targetNamespace=ns,
                       install={"createNamespace": True}))
    ready(kube, ns, "near")
    ready(kube, ns, "far")
    west.stop()
    try:
        kube("kubectl", "-n", ns, "annotate", "hr", "far", f"helmop.dev/requestedAt={uuid.uuid4().hex}")
        said = failing(kube, ns, "far", "ClusterUnreachable")
        address = west.sandbox.url.removeprefix("https://")
        assert address in condition(said)["message"] and said["status"]["cluster"] == address, said["status"]
        assert operator.metric("helmop_remote_cluster_up", cluster=address) == 0
        # the other remote keeps its pace: an upgrade there is done as usual
        started = time.monotonic()
        apply(kube, ns, hr("near", chart_repo, kubeConfig={"secretRef": {"name": "east"}}, targetNamespace=ns,
                           install={"createNamespace": True}, values={"replicaCount": 3}))
        ready(kube, ns, "near", generation=2)
        assert time.monotonic() - started < 30
        health = urllib.request.urlopen(f"{operator.metrics_url}/healthz", timeout=5)
        assert health.status == 200
    finally:
        west.restart()
    ready(kube, ns, "far")
    assert [s["metadata"]["labels"]["version"] for s in release_secrets(west.kube, ns, "far")] == ["1"], \
        "converged without a new revision"


def test_only_a_release_there_holds_a_deletion_while_its_cluster_is_down(operator: Operator, kube: Run, ns: str,
                                                                       chart_repo: ChartRepo,
                                                                       remotes: tuple[Remote, Remote]) -> None:
    """Flux's rule on deletion: an installed release waits for its cluster to answer, then is uninstalled there;
    a HelmRelease that never installed (its chart version does not exist) and a suspended one ask no cluster and
    go at once, although the same cluster does not answer."""
    _, west = remotes
    kubeconfig_secret(kube, ns, "west", west.kubeconfig())
    far = {"kubeConfig": {"secretRef": {"name": "west"}}, "targetNamespace": ns, "install": {"createNamespace": True}}
    apply(kube, ns, hr("kept", chart_repo, **far))
    apply(kube, ns, hr("never", chart_repo, version="9.9.9", **far))
    apply(kube, ns, hr("paused", chart_repo, suspend=True, **far))
    ready(kube, ns, "kept")
    assert "9.9.9" in condition(failing(kube, ns, "never", "VersionNotFound"))["message"]
    watched(kube, ns, "hr", "paused", lambda obj: obj.get("metadata", {}).get("finalizers"), timeout=30)
    west.stop()
    try:
        kube("kubectl", "-n", ns, "delete", "hr", "never", "paused", "--wait=true", "--timeout=30s")
        kube("kubectl", "-n", ns, "delete", "hr", "kept", "--wait=false")
        eventually(lambda: any(e["reason"] == "ClusterUnreachable" and e["type"] == "Warning"
                               for e in events(kube, ns, "kept")), timeout=60)
        assert get(kube, ns, "hr", "kept"), "held until its cluster answers"
    finally:
        west.restart()
    watched(kube, ns, "hr", "kept", lambda obj: not obj, timeout=60)
    assert not release_secrets(west.kube, ns, "kept"), "uninstalled there"


def test_kubeconfigs_helmop_refuses(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo,
                                    remotes: tuple[Remote, Remote], tmp_path: Path) -> None:
    east, _ = remotes
    config = yaml.safe_load(east.kubeconfig())
    marker = tmp_path / "ran"
    variants = {
        "exec": {"users": [{"name": "sandbox-admin", "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1", "command": "sh", "args": ["-c", f"touch {marker}"]}}}]},
        "tokenfile": {"users": [{"name": "sandbox-admin", "user": {
            "tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"}}]},
        "metadata": {"clusters": [{"name": "helmop-sandbox", "cluster": {"server": "https://169.254.169.254"}}]},
        "insecure": {"clusters": [{"name": "helmop-sandbox", "cluster": {
            "server": east.sandbox.url, "insecure-skip-tls-verify": True}}]},
    }
    for variant, change in variants.items():
        kubeconfig_secret(kube, ns, variant, yaml.safe_dump({**config, **change}))
        apply(kube, ns, hr(variant, chart_repo, kubeConfig={"secretRef": {"name": variant}}))
    for variant in variants:
        said = condition(failing(kube, ns, variant, "InvalidKubeConfig"))
        assert f"Secret {ns}/{variant}" in said["message"], said
    assert not marker.exists(), "the exec plugin never ran"
    apply(kube, ns, hr("missing", chart_repo, kubeConfig={"secretRef": {"name": "nowhere"}}))
    assert "does not exist" in condition(failing(kube, ns, "missing", "KubeConfigNotFound"))["message"]


def test_workload_identity_of_a_service_account(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo,
                                                tmp_path: Path) -> None:
    """spec.kubeConfig.configMapRef with provider generic (Flux 2.7): a token of the ConfigMap's ServiceAccount,
    asked of the management cluster, which the remote trusts (here: the same signing key, as a federation)."""
    state = tmp_path / "federated"
    state.mkdir()
    assert operator.sandbox._http is not None
    (state / "signing.key").write_bytes(operator.sandbox._http.auth.signing_key)
    federated = Remote(state)
    try:
        federated.kube("kubectl", "create", "namespace", ns)
        federated.kube("kubectl", "-n", ns, "create", "rolebinding", "deployer", "--clusterrole=admin",
                       f"--serviceaccount={ns}:deployer")
        kube("kubectl", "-n", ns, "create", "serviceaccount", "deployer")
        ca = base64.b64decode(yaml.safe_load(federated.kubeconfig())["clusters"][0]["cluster"][
            "certificate-authority-data"]).decode()
        identity = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "far-away", "namespace": ns},
                    "data": {"provider": "generic", "address": federated.sandbox.url, "ca.crt": ca,
                             "serviceAccountName": "deployer"}}
        kube("kubectl", "apply", "-f", "-", stdin=json.dumps(identity))
        apply(kube, ns, hr("federated", chart_repo, kubeConfig={"configMapRef": {"name": "far-away"}},
                           targetNamespace=ns))
        ready(kube, ns, "federated")
        assert release_secrets(federated.kube, ns, "federated")
        writes = {who for who, attrs in federated.sandbox.audit if attrs.resource == "deployments"
                  and attrs.verb in ("create", "patch")}
        assert writes == {f"system:serviceaccount:{ns}:deployer"}, writes
        cloud = {**identity, "metadata": {"name": "cloud", "namespace": ns}, "data": {"provider": "aws",
                                                                                       "cluster": "arn:x"}}
        kube("kubectl", "apply", "-f", "-", stdin=json.dumps(cloud))
        apply(kube, ns, hr("cloud", chart_repo, kubeConfig={"configMapRef": {"name": "cloud"}}))
        assert "provider aws" in condition(failing(kube, ns, "cloud", "UnsupportedField"))["message"]
    finally:
        federated.stop()
