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

from helmop.api.helmrelease import DEFAULT_RETRY_INTERVAL
from helmop.api.manifests import Manifest
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


TOFU = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "terraforms.infra.contrib.fluxcd.io"},
        "spec": {"group": "infra.contrib.fluxcd.io", "scope": "Namespaced",
                 "names": {"kind": "Terraform", "listKind": "TerraformList", "plural": "terraforms",
                           "singular": "terraform"},
                 "versions": [{"name": "v1alpha2", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}  # tofu-controller's


def test_a_bootstrap_repository_whose_layers_take_flux_identities_converges(tmp_path: Path) -> None:
    """Every layer (and flux-system itself) sets serviceAccountName: kustomize-controller: the ServiceAccount
    and its cluster-admin binding come from gotk-components.yaml, so everything is Ready (exit 0); Flux's
    controllers and its CRD are left out (said in the report), helmop's CRD serves the kind, also once
    flux-system, whose spec.patches are its own, has applied itself; a third party's CRD under fluxcd.io is
    applied."""
    sync = [SYNC[0], {**SYNC[1], "spec": {**SYNC[1]["spec"], "patches": [{
        "patch": "- op: add\n  path: /metadata/labels/tier\n  value: platform\n",
        "target": {"kind": "Namespace", "name": "flux-system"}}]}}]
    files = {**bootstrap_layout(gotk_components()), "clusters/staging/tofu.yaml": yaml.safe_dump(TOFU),
             "clusters/staging/flux-system/gotk-sync.yaml": "---\n" + "---\n".join(yaml.safe_dump(d) for d in sync)}
    bare = bare_repository(tmp_path, files)
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
        namespace = yaml.safe_load(_kubectl(kubeconfig, "get", "namespace", "flux-system", "-o", "yaml"))
        assert namespace["metadata"]["labels"]["tier"] == "platform"  # flux-system's own patches, applied
        sync_now = yaml.safe_load(_kubectl(kubeconfig, "get", "kustomizations.kustomize.toolkit.fluxcd.io",
                                           "flux-system", "-n", "flux-system", "-o", "yaml"))
        assert sync_now["spec"]["patches"] == sync[1]["spec"]["patches"]  # as the repository writes it
        _kubectl(kubeconfig, "get", "crd", "terraforms.infra.contrib.fluxcd.io")
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
        "clusters/staging/kustomization.yaml (in the private copy): patches deleting the 5 objects of Flux's install "
        "left out, from every build of the cluster folder",
        "Secret flux-system/flux-system: empty, for GitRepository flux-system/flux-system's secretRef (the private "
        "copy needs no credentials)"]
    assert report["lockdown"] == []
    assert "applied revision" in objects["Kustomization flux-system/flux-system"]["message"]
    assert " 12 object(s)" in objects["Kustomization flux-system/flux-system"]["message"]  # 17 built, 5 left out


# Flux's multi-tenancy lockdown, as fluxcd/flux2-multi-tenancy's clusters/staging/flux-system/kustomization.yaml
# writes it (image controllers' names shortened to what this install holds)
LOCKDOWN = """apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - gotk-components.yaml
  - gotk-sync.yaml
patches:
  - patch: |
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --no-cross-namespace-refs=true
    target:
      kind: Deployment
      name: "(kustomize-controller|helm-controller|notification-controller)"
  - patch: |
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --no-remote-bases=true
    target:
      kind: Deployment
      name: "kustomize-controller"
  - patch: |
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --default-service-account=flux
    target:
      kind: Deployment
      name: "(kustomize-controller|helm-controller)"
  - patch: |
      - op: add
        path: /spec/serviceAccountName
        value: kustomize-controller
    target:
      kind: Kustomization
      name: "flux-system"
"""


def test_flux_lockdown_is_the_operators_and_flux_identities_stay_in_flux_system(tmp_path: Path) -> None:
    """flux-system/kustomization.yaml patches Flux's lockdown into its controllers' args: try's operator runs
    with it, so what Flux would refuse fails - a tenant's sync naming a source of flux-system (a cross-namespace
    reference: Stalled), one naming no ServiceAccount (it acts as the default one, flux, which apps lacks) - and
    a tenant's sync naming kustomize-controller gets no such identity in its namespace (Flux makes it only in
    flux-system): both fail alike, and try ends early. What the platform's syncs apply converges."""
    helm = _flux("Deployment", "helm-controller", "apps/v1", component="helm-controller", spec={
        "replicas": 1, "selector": {"matchLabels": {"app": "helm-controller"}},
        "template": {"metadata": {"labels": {"app": "helm-controller"}}, "spec": {
            "serviceAccountName": "helm-controller",
            "containers": [{"name": "manager", "image": "ghcr.io/fluxcd/helm-controller:v1.4.0",
                            "args": ["--watch-all-namespaces=true"]}]}}})
    layout = bootstrap_layout(gotk_components() + "---\n" + yaml.safe_dump(helm))
    own = {"apiVersion": SOURCE, "kind": "GitRepository", "metadata": {"name": "fleet", "namespace": "apps"},
           "spec": {"interval": "1h", "url": ORIGIN, "ref": {"branch": "main"}}}
    tenant = [*yaml.safe_load_all(layout["tenants/dev-team.yaml"]), own]
    for name, account in (("defaulted", None), ("borrowed", "kustomize-controller")):
        sync = {**_layer(name, "./apps", sourceRef={"kind": "GitRepository", "name": "fleet"}),
                "metadata": {"name": name, "namespace": "apps"}}
        sync["spec"].pop("serviceAccountName")
        sync["spec"].update({"serviceAccountName": account} if account else {})
        tenant.append(sync)
    files = {**layout, "clusters/staging/flux-system/kustomization.yaml": LOCKDOWN,
             "tenants/dev-team.yaml": yaml.safe_dump_all(tenant)}
    # (--patience: try ends 20 s after the failures stopped changing, not the default minute)
    done = helmop_try(str(bare_repository(tmp_path, files)), "-o", "json", "--timeout", "240s", "--patience", "20s")
    report = _json(done)
    assert done.returncode == 1 and report["verdict"] == "failing", (report["failures"], done.stderr[-5000:])
    assert report["lockdown"] == ["--no-cross-namespace-refs", "--default-service-account=flux"]
    assert report["made"][1] == (
        "the operator runs with --no-cross-namespace-refs --default-service-account=flux: Flux's multi-tenancy "
        "lockdown, as the args of Deployment flux-system/kustomize-controller, Deployment flux-system/helm-controller "
        "(left out) set it")
    assert "Deployment flux-system/helm-controller" in report["leftOut"]
    assert not any("apps/kustomize-controller" in made for made in report["made"])
    failures = {f["object"]: f for f in report["failures"]}
    assert set(failures) == {"Kustomization apps/dev-team", "Kustomization apps/defaulted",
                             "Kustomization apps/borrowed"}, failures
    assert failures["Kustomization apps/dev-team"]["state"] == "Stalled"
    assert "--no-cross-namespace-refs" in failures["Kustomization apps/dev-team"]["message"]
    assert "system:serviceaccount:apps:flux" in failures["Kustomization apps/defaulted"]["message"]
    assert "system:serviceaccount:apps:kustomize-controller" in failures["Kustomization apps/borrowed"]["message"]
    objects = {f"{o['kind']} {o['namespace']}/{o['name']}": o for o in report["objects"]}
    for name in ("flux-system/flux-system", "flux-system/infrastructure", "flux-system/tenants"):
        assert objects[f"Kustomization {name}"]["state"] == "Ready", objects


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A loopback port bound and never listening: every connection to it is refused."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]


def test_a_try_that_cannot_progress_ends_early_naming_why(tmp_path: Path, refusing_port: int) -> None:
    """The only failure is a chart repository nobody answers: the HelmRepository and the HelmRelease fail with
    the same reason at every retry; try ends (exit 1) once that has lasted its --patience (15 s here; a minute by
    default: test_follow_ends_once_a_failure_is_unchanged_for_its_patience), long before its default 10-minute
    timeout, and the report says it ended early and why."""
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
    done = helmop_try(str(bare), "-o", "json", "--patience", "15s")
    took = time.monotonic() - started
    report = _json(done)
    assert done.returncode == 1, (report["failures"], done.stderr[-5000:])
    assert report["verdict"] == "failing" and 15 <= report["seconds"] < 60 and took < 100, (report, took)
    assert "HelmRepository flux-system/podinfo" in report["endedEarly"]
    assert "with the same reason for 15s or more" in report["endedEarly"]
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


def _deletes(planned: plan.Plan, name: str) -> tuple[dict[str, Any], set[tuple[str, str, str]]]:
    """The kustomization ``name`` of the private copy, and the objects its patches delete."""
    body = yaml.safe_load(planned.copy[name])
    deletes = [yaml.safe_load(patch["patch"]) for patch in body["patches"] if "$patch" in patch["patch"]]
    return body, {(d["$patch"], d["kind"], d["metadata"]["name"]) for d in deletes}


def test_the_plan_keeps_what_syncs_rely_on_of_flux_install(tmp_path: Path) -> None:
    planned = _plan(tmp_path, bootstrap_layout(gotk_components()))
    applied = {plan.title(item) for item in planned.applied}
    assert {"Namespace flux-system", "ServiceAccount flux-system/kustomize-controller",
            "ClusterRoleBinding cluster-reconciler-flux-system", "ClusterRole crd-controller-flux-system",
            "GitRepository flux-system/flux-system", "Kustomization flux-system/flux-system"} <= applied
    assert not applied & set(planned.left_out) and len(planned.left_out) == 5
    assert not any("made" in title for title in planned.made if "ServiceAccount" in title)  # the tree has them
    # clusters/staging has no kustomization: Flux's generated one is written in the private copy, with the deletes
    body, deletes = _deletes(planned, "clusters/staging/kustomization.yaml")
    assert body["resources"] == ["flux-system", "infrastructure.yaml", "tenants.yaml"]
    assert deletes == {
        ("delete", "CustomResourceDefinition", "kustomizations.kustomize.toolkit.fluxcd.io"),
        ("delete", "Deployment", "kustomize-controller"), ("delete", "Service", "source-controller"),
        ("delete", "NetworkPolicy", "allow-egress"), ("delete", "ResourceQuota", "critical-pods-flux-system")}
    assert set(planned.copy) == {"clusters/staging/kustomization.yaml"}
    assert all("patches" not in item.obj["spec"] for item in planned.applied
               if item.kind == "Kustomization")  # the syncs are applied as the repository writes them
    assert planned.lockdown == []  # the controllers' args hold no lockdown flag


def test_the_deletes_join_the_cluster_folders_own_patches(tmp_path: Path) -> None:
    """A cluster folder with a kustomization of its own keeps its patches, the deletes after them (the flux-system
    Kustomization's own spec.patches are the repository's: every build of the folder reads the deletes); patches
    that are not a list are said, not dropped."""
    layout = bootstrap_layout(gotk_components())
    own = {"resources": ["flux-system", "infrastructure.yaml", "tenants.yaml"],
           "patches": [{"patch": "- op: add\n  path: /metadata/labels/tier\n  value: infra\n",
                        "target": {"kind": "Namespace", "name": "policies"}}]}
    planned = _plan(tmp_path / "a", {**layout, "clusters/staging/kustomization.yaml": yaml.safe_dump(own)})
    body, deletes = _deletes(planned, "clusters/staging/kustomization.yaml")
    assert body["resources"] == own["resources"] and body["patches"][0] == own["patches"][0]
    assert len(deletes) == 5 == len(body["patches"]) - 1
    broken = {**own, "patches": {"patch": "x"}}
    with pytest.raises(plan.Broken, match=r"clusters/staging/kustomization.yml: patches is not a list"):
        _plan(tmp_path / "b", {**layout, "clusters/staging/kustomization.yml": yaml.safe_dump(broken)})


def _rev(repo: Path, ref: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "rev-parse", ref], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_the_deletes_are_a_private_commit_on_top_of_the_one_tried(tmp_path: Path) -> None:
    """What the operator fetches is a commit of the private repository whose parent is the one tried, with the
    rewritten kustomization; the private folder of files says the same; the repository tried is untouched."""
    bare = bare_repository(tmp_path, {"clusters/dev/a.yaml": "a: 1\n"})
    served = repository.prepare(str(bare), None, tmp_path / "run")
    commit = repository.amend(served, {"clusters/dev/kustomization.yaml": b"resources: [a.yaml]\n"})
    repository.publish(served, {"stable"}, set(), set(), commit)
    shown = subprocess.run(["git", "-C", str(served.repository), "show", f"{commit}:clusters/dev/kustomization.yaml"],
                           capture_output=True, text=True, check=True).stdout
    assert shown == "resources: [a.yaml]\n" == (served.tree / "clusters/dev/kustomization.yaml").read_text()
    assert _rev(served.repository, f"{commit}^") == served.commit != commit
    assert _rev(served.repository, "refs/heads/main") == _rev(served.repository, "refs/heads/stable") == commit
    assert _rev(bare, "main") == served.commit  # the repository tried: as it was


def test_only_the_crds_of_the_kinds_helmop_serves_are_left_out(tmp_path: Path) -> None:
    """tofu-controller's CRD (a group under fluxcd.io that helmop does not serve) is applied, its objects with it."""
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "terraforms.infra.contrib.fluxcd.io"},
           "spec": {"group": "infra.contrib.fluxcd.io", "scope": "Namespaced", "names": {"kind": "Terraform",
                    "plural": "terraforms"}, "versions": [{"name": "v1alpha2", "served": True, "storage": True}]}}
    layout = bootstrap_layout(gotk_components())
    planned = _plan(tmp_path, {**layout, "clusters/staging/tofu.yaml": yaml.safe_dump(crd)})
    assert "CustomResourceDefinition terraforms.infra.contrib.fluxcd.io" in {plan.title(i) for i in planned.applied}
    assert planned.left_out.count("CustomResourceDefinition kustomizations.kustomize.toolkit.fluxcd.io") == 1
    assert "kustomizations.kustomize.toolkit.fluxcd.io" in plan.served_crds()
    assert "terraforms.infra.contrib.fluxcd.io" not in plan.served_crds()


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
    assert planned.left_out == [] and planned.copy == {}


