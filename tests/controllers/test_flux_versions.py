"""Flux's removed API versions, served (--flux-api): a repository still written for an old Flux (a Kustomization of
kustomize.toolkit.fluxcd.io/v1beta2 with patchesStrategicMerge, an OCIRepository of source.toolkit.fluxcd.io/v1beta2,
a HelmRelease of helm.toolkit.fluxcd.io/v2beta1 with valuesFile and post-renderer patchesStrategicMerge and
patchesJson6902, a HelmRepository of v1beta1), applied from git, reconciles as its current versions would, each
object whose removed fields were read with a Warning Event naming the replacement (and kubectl's Warning header for
what kubectl applies). With --flux-api=current the same objects are refused, from git and from kubectl, and a removed
field in an object of the current version is refused by name, not pruned."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helmop_sandbox import Sandbox

from helmop.api.repositories import HELM_CHART_MEDIA_TYPE
from tests.chartrepo import ChartRepo
from tests.conftest import _runner
from tests.controllers.conftest import Operator, apply, condition, events, get, watched
from tests.controllers.test_flux import ready
from tests.gitserver import Repo
from tests.registry import Registry
from tests.tools import Run, eventually, tool

KUSTOMIZE, SOURCE, HELM = "kustomize.toolkit.fluxcd.io", "source.toolkit.fluxcd.io", "helm.toolkit.fluxcd.io"
NOTIFICATION = "notification.toolkit.fluxcd.io"
KUSTOMIZATIONS = f"kustomizations.{KUSTOMIZE}"
# Flux's coverage tool, never copied here: .ci/run names it (HELMOP_FLUX_COVERAGE); without it the test skips
COVERAGE = os.environ.get("HELMOP_FLUX_COVERAGE", "")


@pytest.fixture
def registry(tmp_path: Path, own_repo: ChartRepo) -> Iterator[Registry]:
    """An OCI registry on loopback, serving own_repo's chart as charts/app:1.1.0."""
    subprocess.run([tool("helm"), "package", str(tmp_path / "src"), "--version", "1.1.0", "-d", str(tmp_path / "oci")],
                   check=True, capture_output=True)
    served = Registry({"1.1.0": next((tmp_path / "oci").glob("*.tgz")).read_bytes()})
    yield served
    served.loop.call_soon_threadsafe(served.loop.stop)


def old_flux_repository(ns: str, charts: ChartRepo, registry: Registry) -> dict[str, str | None]:
    """clusters/legacy: the layers, each of a version Flux has removed; apps: what the v1beta2 layer applies."""
    def doc(api_version: str, kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "namespace": ns}, "spec": spec}

    layer = doc(f"{KUSTOMIZE}/v1beta2", "Kustomization", "apps", {
        "interval": "1h", "path": "./apps", "prune": True, "validation": "client",
        "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
        # kustomize finds the object a strategic merge names by its exact id: the namespace too
        "patchesStrategicMerge": [{"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": "settings", "namespace": ns}, "data": {"colour": "blue"}}]})
    sources = [doc(f"{SOURCE}/v1beta1", "HelmRepository", "charts", {"interval": "1h", "url": charts.url}),
               doc(f"{SOURCE}/v1beta2", "OCIRepository", "app", {
                   "interval": "1h", "url": f"oci://127.0.0.1:{registry.port}/charts/app", "insecure": True,
                   "secretRef": {"name": "robot"},
                   "ref": {"semver": "^1.0"}, "layerSelector": {"mediaType": HELM_CHART_MEDIA_TYPE,
                                                                "operation": "copy"}})]
    release = doc(f"{HELM}/v2beta1", "HelmRelease", "legacy", {
        "interval": "1h", "values": {"fullnameOverride": "legacy"},
        "chart": {"spec": {"chart": "demo", "version": "0.1.x", "valuesFile": "values-prod.yaml",
                           "sourceRef": {"kind": "HelmRepository", "name": "charts"}}},
        "postRenderers": [{"kustomize": {
            "patchesStrategicMerge": [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "legacy"},
                                       "spec": {"revisionHistoryLimit": 3}}],
            "patchesJson6902": [{"target": {"kind": "Service", "name": "legacy"}, "patch": [
                {"op": "add", "path": "/metadata/labels/tier", "value": "front"}]}]}}]})
    settings = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": ns},
                "data": {"colour": "red"}}
    return {"clusters/legacy/apps.yaml": yaml.safe_dump(layer),
            "clusters/legacy/sources.yaml": yaml.safe_dump_all(sources),
            "apps/settings.yaml": yaml.safe_dump(settings), "apps/release.yaml": yaml.safe_dump(release)}


