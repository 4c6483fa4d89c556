"""spec.dependsOn entries as written: the same kind (Flux's form), any kind (Flux's RFC form), and what is refused."""

from __future__ import annotations

from typing import Any

import pytest

from helmop.api.dependencies import Dependency, dependencies
from helmop.api.errors import SpecError
from helmop.api.helmrelease import parse_spec
from helmop.api.sources import parse_config_sync
from helmop.cli.explore import describe
from helmop.cli.trying import states as trystates
from helmop.decisions.readiness import readiness


def test_the_same_kinds_form_keeps_its_meaning() -> None:
    [dep] = dependencies([{"name": "db"}], "app", "shop", "HelmRelease")
    assert dep == Dependency("shop", "db") and dep.same_kind and dep.title == "shop/db"
    [other] = dependencies([{"name": "db", "namespace": "data", "readyExpr": "dep.status.x"}], "app", "shop",
                           "HelmRelease")
    assert (other.namespace, other.ready_expr, other.ready) == ("data", "dep.status.x", True)
    # naming the kind itself, without apiVersion, is the same kind too
    assert dependencies([{"kind": "HelmRelease", "name": "db"}], "app", "shop", "HelmRelease")[0].same_kind


def test_any_kind_with_its_apiversion() -> None:
    [flag, crd, present] = dependencies([
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "flag", "readyExpr": "dep.data.ready == 'yes'"},
        {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "name": "x.example.com"},
        {"apiVersion": "batch/v1", "kind": "Job", "name": "migrate", "namespace": "db", "ready": False}],
        "app", "shop", "HelmRelease")
    assert (flag.kind, flag.api_version, flag.namespace, flag.title) == ("ConfigMap", "v1", "", "ConfigMap/flag")
    assert not flag.same_kind and flag.key("HelmRelease") == "ConfigMap"
    assert crd.key("HelmRelease") == "CustomResourceDefinition"
    assert (present.ready, present.title) == (False, "Job/db/migrate")
    # a Flux kind is named in the operator's memory with its group (as Kind.key does)
    [flux] = dependencies([{"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                            "name": "infra"}], "app", "shop", "HelmRelease")
    assert flux.key("HelmRelease") == "Kustomization.kustomize.toolkit.fluxcd.io"


@pytest.mark.parametrize(("entries", "reason", "words"), [
    ([{"namespace": "x"}], "InvalidSpec", "spec.dependsOn[0].name is required"),
    ([{"kind": "ConfigMap", "name": "a"}], "InvalidSpec", "apiVersion is required: ConfigMap is not a HelmRelease"),
    ([{"apiVersion": "v1", "name": "a"}], "InvalidSpec", "kind is required with apiVersion"),
    ([{"name": "a", "ready": "yes"}], "InvalidSpec", "ready must be true or false"),
    ([{"name": "app"}], "DependencyCycle", "names this HelmRelease itself"),
    ("db", "InvalidSpec", "spec.dependsOn"),
])
def test_what_is_refused(entries: Any, reason: str, words: str) -> None:
    with pytest.raises(SpecError) as refused:
        dependencies(entries, "app", "shop", "HelmRelease")
    assert refused.value.reason == reason and words in str(refused.value), refused.value


def test_both_kinds_parse_the_same_entries() -> None:
    entries = [{"name": "infra"}, {"apiVersion": "apps/v1", "kind": "Deployment", "name": "db"}]
    release = parse_spec({"chart": {"repository": {"url": "https://charts.example.com", "name": "a"}},
                          "dependsOn": entries}, "app", "shop")
    sync = parse_config_sync({"sourceRef": {"kind": "GitRepository", "name": "repo"}, "path": "./apps",
                              "dependsOn": entries}, "app", "shop")
    assert release.depends_on == sync.depends_on == (Dependency("shop", "infra"),
                                                      Dependency("", "db", api_version="apps/v1", kind="Deployment"))


def test_trace_names_what_an_object_depends_on() -> None:
    obj = {"apiVersion": "helmop.dev/v1alpha1", "kind": "ConfigSync", "metadata": {"name": "app", "namespace": "shop"},
           "spec": {"sourceRef": {"name": "config"}, "path": "./app", "dependsOn": [
               {"name": "infra"},
               {"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease", "name": "db", "namespace": "data"},
               {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "name": "x.example.com"}]}}
    lines = dict(describe(obj))
    assert lines["Depends on"] == ("ConfigSync/shop/infra, HelmRelease/data/db, "
                                   "CustomResourceDefinition/x.example.com")
    bad = {**obj, "spec": {**obj["spec"], "dependsOn": [{"kind": "ConfigMap", "name": "a"}]}}
    assert dict(describe(bad))["Depends on"].startswith("(invalid: spec.dependsOn[0].apiVersion is required")


def test_try_follows_the_dependencies_on_kinds_it_follows() -> None:
    """helmop try waits with an object for the dependencies it follows (helmop's and Flux's kinds, under their own
    group), and leaves a ConfigMap's or a CRD's to the operator's condition."""
    release = {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
               "metadata": {"name": "app", "namespace": "shop"},
               "spec": {"dependsOn": [
                   {"name": "db"},
                   {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "name": "infra",
                    "namespace": "flux-system"},
                   {"apiVersion": "v1", "kind": "ConfigMap", "name": "flag"},
                   {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "name": "x.y"}]}}
    after, _ = trystates.waits_for(release)
    assert after == ("HelmRelease.helm.toolkit.fluxcd.io/shop/db",
                     "Kustomization.kustomize.toolkit.fluxcd.io/flux-system/infra")


def test_an_entry_naming_the_objects_own_kind_and_group_is_of_the_same_kind() -> None:
    """As written by hand or by a tool: {apiVersion, kind} of the object itself means what {name} means (its
    namespace by default; dependents first when deleted together), and a Flux Kustomization's own kind name too."""
    [explicit] = dependencies([{"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease", "name": "db"}], "app",
                              "shop", "HelmRelease", "helmop.dev")
    assert explicit == Dependency("shop", "db")
    flux = parse_config_sync({"sourceRef": {"kind": "GitRepository", "name": "repo"}, "path": "./apps",
                              "dependsOn": [{"kind": "Kustomization", "name": "infra"}]}, "apps", "flux-system",
                             "Kustomization", "kustomize.toolkit.fluxcd.io")
    assert flux.depends_on == (Dependency("flux-system", "infra"),)


@pytest.mark.parametrize(("entry", "words"), [
    ({"apiVersion": "v1?x", "kind": "ConfigMap", "name": "a"}, "is not group/version"),
    ({"apiVersion": "a//b", "kind": "X", "name": "a"}, "is not group/version"),
    ({"name": "../secrets"}, "cannot be the name of an object"),
    ({"name": "a", "namespace": "Not_A_Namespace"}, "is not a namespace name"),
])
def test_what_would_be_a_bad_path_is_refused(entry: dict[str, Any], words: str) -> None:
    with pytest.raises(SpecError) as refused:
        dependencies([entry], "app", "shop", "HelmRelease")
    assert refused.value.reason == "InvalidSpec" and words in str(refused.value), refused.value
    # a ClusterRole's looser name is a name
    assert dependencies([{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                          "name": "system:aggregate-to-view"}], "app", "shop", "HelmRelease")[0].name


def test_notification_kinds_are_ready_once_there() -> None:
    """helmop's and Flux's Providers and Alerts get no Ready condition: present is ready."""
    assert readiness({"apiVersion": "helmop.dev/v1alpha1", "kind": "Provider", "metadata": {"name": "p"}}) == ""
    assert readiness({"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease", "metadata": {"name": "h"}}) != ""