def test_flux_identities_are_made_only_in_flux_install_namespace(tmp_path: Path) -> None:
    """Only Flux's install namespace has them (that of the sync applying the cluster folder): a tenant's sync of
    another namespace naming kustomize-controller or helm-controller gets nothing (it fails as on a cluster), nor
    does a sync of another cluster's folder."""
    placeholder = "# This file will be generated automatically by flux boostrap.\n"
    layout = bootstrap_layout(placeholder)
    tenant = list(yaml.safe_load_all(layout["tenants/dev-team.yaml"]))
    tenant[-1]["spec"]["serviceAccountName"] = "kustomize-controller"  # apps/dev-team borrows Flux's identity
    release = {"apiVersion": HELM, "kind": "HelmRelease", "metadata": {"name": "web", "namespace": "apps"},
               "spec": {"serviceAccountName": "helm-controller", "chart": {"spec": {"chart": "web"}}}}
    other = _layer("production-only", "./production", serviceAccountName="helm-controller")
    files = {**layout, "tenants/dev-team.yaml": yaml.safe_dump_all([*tenant, release]),
             "clusters/production/flux-system/gotk-sync.yaml": yaml.safe_dump(SYNC[1]),
             "clusters/production/only.yaml": yaml.safe_dump(other)}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found = plan.tree_objects(tmp_path)
    objects = [item for item in found if plan.file_of(item).startswith("clusters/staging/")]
    served = repository.Served(tmp_path / "served.git", "0" * 40, tmp_path, "t", frozenset(), "fleet")
    planned = plan.plan(served, found, "clusters/staging", objects, {})
    made = {plan.title(item): item.obj for item in planned.applied if item.origin == "(made by helmop try)"}
    assert set(made) == {"Secret flux-system/flux-system", "ServiceAccount flux-system/kustomize-controller",
                         "ClusterRoleBinding cluster-reconciler-flux-system"}, set(made)
    # flux-system moved: the install namespace is the bootstrap sync's
    moved = [Manifest({**item.obj, "metadata": {**item.obj["metadata"], "namespace": "gitops"}}, item.origin)
             if item.obj["metadata"].get("namespace") == "flux-system" else item for item in objects]
    planned = plan.plan(served, found, "clusters/staging", moved, {})
    made = {plan.title(item): item.obj for item in planned.applied if item.origin == "(made by helmop try)"}
    assert "ServiceAccount gitops/kustomize-controller" in made and "ClusterRoleBinding cluster-reconciler-gitops" \
        in made and not any(title.endswith("flux-system/kustomize-controller") for title in made), set(made)


