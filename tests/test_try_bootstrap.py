"""`helmop try` on repositories as `flux bootstrap` leaves them: the flux-system folder's gotk-components.yaml
(Flux's install: its namespace, the ServiceAccounts of its controllers and their bindings, the controllers
themselves and Flux's CRDs) applied for what the syncs rely on, the controllers and the CRDs left out; and a try
that cannot progress ends early instead of waiting its whole timeout."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from helmop.cli.trying import cluster as trycluster
from helmop.cli.trying import plan, repository, states
from helmop.cli.trying.report import Result, as_json, as_table
from tests.test_try import HELM, KUSTOMIZE, ORIGIN, SOURCE, _json, bare_repository, helmop_try
from tests.tools import tool

FLUX = {"app.kubernetes.io/instance": "flux-system", "app.kubernetes.io/part-of": "flux",
        "app.kubernetes.io/version": "v2.7.0"}  # the labels `flux install` puts on every object it writes
RBAC = "rbac.authorization.k8s.io/v1"


def _flux(kind: str, name: str, api: str = "v1", component: str = "", **rest: Any) -> dict[str, Any]:
    labels = {**FLUX, **({"app.kubernetes.io/component": component} if component else {})}
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if kind not in ("Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"):
        meta["namespace"] = "flux-system"
    return {"apiVersion": api, "kind": kind, "metadata": meta, **rest}


def gotk_components() -> str:
    """A realistic subset of the gotk-components.yaml `flux bootstrap` writes (one multi-document file, in its
    order): the namespace, Flux's kustomizations CRD, the controllers' ServiceAccounts, the RBAC binding
    kustomize-controller and helm-controller to cluster-admin, a ResourceQuota, a Service, a Deployment and a
    NetworkPolicy of the controllers."""
    subjects = [{"kind": "ServiceAccount", "name": name, "namespace": "flux-system"}
                for name in ("kustomize-controller", "helm-controller", "source-controller")]
    crd = _flux("CustomResourceDefinition", "kustomizations.kustomize.toolkit.fluxcd.io", "apiextensions.k8s.io/v1",
                spec={"group": "kustomize.toolkit.fluxcd.io", "scope": "Namespaced",
                      "names": {"kind": "Kustomization", "listKind": "KustomizationList", "plural": "kustomizations",
                                "singular": "kustomization", "shortNames": ["ks"]},
                      "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                          "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]})
    docs = [
        _flux("Namespace", "flux-system"),
        _flux("ResourceQuota", "critical-pods-flux-system", spec={"hard": {"pods": "1000"}}),
        crd,
        _flux("ClusterRole", "crd-controller-flux-system", RBAC, rules=[
            {"apiGroups": ["source.toolkit.fluxcd.io", "kustomize.toolkit.fluxcd.io", "helm.toolkit.fluxcd.io"],
             "resources": ["*"], "verbs": ["*"]}]),
        _flux("ClusterRoleBinding", "crd-controller-flux-system", RBAC, subjects=subjects, roleRef={
            "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "crd-controller-flux-system"}),
        _flux("ClusterRoleBinding", "cluster-reconciler-flux-system", RBAC, subjects=subjects[:2], roleRef={
            "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"}),
        *(_flux("ServiceAccount", s["name"], component=s["name"]) for s in subjects),
        _flux("Service", "source-controller", component="source-controller", spec={
            "type": "ClusterIP", "selector": {"app": "source-controller"},
            "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": "http"}]}),
        _flux("Deployment", "kustomize-controller", "apps/v1", component="kustomize-controller", spec={
            "replicas": 1, "selector": {"matchLabels": {"app": "kustomize-controller"}},
            "template": {"metadata": {"labels": {"app": "kustomize-controller"}}, "spec": {
                "serviceAccountName": "kustomize-controller",
                "containers": [{"name": "manager", "image": "ghcr.io/fluxcd/kustomize-controller:v1.7.0",
                                "args": ["--watch-all-namespaces=true", "--log-level=info"]}]}}}),
        _flux("NetworkPolicy", "allow-egress", "networking.k8s.io/v1", spec={
            "podSelector": {}, "policyTypes": ["Ingress", "Egress"], "ingress": [{"from": [{"podSelector": {}}]}],
            "egress": [{}]}),
    ]
    return "---\n" + "---\n".join(yaml.safe_dump(doc) for doc in docs)


def _layer(name: str, path: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": KUSTOMIZE, "kind": "Kustomization", "metadata": {"name": name, "namespace": "flux-system"},
            "spec": {"interval": "10m", "path": path, "prune": True, "serviceAccountName": "kustomize-controller",
                     "sourceRef": {"kind": "GitRepository", "name": "flux-system"}, **spec}}


SYNC = [{"apiVersion": SOURCE, "kind": "GitRepository",
         "metadata": {"name": "flux-system", "namespace": "flux-system"},
         "spec": {"interval": "1m", "url": ORIGIN, "ref": {"branch": "main"}, "secretRef": {"name": "flux-system"}}},
        {"apiVersion": KUSTOMIZE, "kind": "Kustomization",
         "metadata": {"name": "flux-system", "namespace": "flux-system"},
         "spec": {"interval": "10m", "path": "./clusters/staging", "prune": True,
                  "sourceRef": {"kind": "GitRepository", "name": "flux-system"}}}]
# As Flux's multi-tenancy repository: the flux-system Kustomization takes kustomize-controller's identity too
IMPERSONATED = """resources: [gotk-components.yaml, gotk-sync.yaml]
patches:
  - patch: |
      - op: add
        path: /spec/serviceAccountName
        value: kustomize-controller
    target:
      kind: Kustomization
      name: flux-system
