"""Flux's API served (--flux-api): a repository written for Flux, unchanged (Flux's kinds and versions, its
HelmRepository with a public chart URL reached through --chart-mirror, Kustomizations with dependsOn, overlays
that patch a HelmRelease's values, no ServiceAccount: Flux's tenancy), converges; every status is in Flux's shape;
what helmop does not implement is refused by name."""

from __future__ import annotations

import re
import uuid
from typing import Any

import yaml

from tests.chartrepo import ChartRepo
from tests.controllers.conftest import MIRRORED, Operator, apply, condition, events, get, watched
from tests.gitserver import Repo
from tests.tools import Run, eventually

HELM, SOURCE, KUSTOMIZE = "helm.toolkit.fluxcd.io/v2", "source.toolkit.fluxcd.io/v1", "kustomize.toolkit.fluxcd.io/v1"


def flux_repository(ns: str) -> dict[str, str]:
    """Laid out as Flux's example repositories: clusters/<env> holds the Kustomizations; infrastructure
    declares the HelmRepository; apps/base the app's Namespace and HelmRelease, apps/<env> patches its values."""
    app = f"{ns}-podinfo"

    def kustomization(name: str, path: str, **spec: Any) -> dict[str, Any]:
        return {"apiVersion": KUSTOMIZE, "kind": "Kustomization", "metadata": {"name": name, "namespace": ns},
                "spec": {"interval": "1h", "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
                         "path": path, "prune": True, **spec}}

    return {
        "clusters/production/infrastructure.yaml": yaml.safe_dump(kustomization("infrastructure",
                                                                                 "./infrastructure")),
        "clusters/production/apps.yaml": yaml.safe_dump(kustomization(
            "apps", "./apps/production", dependsOn=[{"name": "infrastructure"}],
            postBuild={"substitute": {"app_namespace": app}})),
        "infrastructure/sources.yaml": yaml.safe_dump({
            "apiVersion": SOURCE, "kind": "HelmRepository", "metadata": {"name": "stable", "namespace": ns},
            "spec": {"interval": "1h", "url": MIRRORED}}),
        "apps/base/podinfo/kustomization.yaml": "resources: [namespace.yaml, release.yaml]\n",
        "apps/base/podinfo/namespace.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ${app_namespace}\n",
        "apps/base/podinfo/release.yaml": yaml.safe_dump({
            "apiVersion": HELM, "kind": "HelmRelease", "metadata": {"name": "podinfo", "namespace": "${app_namespace}"},
            "spec": {"interval": "1h", "chart": {"spec": {"chart": "demo", "version": "0.2.x", "sourceRef": {
                "kind": "HelmRepository", "name": "stable", "namespace": ns}}},
                "values": {"fullnameOverride": "podinfo", "replicaCount": 1}}}),
        "apps/production/kustomization.yaml": ("resources: [../base/podinfo]\npatches:\n- path: values.yaml\n"
                                               "  target: {kind: HelmRelease, name: podinfo}\n"),
        "apps/production/values.yaml": yaml.safe_dump({"apiVersion": HELM, "kind": "HelmRelease",
                                                       "metadata": {"name": "podinfo"},
                                                       "spec": {"values": {"replicaCount": 3}}}),
    }