def bootstrap(kube: Run, ns: str, repo: Repo, source_version: str = "v1") -> subprocess.CompletedProcess[str]:
    """What `flux bootstrap` leaves: the source (of ``source_version``, applied with kubectl) and the cluster
    folder's Kustomization (and the registry's credentials); what kubectl said of the source."""
    kube("kubectl", "-n", ns, "create", "secret", "generic", "robot", "--from-literal=username=robot",
         "--from-literal=password=pw")
    gitrepo = {"apiVersion": f"{SOURCE}/{source_version}", "kind": "GitRepository",
               "metadata": {"name": "flux-system"},
               "spec": {"interval": "1h", "url": repo.url, "ref": {"branch": "main"},
                        **({"gitImplementation": "go-git"} if source_version != "v1" else {})}}
    said = kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump(gitrepo))
    apply(kube, ns, yaml.safe_dump({"apiVersion": f"{KUSTOMIZE}/v1", "kind": "Kustomization",
                                    "metadata": {"name": "flux-system"},
                                    "spec": {"interval": "1h", "path": "./clusters/legacy", "prune": True,
                                             "sourceRef": {"kind": "GitRepository", "name": "flux-system"}}}))
    return said


def warned(kube: Run, ns: str, name: str, *said: str) -> str:
    """The message of the RemovedAPIVersion Warning Event of ``name``, once there is one saying all of ``said``."""
    def found() -> str:
        return next((e["message"] for e in events(kube, ns, name) if e["type"] == "Warning"
                     and e["reason"] == "RemovedAPIVersion" and all(s in e["message"] for s in said)), "")
    message: str = eventually(found, timeout=90)
    return message


def test_an_old_flux_repository_reconciles_as_its_current_versions_would(
        operator: Operator, kube: Run, ns: str, repo: Repo, own_repo: ChartRepo, registry: Registry) -> None:
    repo.commit(old_flux_repository(ns, own_repo, registry))
    kubectl = bootstrap(kube, ns, repo, source_version="v1beta2")
    assert (f"Warning: {SOURCE}/v1beta2 GitRepository is deprecated (removed in Flux 2.8): use {SOURCE}/v1"
            in kubectl.stderr)
    warned(kube, ns, "flux-system", f"written as {SOURCE}/v1beta2 (removed in Flux 2.8), served as {SOURCE}/v1: "
                                    "spec.gitImplementation ignored")

    # the v1beta2 layer, applied from git: its strategic merge patch applied as spec.patches
    ready(kube, ns, KUSTOMIZATIONS, "apps")
    assert get(kube, ns, "configmap", "settings")["data"] == {"colour": "blue"}
    assert warned(kube, ns, "apps", f"written as {KUSTOMIZE}/v1beta2 (removed in Flux 2.8)") == (
        f"written as {KUSTOMIZE}/v1beta2 (removed in Flux 2.8), served as {KUSTOMIZE}/v1: spec.patchesStrategicMerge "
        "read as spec.patches; spec.validation ignored, as the last Flux that served it did (remove it). Rewrite it "
        f"as {KUSTOMIZE}/v1 (flux migrate -f does) with these fields as they are read")

    # the v2beta1 release: its valuesFile's values, its post-renderer's patches of both kinds
    release = ready(kube, ns, f"helmreleases.{HELM}", "legacy")
    assert release["apiVersion"] == f"{HELM}/v2" and release["status"]["history"][0]["chartVersion"] == "0.1.0"
    deployment = get(kube, ns, "deployment", "legacy")
    assert deployment["spec"]["replicas"] == 2 and deployment["spec"]["revisionHistoryLimit"] == 3
    assert get(kube, ns, "service", "legacy")["metadata"]["labels"]["tier"] == "front"
    assert get(kube, ns, "configmap", "settings")["data"] == {"colour": "blue"}  # patched the named object only
    warned(kube, ns, "legacy", f"written as {HELM}/v2beta1 (removed in Flux 2.7), served as {HELM}/v2: ",
           "spec.chart.spec.valuesFile read as spec.chart.spec.valuesFiles[0]",
           "spec.postRenderers[0].kustomize.patchesStrategicMerge read as spec.postRenderers[0].kustomize.patches")

    # the v1beta2 OCIRepository and the v1beta1 HelmRepository: as v1's
    oci = ready(kube, ns, f"ocirepositories.{SOURCE}", "app")["status"]
    manifest = hashlib.sha256(registry.manifests["1.1.0"]).hexdigest()
    assert oci["artifact"]["revision"] == f"1.1.0@sha256:{manifest}"
    # none of their fields is a removed one: no Event (managedFields cannot tell whether they are still written
    # so: an old entry stays while it owns anything), kubectl's deprecation Warning tells whoever writes them
    assert not [e for name in ("app", "charts") for e in events(kube, ns, name) if e["reason"] == "RemovedAPIVersion"]
    # read in the version it was written in, the object is as written (strategy None: only the apiVersion differs)
    old = json.loads(kube("kubectl", "-n", ns, "get", f"kustomizations.v1beta2.{KUSTOMIZE}", "apps", "-o",
                          "json").stdout)
    assert old["spec"]["patchesStrategicMerge"][0]["data"] == {"colour": "blue"}
    assert condition(old)["status"] == "True"