def _controller(name: str, *args: Any, command: Any = None) -> Manifest:
    container: dict[str, Any] = {"name": "manager", "args": list(args)}
    if command is not None:
        container["command"] = command
    return Manifest(_flux("Deployment", name, "apps/v1", spec={"template": {"spec": {"containers": [container]}}}),
                    "gotk-components.yaml:0")


def test_flux_lockdown_flags_are_read_from_the_controllers_args() -> None:
    """Go's flag forms (one or two dashes, =value or the next word, a bare bool); the kustomize-controller's
    default ServiceAccount first; a false flag or another controller's flag is no lockdown; a name that is no
    ServiceAccount's is said."""
    assert plan.controller_flags(_controller("x", "-default-service-account", "flux", "--no-cross-namespace-refs",
                                             "--log-level=info", command=["/manager", "--watch-all-namespaces"])) == {
        "default-service-account": "flux", "no-cross-namespace-refs": "true", "log-level": "info",
        "watch-all-namespaces": "true"}
    assert plan.controller_flags(_controller("x", command="not a list")) == {}
    cases = [
        ([_controller("kustomize-controller", "--no-cross-namespace-refs=true", "--no-remote-bases=true",
                      "--default-service-account=tenant"),
          _controller("helm-controller", "--default-service-account=other")],
         ["--no-cross-namespace-refs", "--default-service-account=tenant"]),
        ([_controller("helm-controller", "--no-cross-namespace-refs=True")], ["--no-cross-namespace-refs"]),
        ([_controller("kustomize-controller", "--no-cross-namespace-refs=false"),
          _controller("source-controller", "--no-cross-namespace-refs=true")], []),
    ]
    for left, flags in cases:
        planned = plan.Plan("", True)
        plan._lockdown(planned, left)
        assert planned.lockdown == flags, (left, planned.lockdown)
        assert bool(planned.made) == bool(flags)
    with pytest.raises(plan.Broken, match=r"Deployment flux-system/helm-controller: --default-service-account="):
        plan._lockdown(plan.Plan("", True), [_controller("helm-controller", "--default-service-account=../x")])


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
    assert states.patience(release) == 2 * DEFAULT_RETRY_INTERVAL  # upgrade's default 5m is the longer