def ready(kube: Run, ns: str, kind: str, name: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        obj = get(kube, ns, kind, name)
        c = condition(obj)
        return obj if c.get("status") == "True" and c.get("observedGeneration") == obj["metadata"]["generation"] \
            else None
    found: dict[str, Any] = eventually(check, timeout=90)
    return found


def test_a_flux_repository_converges_unchanged(operator: Operator, kube: Run, ns: str, repo: Repo) -> None:
    sha = repo.commit(flux_repository(ns))
    app = f"{ns}-podinfo"
    # what `flux bootstrap` leaves in the cluster: the source and the cluster folder's Kustomization
    apply(kube, ns, yaml.safe_dump({"apiVersion": SOURCE, "kind": "GitRepository", "metadata": {"name": "flux-system"},
                                    "spec": {"interval": "1h", "url": repo.url, "ref": {"branch": "main"}}}))
    apply(kube, ns, yaml.safe_dump({"apiVersion": KUSTOMIZE, "kind": "Kustomization",
                                    "metadata": {"name": "flux-system"},
                                    "spec": {"interval": "1h", "path": "./clusters/production", "prune": True,
                                             "sourceRef": {"kind": "GitRepository", "name": "flux-system"}}}))
    release = ready(kube, app, "helmreleases.helm.toolkit.fluxcd.io", "podinfo")
    assert get(kube, app, "deployment", "podinfo")["spec"]["replicas"] == 3  # the production overlay's values
    status = release["status"]
    assert status["history"][0]["version"] == 1 and status["history"][0]["name"] == "podinfo"
    assert status["history"][0]["namespace"] == app and status["history"][0]["chartVersion"] == "0.2.1"
    assert status["storageNamespace"] == app and status["lastAttemptedReleaseAction"] == "install"
    assert "finalizers.fluxcd.io" in release["metadata"]["finalizers"]

    git = ready(kube, ns, "gitrepositories.source.toolkit.fluxcd.io", "flux-system")["status"]
    assert git["artifact"]["revision"] == f"main@sha1:{sha}" and condition({"status": git},
                                                                           "ArtifactInStorage")["status"] == "True"
    settled(kube, ns, "gitrepositories.source.toolkit.fluxcd.io", "flux-system")  # a second reconcile
    git = get(kube, ns, "gitrepositories.source.toolkit.fluxcd.io", "flux-system")["status"]
    assert sorted(c["type"] for c in git["conditions"]) == ["ArtifactInStorage", "Ready"]
    helm_repo = ready(kube, ns, "helmrepositories.source.toolkit.fluxcd.io", "stable")["status"]
    assert helm_repo["artifact"]["revision"].startswith("sha256:") and helm_repo["url"] == MIRRORED
    apps = ready(kube, ns, "kustomizations.kustomize.toolkit.fluxcd.io", "apps")["status"]
    assert apps["lastAppliedRevision"] == f"main@sha1:{sha}"
    ids = {e["id"] for e in apps["inventory"]["entries"]}
    assert ids == {f"_{app}__Namespace", f"{app}_podinfo_helm.toolkit.fluxcd.io_HelmRelease"}
    top = ready(kube, ns, "kustomizations.kustomize.toolkit.fluxcd.io", "flux-system")["status"]
    assert {e["id"] for e in top["inventory"]["entries"]} == {
        f"{ns}_apps_kustomize.toolkit.fluxcd.io_Kustomization",
        f"{ns}_infrastructure_kustomize.toolkit.fluxcd.io_Kustomization"}

    # `flux reconcile kustomization apps` sets Flux's annotation
    settled(kube, ns, "kustomizations.kustomize.toolkit.fluxcd.io", "apps")


def settled(kube: Run, ns: str, kind: str, name: str) -> None:
    """Ask for a reconcile as `flux reconcile` does (Flux's annotation) and wait until it has been handled."""
    stamp = uuid.uuid4().hex
    kube("kubectl", "-n", ns, "annotate", kind, name, f"reconcile.fluxcd.io/requestedAt={stamp}", "--overwrite")
    watched(kube, ns, kind, name, lambda obj: obj["status"].get("lastHandledReconcileAt") == stamp)


def test_flux_fields_helmop_does_not_implement_are_refused_by_name(operator: Operator, kube: Run, ns: str,
                                                                   chart_repo: ChartRepo) -> None:
    # a local release of the same name (a HelmRelease refused is never acted on, not even when deleted)
    kube("helm", "install", "remote", "demo", "--repo", chart_repo.url, "--version", "0.1.0", "-n", ns,
         "--set", "fullnameOverride=remote")
    apply(kube, ns, yaml.safe_dump({"apiVersion": KUSTOMIZE, "kind": "Kustomization", "metadata": {"name": "secret"},
                                    "spec": {"interval": "1h", "path": "./", "prune": True,
                                             "sourceRef": {"kind": "GitRepository", "name": "none"},
                                             "futureField": {"secretRef": {"name": "cluster"}}}}))
    apply(kube, ns, yaml.safe_dump({"apiVersion": HELM, "kind": "HelmRelease", "metadata": {"name": "remote"},
                                    "spec": {"interval": "1h", "futureField": {"secretRef": {"name": "cluster"}},
                                             "chartRef": {"kind": "OCIRepository", "name": "x"}}}))
    for kind, name, field in (("kustomizations.kustomize.toolkit.fluxcd.io", "secret", "spec.futureField"),
                              ("helmreleases.helm.toolkit.fluxcd.io", "remote", "spec.futureField")):
        said = eventually(lambda kind=kind, name=name: condition(get(kube, ns, kind, name)).get("reason")
                          == "UnsupportedField" and condition(get(kube, ns, kind, name)))
        assert said["message"].startswith(f"{field} is not implemented by helmop")
        assert condition(get(kube, ns, kind, name), "Stalled")["status"] == "True"

    # deleted, the refused HelmRelease cleans nothing up: the local release of its name stays
    kube("kubectl", "-n", ns, "delete", "helmreleases.helm.toolkit.fluxcd.io", "remote", "--timeout=60s")
    assert "remote" in kube("helm", "list", "-n", ns, "-q").stdout.split()


def test_flux_release_options_and_status_shape(operator: Operator, kube: Run, ns: str,
                                               chart_repo: ChartRepo) -> None:
    """Flux's example repository's HelmRelease options (RetryOnFailure on both actions), a chart of CRDs
    alone, a renamed chart reinstalled, and the history in Flux's shape."""
    group = f"{ns}.example.com"
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"gadgets.{group}"},
           "spec": {"group": group, "scope": "Namespaced", "names": {"plural": "gadgets", "kind": "Gadget"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
    chart_repo.publish(f"crds-{ns}", "0.1.0", bare=True, files={"crds/gadget.yaml": yaml.safe_dump(crd)})
    chart_repo.publish(f"renamed-{ns}", "0.1.0")  # (before the HelmRepository reads the index)
    retry = {"name": "RetryOnFailure", "retryInterval": "30s"}
    apply(kube, ns, yaml.safe_dump({"apiVersion": SOURCE, "kind": "HelmRepository", "metadata": {"name": "charts"},
                                    "spec": {"interval": "1h", "url": chart_repo.url}}))

    def release(chart: str, **spec: Any) -> str:
        return yaml.safe_dump({"apiVersion": HELM, "kind": "HelmRelease", "metadata": {"name": "rel"}, "spec": {
            "interval": "1h", "install": {"strategy": retry}, "upgrade": {"strategy": retry, **spec},
            "chart": {"spec": {"chart": chart, "version": "0.1.0", "sourceRef": {"kind": "HelmRepository",
                                                                                  "name": "charts"}}},
            "values": {"fullnameOverride": "rel"}}})

    apply(kube, ns, release(f"crds-{ns}"))  # helmop's post-renderer (Flux's origin labels) renders nothing
    status = ready(kube, ns, "helmreleases.helm.toolkit.fluxcd.io", "rel")["status"]
    assert kube("kubectl", "get", "crd", f"gadgets.{group}").returncode == 0
    (first,) = status["history"]
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", first["configDigest"]) and first["action"] == "install"
    apply(kube, ns, release("demo"))  # another chart: uninstalled, then installed anew (Reinstall, Flux's default)
    watched(kube, ns, "helmreleases.helm.toolkit.fluxcd.io", "rel", lambda obj: obj["status"]["history"][0]
               ["chartName"] == "demo", timeout=90)
    status = ready(kube, ns, "helmreleases.helm.toolkit.fluxcd.io", "rel")["status"]
    assert [(h["version"], h["action"]) for h in status["history"]] == [(1, "install")]
    eventually(lambda: any(e["reason"] == "UninstallSucceeded" and "chartNameChangeStrategy Reinstall" in e["message"]
                           for e in events(kube, ns, "rel")))  # the Event follows the status
    # in place, the chart's new selector labels cannot be applied: tried again later, nothing remediated
    apply(kube, ns, release(f"renamed-{ns}", chartNameChangeStrategy="InPlaceUpdate"))
    obj = eventually(lambda: (o := get(kube, ns, "helmreleases.helm.toolkit.fluxcd.io", "rel"))
                     and condition(o, "Reconciling").get("reason") == "ProgressingWithRetry" and o, timeout=90)
    assert condition(obj)["reason"] == "InvalidResources" and "field is immutable" in condition(obj)["message"]
    assert obj["status"]["failures"] == 1 and not condition(obj, "Stalled")
    assert condition(obj, "Reconciling")["message"] == "retrying after 30s"
    assert [(h["chartName"], h["status"]) for h in obj["status"]["history"]] == [("demo", "deployed")]