def test_a_removed_notification_version_applied_with_kubectl_is_served_with_kubectl_s_warning(
        operator: Operator, kube: Run, ns: str) -> None:
    provider = {"apiVersion": f"{NOTIFICATION}/v1beta2", "kind": "Provider", "metadata": {"name": "hook"},
                "spec": {"type": "generic", "address": "https://hooks.example.invalid/flux"}}
    said = kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump(provider)).stderr
    assert f"Warning: {NOTIFICATION}/v1beta2 Provider is deprecated (removed in Flux 2.9): use " \
           f"{NOTIFICATION}/v1beta3" in said
    watched(kube, ns, f"providers.{NOTIFICATION}", "hook", lambda obj: condition(obj).get("status") == "True")
    # no field of it is a removed one: kubectl's Warning is all there is to say
    assert not [e for e in events(kube, ns, "hook") if e["reason"] == "RemovedAPIVersion"]


def test_flux_s_removed_versions_keep_the_api_whole(operator: Operator, kube: Run, tmp_path: Path) -> None:
    """Served beside the current ones, the removed versions take nothing from Flux's field coverage."""
    if not COVERAGE or not Path(COVERAGE).exists():
        pytest.skip("HELMOP_FLUX_COVERAGE names no Flux coverage tool (it reads Flux's own CRDs beside it)")
    served = tmp_path / "served.yaml"
    served.write_text(kube("kubectl", "get", "crd", "-o", "yaml").stdout)
    report = subprocess.run([sys.executable, COVERAGE, str(served), "--missing"],
                            capture_output=True, text=True, check=True).stdout
    assert report.splitlines()[-1].startswith("flux-coverage: ") and "(100%), 15 of 15 kinds served" in report, report


@pytest.fixture(scope="module")
def current_only(tmp_path_factory: pytest.TempPathFactory, chart_repo: ChartRepo) -> Iterator[Run]:
    """An operator started with --flux-api=current, on a sandbox of its own."""
    workdir = tmp_path_factory.mktemp("operator-current")
    with Sandbox(ready_delay=0.05) as sandbox:
        op = Operator(sandbox, "helm", workdir, chart_repo)
        op.set("flux", removed_versions=False)
        op.start()
        yield _runner(sandbox)
        op.close()


def test_with_flux_api_current_the_removed_versions_are_refused(
        current_only: Run, repo: Repo, own_repo: ChartRepo, registry: Registry) -> None:
    kube, ns = current_only, "legacy"
    kube("kubectl", "create", "namespace", ns)
    repo.commit(old_flux_repository(ns, own_repo, registry))
    refused = kube("kubectl", "-n", ns, "apply", "-f", "-", check=False,
                   stdin=yaml.safe_dump({"apiVersion": f"{SOURCE}/v1beta2", "kind": "GitRepository",
                                         "metadata": {"name": "old"}, "spec": {"url": repo.url}}))
    assert refused.returncode != 0
    assert f'no matches for kind "GitRepository" in version "{SOURCE}/v1beta2"' in refused.stderr
    bootstrap(kube, ns, repo)

    def failed() -> dict[str, Any]:
        said = condition(get(kube, ns, KUSTOMIZATIONS, "flux-system"))
        return said if said.get("status") == "False" and f"{KUSTOMIZE}/v1beta2" in said.get("message", "") else {}
    said = eventually(failed, timeout=90)
    assert (f"Kustomization/{ns}/apps dry-run failed (NotFound): the server could not find the requested resource: "
            f"{KUSTOMIZE}/v1beta2 was removed in Flux 2.8: rewrite it as {KUSTOMIZE}/v1 (flux migrate -f does) "
            f"(apiVersion {KUSTOMIZE}/v1beta2, clusters/legacy/apps.yaml:1)") in said["message"]
    assert f"OCIRepository/{ns}/app dry-run failed (NotFound)" in said["message"]
    crd = json.loads(kube("kubectl", "get", "crd", KUSTOMIZATIONS, "-o", "json").stdout)
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v1"]

    # a post-renderer's removed field keeps its place in the schema: refused by name, not pruned unseen
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump({
        "apiVersion": f"{HELM}/v2", "kind": "HelmRelease", "metadata": {"name": "patched"}, "spec": {
            "interval": "1h", "chart": {"spec": {"chart": "demo", "sourceRef": {"kind": "HelmRepository",
                                                                                "name": "charts"}}},
            "postRenderers": [{"kustomize": {"patchesJson6902": [{"target": {"kind": "Service", "name": "x"},
                                                                  "patch": []}]}}]}}))
    stalled = eventually(lambda: (c := condition(get(kube, ns, f"helmreleases.{HELM}", "patched"), "Stalled")).get(
        "reason") == "UnsupportedField" and c, timeout=90)
    assert stalled["message"].startswith("spec.postRenderers[0].kustomize.patchesJson6902 is not implemented"), stalled