class _Cluster:
    """What follow() lists: one HelmRepository, as ``script`` says it is at each look; and follow()'s clock, which
    moves only when follow() pauses between two looks (no time passes for real)."""

    def __init__(self, script: Callable[[int], dict[str, Any]]) -> None:
        self.script = script
        self.looks = 0
        self.now = 1000.0

    async def list(self, path: str) -> list[dict[str, Any]]:
        if not path.startswith("/apis/source.toolkit.fluxcd.io/") or not path.endswith("/helmrepositories"):
            return []
        self.looks += 1
        return [self.script(self.looks)]

    async def pause(self, seconds: float) -> None:
        self.now += seconds


def _follow(cluster: _Cluster, timeout: float,
            patience: float | None = states.PATIENCE) -> tuple[dict[str, states.Tracked], str]:
    return asyncio.run(trycluster.follow(cluster, trycluster.followed_kinds(True), [],  # type: ignore[arg-type]
                                         cluster.now, timeout, lambda *_: None, patience, clock=lambda: cluster.now,
                                         pause=cluster.pause))


def _retrying(obj: dict[str, Any]) -> dict[str, Any]:
    """The object while the operator retries it: Ready Unknown (Progressing)."""
    return {**obj, "status": {"conditions": [{"type": "Ready", "status": "Unknown", "reason": "Progressing",
                                              "message": "fetching", "observedGeneration": 1}]}}


