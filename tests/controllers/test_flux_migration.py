"""Moving a running cluster from Flux to helmop: the cluster is left as Flux leaves it (Flux's CRDs, a helm
release installed by helm-controller with its labels on every object, a HelmRelease with Flux's finalizer and
status history, a Kustomization with Flux's inventory and labels), then helmop starts with --flux-api. While
Flux's leader Leases are renewed it touches nothing; once Flux's controllers are scaled to zero it adopts
everything in place (no reinstall, the same UIDs, one new revision, nothing wanted pruned), and a later
deletion uninstalls and prunes exactly once."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from helmop_sandbox import Sandbox

from helmop.api.flux import crds as flux_crds
from helmop.helm.storage import OWNER_LABEL
from tests.chartrepo import ChartRepo
from tests.conftest import _runner
from tests.controllers.conftest import MIRRORED, Operator, condition, get
from tests.gitserver import GitServer, Repo
from tests.tools import Run, eventually

HELM, SOURCE, KUSTOMIZE = "helm.toolkit.fluxcd.io/v2", "source.toolkit.fluxcd.io/v1", "kustomize.toolkit.fluxcd.io/v1"
HR, KS = "helmreleases.helm.toolkit.fluxcd.io", "kustomizations.kustomize.toolkit.fluxcd.io"
NOW = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def doc(obj: dict[str, Any]) -> str:
    return yaml.safe_dump(obj)


def flux_lease(holder: str) -> str:
    """helm-controller's leader Lease as a running (``holder``) or stopped ("") Flux leaves it."""
    return doc({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": "helm-controller-leader-election", "namespace": "flux-system"},
                "spec": {"holderIdentity": holder, "leaseDurationSeconds": 35,
                         "renewTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")}})


def set_status(kube: Run, ns: str, kind: str, name: str, status: dict[str, Any]) -> None:
    kube("kubectl", "-n", ns, "patch", kind, name, "--subresource=status", "--type=merge", "-p",
         json.dumps({"status": status}))


def uids(kube: Run, ns: str, *what: str) -> dict[str, str]:
    return {w: get(kube, ns, *w.split("/"))["metadata"]["uid"] for w in what}


def as_flux_installs(kube: Run, tmp: Path, charts: ChartRepo) -> None:
    """`helm install` as helm-controller runs it: Flux's post-renderer puts its labels on every object."""
    config = tmp / "origin.json"
    config.write_text(json.dumps({"labels": {"helm.toolkit.fluxcd.io/name": "app",
                                             "helm.toolkit.fluxcd.io/namespace": "apps"}}))
    renderer = tmp / "flux-origin-labels"
    renderer.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m helmop.helm.postrender {config}\n')
    renderer.chmod(0o755)
    kube("helm3", "install", "app", "demo", "--repo", charts.url, "--version", "0.1.0", "-n", "apps",
         "--set", "fullnameOverride=app", "--post-renderer", str(renderer), "--wait=false")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Sandbox, Run]]:
    with Sandbox(ready_delay=0.05) as sandbox:
        yield sandbox, _runner(sandbox)