"""


def bootstrap_layout(components: str) -> dict[str, str]:
    """clusters/staging as `flux bootstrap` writes it (gotk-components.yaml: ``components``), with two layers
    that take kustomize-controller's identity as Flux's multi-tenancy repository does: infrastructure (a
    Namespace and a ClusterRole: cluster-wide) and tenants (a tenant's namespace, its ServiceAccount bound to
    cluster-admin in it, and its own Kustomization as that ServiceAccount)."""
    tenant = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}},
              {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "dev-team", "namespace": "apps"}},
              {"apiVersion": RBAC, "kind": "RoleBinding", "metadata": {"name": "gotk-reconciler", "namespace": "apps"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
               "subjects": [{"kind": "ServiceAccount", "name": "dev-team", "namespace": "apps"}]},
              {**_layer("dev-team", "./apps", serviceAccountName="dev-team", sourceRef={
                  "kind": "GitRepository", "name": "flux-system", "namespace": "flux-system"}),
               "metadata": {"name": "dev-team", "namespace": "apps"}}]
    return {
        "clusters/staging/flux-system/gotk-components.yaml": components,
        "clusters/staging/flux-system/gotk-sync.yaml": "---\n" + "---\n".join(yaml.safe_dump(d) for d in SYNC),
        "clusters/staging/flux-system/kustomization.yaml": IMPERSONATED,
        "clusters/staging/infrastructure.yaml": yaml.safe_dump(_layer("infrastructure", "./infrastructure")),
        "clusters/staging/tenants.yaml": yaml.safe_dump(_layer("tenants", "./tenants",
                                                               dependsOn=[{"name": "infrastructure"}])),
        "infrastructure/policies.yaml": yaml.safe_dump_all([
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "policies"}},
            {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": "policy-viewer"},
             "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}]),
        "tenants/dev-team.yaml": yaml.safe_dump_all(tenant),
        "apps/config.yaml": yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap",
                                            "metadata": {"name": "app", "namespace": "apps"}, "data": {"a": "1"}}),
    }


def _kubectl(kubeconfig: str, *args: str) -> str:
    done = subprocess.run([tool("kubectl"), "--kubeconfig", kubeconfig, *args], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_bootstrap_repository_whose_layers_take_flux_identities_converges(tmp_path: Path) -> None:
    """Every layer (and flux-system itself) sets serviceAccountName: kustomize-controller: the ServiceAccount
    and its cluster-admin binding come from gotk-components.yaml, so everything is Ready (exit 0); Flux's
    controllers and its CRD are left out (said in the report), helmop's CRD serves the kind."""
    bare = bare_repository(tmp_path, bootstrap_layout(gotk_components()))
    done = helmop_try(str(bare), "-o", "json", "--timeout", "150s", "--keep")
    report = _json(done)
    kept = report.get("kept") or {}
    try:
        assert done.returncode == 0, (report["failures"], done.stderr[-5000:])
        kubeconfig = kept["kubeconfig"]
        accounts = _kubectl(kubeconfig, "get", "serviceaccounts", "-n", "flux-system", "-o", "name").split()
        assert "serviceaccount/kustomize-controller" in accounts
        binding = yaml.safe_load(_kubectl(kubeconfig, "get", "clusterrolebinding", "cluster-reconciler-flux-system",
                                          "-o", "yaml"))
        assert binding["roleRef"]["name"] == "cluster-admin"
        assert _kubectl(kubeconfig, "get", "deployments", "-A", "-o", "name").split() == []
        crd = yaml.safe_load(_kubectl(kubeconfig, "get", "crd", "kustomizations.kustomize.toolkit.fluxcd.io",
                                      "-o", "yaml"))
        assert "app.kubernetes.io/part-of" not in (crd["metadata"].get("labels") or {})
        assert _kubectl(kubeconfig, "get", "configmap", "app", "-n", "apps", "-o", "jsonpath={.data.a}") == "1"
    finally:
        if kept.get("stop"):
            subprocess.run([kept["stop"]], timeout=60, check=True)
    objects = {f"{o['kind']} {o['namespace']}/{o['name']}": o for o in report["objects"]}
    for name in ("flux-system/flux-system", "flux-system/infrastructure", "flux-system/tenants", "apps/dev-team"):
        assert objects[f"Kustomization {name}"]["state"] == "Ready", objects
    assert sorted(report["leftOut"]) == [
        "CustomResourceDefinition kustomizations.kustomize.toolkit.fluxcd.io",
        "Deployment flux-system/kustomize-controller",
        "NetworkPolicy flux-system/allow-egress", "ResourceQuota flux-system/critical-pods-flux-system",
        "Service flux-system/source-controller"]
    assert report["made"] == [
        "Kustomization flux-system/flux-system: spec.patches deleting the 5 objects of Flux's install left out from "
        "what it applies",
        "Secret flux-system/flux-system: empty, for GitRepository flux-system/flux-system's secretRef (the private "
        "copy needs no credentials)"]
    assert "applied revision" in objects["Kustomization flux-system/flux-system"]["message"]
    assert " 11 object(s)" in objects["Kustomization flux-system/flux-system"]["message"]  # 16 built, 5 left out


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A loopback port bound and never listening: every connection to it is refused."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]