def test_follow_ends_once_a_failure_is_unchanged_for_its_patience() -> None:
    """Failing alike for its patience (a minute) ends the follow as "failing", long before the timeout, and not a
    look sooner; a retry in progress between two failures does not restart the clock, a new reason does;
    --patience sets the minute, --wait-for-transient waits for the timeout. Looks are POLL apart on follow()'s
    clock, driven here."""
    per_minute = int(states.PATIENCE / trycluster.POLL)
    cluster = _Cluster(lambda look: _failing("charts", "FetchFailed"))
    table, found = _follow(cluster, 600)
    [item] = table.values()
    assert found == "failing" and item.state == "Failed", (found, item)
    assert cluster.looks == per_minute + 2, cluster.looks  # failing at the minute, then one look to confirm it
    assert re.fullmatch(r"the same for 60s \(Failed: FetchFailed\): refused", item.message), item.message

    retried = _Cluster(lambda look: _retrying(_failing("charts", "FetchFailed")) if look % 3 == 0
                       else _failing("charts", "FetchFailed"))
    assert _follow(retried, 600)[1] == "failing" and retried.looks <= per_minute + 4, retried.looks

    reasons = _Cluster(lambda look: _failing("charts", ("FetchFailed", "IndexationFailed")[look // 100 % 2]))
    table, found = _follow(reasons, 300)  # a new reason every 50 s: never the same for a minute
    assert found == "timeout" and reasons.looks == 602, reasons.looks

    short = _Cluster(lambda look: _failing("charts", "FetchFailed"))  # --patience 10s: failing at 10 s
    assert _follow(short, 600, 10.0)[1] == "failing" and short.looks == int(10 / trycluster.POLL) + 2, short.looks

    patient = _Cluster(lambda look: _failing("charts", "FetchFailed"))  # --wait-for-transient
    table, found = _follow(patient, 300, None)
    assert found == "timeout" and [item.state for item in table.values()] == ["TimedOut"]
    assert patient.looks == 602 and patient.now - 1000.0 == 300.5


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
    result.patience = 15.0  # --patience 15s
    assert "with the same reason for 15s or more" in json.loads(as_json(result))["endedEarly"]


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