def test_a_cluster_moves_from_flux_in_place(cluster: tuple[Sandbox, Run], chart_repo: ChartRepo,
                                            git_server: GitServer, tmp_path: Path) -> None:
    sandbox, kube = cluster
    for crd in flux_crds.definitions():  # Flux's own CRDs (written by Flux's installation, not by helmop)
        kube("kubectl", "apply", "--server-side", "--field-manager=flux", "-f", "-", stdin=doc(crd))
    for ns in ("flux-system", "apps"):
        kube("kubectl", "create", "namespace", ns)
    kube("kubectl", "apply", "-f", "-", stdin=flux_lease("helm-controller-7d9f_1a2b"))  # Flux still running

    # What Flux applied and recorded: the release, and a Kustomization's objects with Flux's labels
    as_flux_installs(kube, tmp_path, chart_repo)
    kustomized = {"kustomize.toolkit.fluxcd.io/name": "apps", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}
    for name in ("settings", "extra", "retired"):  # "retired" left git before the move: Flux would prune it
        kube("kubectl", "apply", "-f", "-", stdin=doc({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "apps", "labels": kustomized}, "data": {"from": "git"}}))
    repo = Repo(git_server, "fleet", tmp_path / "work")
    sha = repo.commit({f"apps/{name}.yaml": doc({"apiVersion": "v1", "kind": "ConfigMap",
                                                 "metadata": {"name": name, "namespace": "apps"},
                                                 "data": {"from": "git"}}) for name in ("settings", "extra")})
    flux = {"finalizers": ["finalizers.fluxcd.io"]}
    kube("kubectl", "apply", "-f", "-", stdin="---\n".join(doc(o) for o in (
        {"apiVersion": SOURCE, "kind": "HelmRepository", "metadata": {"name": "stable", "namespace": "flux-system",
                                                                      **flux},
         "spec": {"interval": "1h", "url": MIRRORED}},
        {"apiVersion": HELM, "kind": "HelmRelease", "metadata": {"name": "app", "namespace": "apps", **flux},
         "spec": {"interval": "1h", "chart": {"spec": {"chart": "demo", "version": "0.1.0", "sourceRef": {
             "kind": "HelmRepository", "name": "stable", "namespace": "flux-system"}}},
             "values": {"fullnameOverride": "app"}}},
        {"apiVersion": SOURCE, "kind": "GitRepository", "metadata": {"name": "fleet", "namespace": "flux-system",
                                                                     **flux},
         "spec": {"interval": "1h", "url": repo.url, "ref": {"branch": "main"}}},
        {"apiVersion": KUSTOMIZE, "kind": "Kustomization", "metadata": {"name": "apps", "namespace": "flux-system",
                                                                        **flux},
         "spec": {"interval": "1h", "path": "./apps", "prune": True,
                  "sourceRef": {"kind": "GitRepository", "name": "fleet"}}})))
    digest = "sha256:" + "ab" * 32
    set_status(kube, "apps", HR, "app", {
        "observedGeneration": 1, "lastAttemptedGeneration": 1, "lastAttemptedRevision": "0.1.0",
        "lastAttemptedConfigDigest": digest, "lastAttemptedReleaseAction": "install", "storageNamespace": "apps",
        "conditions": [{"type": "Ready", "status": "True", "reason": "InstallSucceeded", "observedGeneration": 1,
                        "message": "Helm install succeeded for release apps/app.v1 with chart demo@0.1.0",
                        "lastTransitionTime": NOW}],
        "history": [{"name": "app", "namespace": "apps", "version": 1, "status": "deployed", "chartName": "demo",
                     "chartVersion": "0.1.0", "appVersion": "1.16.0", "configDigest": digest, "digest": digest,
                     "firstDeployed": NOW, "lastDeployed": NOW}]})
    set_status(kube, "flux-system", KS, "apps", {
        "observedGeneration": 1, "lastAppliedRevision": f"main@sha1:{sha}", "lastAttemptedRevision": f"main@sha1:{sha}",
        "conditions": [{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded", "observedGeneration": 1,
                        "message": f"Applied revision: main@sha1:{sha}", "lastTransitionTime": NOW}],
        "inventory": {"entries": [{"id": f"apps_{name}__ConfigMap", "v": "v1"}
                                  for name in ("extra", "retired", "settings")]}})
    before = uids(kube, "apps", "deployment/app", "service/app", "serviceaccount/app", "configmap/settings",
                  "configmap/extra")

    (tmp_path / "op").mkdir()
    op = Operator(sandbox, "helm", tmp_path / "op", chart_repo)
    op.set("flux", check=0.3)
    op.start()
    try:
        # Flux still holds its Lease: helmop leaves Flux's objects alone, and says why
        eventually(lambda: op.metric("helmop_flux_turns_held_total", kind="HelmRelease.helm.toolkit.fluxcd.io") >= 1
                   and op.metric("helmop_flux_turns_held_total", kind="Kustomization.kustomize.toolkit.fluxcd.io") >= 1)
        assert op.metric("helmop_flux_controllers_running") == 1
        assert op.helm_actions() == []
        assert get(kube, "apps", HR, "app")["status"]["history"][0]["version"] == 1
        assert "helmop.dev/configsync" not in get(kube, "apps", "configmap", "retired")["metadata"]["labels"]
        # Flux's own CRDs are kept as they are
        crd = json.loads(kube("kubectl", "get", "crd", "helmreleases.helm.toolkit.fluxcd.io", "-o", "json",
                              "--show-managed-fields").stdout)
        assert {m["manager"] for m in crd["metadata"]["managedFields"]} == {"flux"}

        # Flux's controllers scaled to zero (controller-runtime gives its Lease up on a clean stop)
        kube("kubectl", "apply", "-f", "-", stdin=flux_lease(""))

        def adopted() -> dict[str, Any] | None:
            obj = get(kube, "apps", HR, "app")
            c = condition(obj)
            return obj if c.get("status") == "True" and obj["status"]["history"][0]["version"] == 2 else None

        release = eventually(adopted, timeout=90)
        assert release["status"]["history"][1]["version"] == 1  # Flux's snapshot kept below helmop's
        assert [a.split()[0] for a in op.helm_actions()] == ["upgrade"]  # no install, no uninstall
        records = json.loads(kube("kubectl", "-n", "apps", "get", "secrets", "-l", "owner=helm,name=app",
                                  "-o", "json").stdout)["items"]
        assert sorted(int(s["metadata"]["labels"]["version"]) for s in records) == [1, 2]
        assert all(s["metadata"]["labels"].get(OWNER_LABEL) for s in records if s["metadata"]["labels"]["version"]
                   == "2")
        deployment = get(kube, "apps", "deployment", "app")
        assert deployment["metadata"]["labels"]["helm.toolkit.fluxcd.io/name"] == "app"  # Flux's labels kept

        def synced() -> dict[str, Any] | None:  # helmop's sync (Flux said "Applied revision: ...")
            obj = get(kube, "flux-system", KS, "apps")
            c = condition(obj)
            return obj if c.get("message", "").startswith("applied revision") and c["status"] == "True" \
                and get(kube, "apps", "configmap", "retired") == {} else None

        sync = eventually(synced, timeout=60)
        assert {e["id"] for e in sync["status"]["inventory"]["entries"]} == {"apps_settings__ConfigMap",
                                                                           "apps_extra__ConfigMap"}
        settings = get(kube, "apps", "configmap", "settings")["metadata"]["labels"]
        assert settings["kustomize.toolkit.fluxcd.io/name"] == "apps"
        assert uids(kube, "apps", *before) == before  # nothing re-created

        # deleting afterwards cleans up once, through Flux's finalizer
        kube("kubectl", "-n", "apps", "delete", HR, "app", "--wait=false")
        kube("kubectl", "-n", "flux-system", "delete", KS, "apps", "--wait=false")
        eventually(lambda: get(kube, "apps", HR, "app") == {} and get(kube, "flux-system", KS, "apps") == {},
                   timeout=60)
        assert [a.split()[0] for a in op.helm_actions()] == ["upgrade", "uninstall"]
        assert get(kube, "apps", "deployment", "app") == {}
        assert get(kube, "apps", "configmap", "settings") == {} and get(kube, "apps", "configmap", "extra") == {}
    finally:
        op.close()
    assert op.failure is None