def test_a_try_that_cannot_progress_ends_early_naming_why(tmp_path: Path, refusing_port: int) -> None:
    """The only failure is a chart repository nobody answers: the HelmRepository and the HelmRelease fail with
    the same reason at every retry; try ends (exit 1) once that has lasted a minute, long before its
    default 10-minute timeout, and the report says it ended early and why."""
    objects = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "podinfo"}},
               {"apiVersion": SOURCE, "kind": "HelmRepository", "metadata": {"name": "podinfo",
                                                                             "namespace": "flux-system"},
                "spec": {"interval": "1h", "url": f"http://127.0.0.1:{refusing_port}/charts"}},
               {"apiVersion": HELM, "kind": "HelmRelease", "metadata": {"name": "podinfo", "namespace": "podinfo"},
                "spec": {"interval": "1h", "chart": {"spec": {"chart": "podinfo", "version": "6.x", "sourceRef": {
                    "kind": "HelmRepository", "name": "podinfo", "namespace": "flux-system"}}}}}]
    files = {"clusters/staging/flux-system/gotk-sync.yaml": "---\n" + "---\n".join(yaml.safe_dump(d) for d in SYNC),
             "clusters/staging/flux-system/kustomization.yaml": "resources: [gotk-sync.yaml]\n",
             "clusters/staging/podinfo.yaml": yaml.safe_dump_all(objects)}
    bare = bare_repository(tmp_path, files)
    started = time.monotonic()
    done = helmop_try(str(bare), "-o", "json")
    took = time.monotonic() - started
    report = _json(done)
    assert done.returncode == 1, (report["failures"], done.stderr[-5000:])
    assert report["verdict"] == "failing" and 60 <= report["seconds"] < 100 and took < 150, (report, took)
    assert "HelmRepository flux-system/podinfo" in report["endedEarly"]
    assert "--wait-for-transient" in report["endedEarly"]
    failures = {f["object"]: f for f in report["failures"]}
    source = failures["HelmRepository flux-system/podinfo"]
    assert source["state"] == "Failed" and f"127.0.0.1:{refusing_port}" in source["message"], source
    assert source["message"].startswith("the same for ")
    release = failures.pop("HelmRelease podinfo/podinfo")  # it fetches the chart itself: failing alike
    assert release["state"] == "Failed" and release["reason"] == "RepositoryUnreachable", release
    assert set(failures) <= {"HelmRepository flux-system/podinfo", "HelmChart flux-system/podinfo-podinfo"}


# What needs no sandbox: the plan of a bootstrap repository, the patience, the verdict and the report.