def test_the_version_written_decides_what_a_removed_field_means(operator: Operator, kube: Run, ns: str) -> None:
    """A field only a removed version had is read as such in an object of that version (refused by name when it
    is not of its shape), and refused by name, as before, in an object written as the current version."""
    def kustomization(name: str, version: str, **spec: Any) -> str:
        return yaml.safe_dump({"apiVersion": f"{KUSTOMIZE}/{version}", "kind": "Kustomization",
                               "metadata": {"name": name}, "spec": {
                                   "interval": "1h", "path": "./", "prune": True,
                                   "sourceRef": {"kind": "GitRepository", "name": "none"}, **spec}})

    apply(kube, ns, kustomization("current", "v1", patchesStrategicMerge=[{"apiVersion": "v1", "kind": "ConfigMap",
                                                                           "metadata": {"name": "x"}}]))
    apply(kube, ns, kustomization("malformed", "v1beta2", patchesStrategicMerge=[{"data": {"a": "b"}}]))
    for name, reason, said in (
            ("current", "UnsupportedField", "spec.patchesStrategicMerge is not implemented by helmop"),
            ("malformed", "InvalidSpec", "spec.patchesStrategicMerge[0] must name the object it patches")):
        stalled = eventually(lambda name=name, reason=reason: (
            c := condition(get(kube, ns, KUSTOMIZATIONS, name), "Stalled")).get("reason") == reason and c)
        assert stalled["status"] == "True" and stalled["message"].startswith(said), stalled


def test_only_a_field_written_in_a_removed_version_is_read_as_one(operator: Operator, kube: Run, ns: str) -> None:
    """kube-apiserver keeps a manager's Update entry per apiVersion, so an object once written in a removed version
    says so for as long as that entry owns anything: only the entry owning a removed field decides what it means.
    Applied as v1beta2 (client-side), then as v1 without the old field, an object warns no more, and a removed field
    another manager adds as v1 is refused by name; an object whose only v1beta2 entry owns its finalizers (as Flux's
    controllers left them before Flux 2.3) is read as v1, with no Warning."""
    patch = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "b"}}]

    def kustomization(name: str, version: str, **spec: Any) -> str:
        return yaml.safe_dump({"apiVersion": f"{KUSTOMIZE}/{version}", "kind": "Kustomization",
                               "metadata": {"name": name}, "spec": {
                                   "interval": "1h", "path": "./", "prune": True,
                                   "sourceRef": {"kind": "GitRepository", "name": "none"}, **spec}})

    def refused(name: str) -> None:
        stalled = eventually(lambda: (c := condition(get(kube, ns, KUSTOMIZATIONS, name), "Stalled")).get(
            "reason") == "UnsupportedField" and c, timeout=90)
        assert stalled["message"].startswith("spec.patchesStrategicMerge is not implemented by helmop"), stalled

    def removed_version_events(name: str) -> list[str]:
        return [e["message"] for e in events(kube, ns, name) if e["reason"] == "RemovedAPIVersion"]

    apply(kube, ns, kustomization("moved", "v1beta2", validation="client"))
    warned(kube, ns, "moved", "spec.validation ignored")
    apply(kube, ns, kustomization("moved", "v1"))  # kubectl's three-way patch removes validation
    kube("kubectl", "-n", ns, "patch", KUSTOMIZATIONS, "moved", "--type=merge", "--field-manager=team", "-p",
         json.dumps({"spec": {"patchesStrategicMerge": patch}}))
    live = json.loads(kube("kubectl", "-n", ns, "get", KUSTOMIZATIONS, "moved", "-o", "json",
                           "--show-managed-fields").stdout)
    assert f"{KUSTOMIZE}/v1beta2" in {e["apiVersion"] for e in live["metadata"]["managedFields"]}  # still there
    refused("moved")
    assert all("patchesStrategicMerge" not in said for said in removed_version_events("moved"))

    apply(kube, ns, kustomization("finalized", "v1"))
    kube("kubectl", "-n", ns, "patch", f"kustomizations.v1beta2.{KUSTOMIZE}", "finalized", "--type=merge",
         "--field-manager=kustomize-controller", "-p",
         json.dumps({"metadata": {"finalizers": ["finalizers.fluxcd.io"]}}))
    apply(kube, ns, kustomization("finalized", "v1", patchesStrategicMerge=patch))
    refused("finalized")
    assert removed_version_events("finalized") == []