def _plan(tmp_path: Path, files: dict[str, str]) -> plan.Plan:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found = plan.tree_objects(tmp_path)
    path = plan.cluster_folder(found, tmp_path, None, "")
    objects = [item for item in found if plan.file_of(item).startswith(f"{path}/")]  # the folder, unbuilt
    served = repository.Served(tmp_path / "served.git", "0" * 40, tmp_path, "t",
                               frozenset({"github.com/example/fleet"}), "fleet")
    return plan.plan(served, found, path, objects, {})


def test_the_plan_keeps_what_syncs_rely_on_of_flux_install(tmp_path: Path) -> None:
    planned = _plan(tmp_path, bootstrap_layout(gotk_components()))
    applied = {plan.title(item) for item in planned.applied}
    assert {"Namespace flux-system", "ServiceAccount flux-system/kustomize-controller",
            "ClusterRoleBinding cluster-reconciler-flux-system", "ClusterRole crd-controller-flux-system",
            "GitRepository flux-system/flux-system", "Kustomization flux-system/flux-system"} <= applied
    assert not applied & set(planned.left_out) and len(planned.left_out) == 5
    assert not any("made" in title for title in planned.made if "ServiceAccount" in title)  # the tree has them
    [sync] = [item for item in planned.applied if plan.title(item) == "Kustomization flux-system/flux-system"]
    deletes = [yaml.safe_load(patch["patch"]) for patch in sync.obj["spec"]["patches"]]
    assert {(d["$patch"], d["kind"], d["metadata"]["name"]) for d in deletes} == {
        ("delete", "CustomResourceDefinition", "kustomizations.kustomize.toolkit.fluxcd.io"),
        ("delete", "Deployment", "kustomize-controller"), ("delete", "Service", "source-controller"),
        ("delete", "NetworkPolicy", "allow-egress"), ("delete", "ResourceQuota", "critical-pods-flux-system")}
    [layer] = [item for item in planned.applied if plan.title(item) == "Kustomization flux-system/infrastructure"]
    assert "patches" not in layer.obj["spec"]  # it does not apply the cluster folder


def test_a_placeholder_install_gets_the_identities_flux_install_makes(tmp_path: Path) -> None:
    """Flux's multi-tenancy repository leaves gotk-components.yaml to bootstrap (a comment): the ServiceAccount
    its syncs impersonate is made, bound to cluster-admin as `flux install` binds it; a tenant's own
    ServiceAccount (declared in the tree) is not."""
    planned = _plan(tmp_path, bootstrap_layout("# This file will be generated automatically by flux boostrap.\n"))
    made = {plan.title(item): item.obj for item in planned.applied if item.origin == "(made by helmop try)"}
    assert set(made) == {"Secret flux-system/flux-system", "ServiceAccount flux-system/kustomize-controller",
                         "ClusterRoleBinding cluster-reconciler-flux-system"}
    binding = made["ClusterRoleBinding cluster-reconciler-flux-system"]
    assert binding["roleRef"]["name"] == "cluster-admin"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "kustomize-controller",
                                    "namespace": "flux-system"}]
    assert planned.left_out == []


def _failing(name: str, reason: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": SOURCE, "kind": "HelmRepository", "metadata": {"name": name, "namespace": "flux-system",
                                                                         "generation": 1},
            "spec": {"interval": "1h", **spec}, "status": {"conditions": [
                {"type": "Ready", "status": "False", "reason": reason, "message": "refused",
                 "observedGeneration": 1}]}}


def test_patience_is_a_minute_or_two_retry_intervals() -> None:
    assert states.patience(_failing("a", "X")) == states.PATIENCE
    assert states.patience(_failing("a", "X", retryInterval="2m")) == 240
    assert states.patience(_failing("a", "X", retryInterval="not-a-duration")) == states.PATIENCE
    release = {"spec": {"upgrade": {"strategy": {"name": "RetryOnFailure"}},
                        "install": {"strategy": {"name": "RetryOnFailure", "retryInterval": "10s"}}}}
    assert states.patience(release) == 2 * states.RETRY_ON_FAILURE  # upgrade's default 5m is the longer


class _Cluster:
    """What follow() lists: one HelmRepository, as ``script`` says it is at each look (0.5 s apart)."""

    def __init__(self, script: Callable[[int], dict[str, Any]]) -> None:
        self.script = script
        self.looks = 0

    async def list(self, path: str) -> list[dict[str, Any]]:
        if not path.startswith("/apis/source.toolkit.fluxcd.io/") or not path.endswith("/helmrepositories"):
            return []
        self.looks += 1
        return [self.script(self.looks)]


def _follow(cluster: _Cluster, timeout: float, patient: bool = False) -> tuple[dict[str, states.Tracked], str]:
    return asyncio.run(trycluster.follow(cluster, trycluster.followed_kinds(True), [],  # type: ignore[arg-type]
                                         time.monotonic(), timeout, lambda *_: None, patient))


def _retrying(obj: dict[str, Any]) -> dict[str, Any]:
    """The object while the operator retries it: Ready Unknown (Progressing)."""
    return {**obj, "status": {"conditions": [{"type": "Ready", "status": "Unknown", "reason": "Progressing",
                                              "message": "fetching", "observedGeneration": 1}]}}


def test_follow_ends_once_a_failure_is_unchanged_for_its_patience(monkeypatch: pytest.MonkeyPatch) -> None:
    """Failing alike for its patience ends the follow as "failing", long before the timeout; a retry in
    progress between two failures does not restart the clock, a new reason does; --wait-for-transient waits
    for the timeout."""
    monkeypatch.setattr(states, "PATIENCE", 1.5)
    cluster = _Cluster(lambda look: _failing("charts", "FetchFailed"))
    table, found = _follow(cluster, 30)
    [item] = table.values()
    assert found == "failing" and item.state == "Failed" and cluster.looks < 8, cluster.looks
    assert re.fullmatch(r"the same for 2s \(Failed: FetchFailed\): refused", item.message), item.message

    retried = _Cluster(lambda look: _retrying(_failing("charts", "FetchFailed")) if look % 3 == 0
                       else _failing("charts", "FetchFailed"))
    assert _follow(retried, 30)[1] == "failing" and retried.looks < 10, retried.looks

    reasons = _Cluster(lambda look: _failing("charts", ("FetchFailed", "IndexationFailed")[look // 3 % 2]))
    assert _follow(reasons, 4)[1] == "timeout"  # a new reason every 1.5 s: never the same for its patience

    patient = _Cluster(lambda look: _failing("charts", "FetchFailed"))
    table, found = _follow(patient, 2.5, patient=True)
    assert found == "timeout" and [item.state for item in table.values()] == ["TimedOut"]


def test_the_report_of_a_try_that_ended_early() -> None:
    failed = states.Tracked("HelmRepository", "source.toolkit.fluxcd.io", "flux-system", "charts", "Failed",
                            "FetchFailed", "the same for 61s (Failed: FetchFailed): connection refused")
    result = Result("fleet@main (abc)", "a" * 40, "clusters/dev", True, "failing", 63.0, {failed.key: failed})
    report = json.loads(as_json(result))
    assert report["converged"] is False and report["verdict"] == "failing"
    assert report["endedEarly"].startswith("ended before the timeout: nothing could progress. HelmRepository "
                                           "flux-system/charts kept failing")
    assert "with the same reason for 60s or more" in report["endedEarly"]
    table = as_table(result)
    assert "✗ not converged (failing, 63.0s; fleet@main (abc), clusters/dev):\n  ended before the timeout" in table
    assert json.loads(as_json(Result("f", "a" * 40, "", True, "stuck", 1.0)))["endedEarly"] is None


def test_a_bootstrap_repository_with_placeholders_converges(tmp_path: Path) -> None:
    """As Flux's multi-tenancy repository: gotk-components.yaml and gotk-sync.yaml left for bootstrap to write (a
    comment each), every layer as kustomize-controller: try makes its ServiceAccount and binding, and the
    GitRepository the layers name; everything is Ready."""
    placeholder = "# This file will be generated automatically by flux boostrap.\n"
    files = {**bootstrap_layout(placeholder), "clusters/staging/flux-system/gotk-sync.yaml": placeholder}
    done = helmop_try(str(bare_repository(tmp_path, files)), "-o", "json", "--timeout", "150s")
    report = _json(done)
    assert done.returncode == 0, (report["failures"], done.stderr[-5000:])
    assert [made.partition(":")[0] for made in report["made"]] == [
        "GitRepository flux-system/flux-system", "ServiceAccount flux-system/kustomize-controller",
        "ClusterRoleBinding cluster-reconciler-flux-system"]
    assert {f"{o['kind']} {o['namespace']}/{o['name']}" for o in report["objects"]} == {
        "GitRepository flux-system/flux-system", "Kustomization flux-system/infrastructure",
        "Kustomization flux-system/tenants", "Kustomization apps/dev-team"}
    assert report["leftOut"] == []
