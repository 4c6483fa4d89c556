"""How a ConfigSync's server-side apply treats each object, decided without I/O (helmop.decisions.ssa and
.fieldowners, helmop.api.pointers and .ignorerules): stages, ssa marks, drift with ignored fields, ignored fields
resolved by ownership, kubectl's fields taken over, and Flux's generated kustomization (helmop.sources.generated)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from helmop.api import pointers
from helmop.api.errors import SpecError
from helmop.api.ignorerules import ignored, parse_ignore_rules
from helmop.decisions.fieldowners import resolved, taken_over
from helmop.decisions.ssa import drifted, skipped, stages
from helmop.decisions.sync import ObjectId
from helmop.sources.generated import generate
from helmop.sources.origins import relocated

SSA = "kustomize.toolkit.fluxcd.io/ssa"


def test_stages_are_flux_s() -> None:
    ids = [ObjectId("apps/v1", "Deployment", "a", "web"), ObjectId("v1", "Namespace", "", "a"),
           ObjectId("storage.k8s.io/v1", "StorageClass", "", "fast"),
           ObjectId("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "x.example.com"),
           ObjectId("rbac.authorization.k8s.io/v1", "ClusterRole", "", "r"),
           ObjectId("example.com/v1", "Namespace", "a", "not-core"), ObjectId("v1", "ConfigMap", "a", "c")]
    assert [[o.kind for o in stage] for stage in stages(ids)] == [
        ["CustomResourceDefinition", "Namespace", "ClusterRole"], ["StorageClass"],
        ["Namespace", "ConfigMap", "Deployment"]]  # (a Namespace of another group: in apply order, not first)


def obj(**meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", **meta}}


@pytest.mark.parametrize(("desired", "live", "said"), [
    (obj(annotations={SSA: "IfNotPresent"}), None, ""),  # created when missing
    (obj(annotations={SSA: "ifnotpresent"}), obj(), "IfNotPresent"),  # never changed afterwards, any case
    (obj(), obj(annotations={SSA: "IfNotPresent"}), ""),  # said of the object in git only
    (obj(labels={SSA: "Ignore"}), None, "Ignore"),
    (obj(), obj(annotations={SSA: "IGNORE"}), "Ignore"),  # said of either
    (obj(annotations={"kustomize.toolkit.fluxcd.io/reconcile": "Disabled"}), obj(), "disabled"),
    (obj(annotations={SSA: "Merge"}), obj(), ""),
])
def test_ssa_marks(desired: dict[str, Any], live: dict[str, Any] | None, said: str) -> None:
    why = skipped(desired, live)
    assert (said in why) if said else not why


def deployment(replicas: int, image: str = "nginx:1", managed: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}, "resourceVersion": "7",
                         "managedFields": managed or []},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "c", "image": image}]}}},
            "status": {"replicas": 1}}


REPLICAS = (("spec", "replicas"),)


def test_drift_leaves_out_metadata_status_and_ignored_fields() -> None:
    live = deployment(5)
    assert drifted(live, deployment(1))
    assert not drifted(live, deployment(1), REPLICAS)
    later = deployment(5)
    later["metadata"]["resourceVersion"], later["status"] = "8", {}
    assert not drifted(live, later)
    later["metadata"]["labels"]["extra"] = "x"
    assert drifted(live, later)


APPLIED_BY_AUTOSCALER = [{"manager": "autoscaler", "operation": "Apply",
                          "fieldsV1": {"f:spec": {"f:replicas": {}}}},
                         {"manager": "helmop-configsync", "operation": "Apply",
                          "fieldsV1": {"f:spec": {"f:template": {}}}}]


def test_ignored_fields_are_left_to_who_applied_them_or_kept_as_they_are() -> None:
    desired = deployment(1, "nginx:2")
    # another manager applied it: left out of the apply
    out = resolved(desired, deployment(5, managed=APPLIED_BY_AUTOSCALER), deployment(1, "nginx:2"), REPLICAS,
                   "helmop-configsync")
    assert "replicas" not in out["spec"] and out["spec"]["template"] == desired["spec"]["template"]
    # an update wrote it (kubectl scale): its live value is applied
    scaled = [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {"f:replicas": {}}}}]
    out = resolved(desired, deployment(7, managed=scaled), deployment(1, "nginx:2"), REPLICAS, "helmop-configsync")
    assert out["spec"]["replicas"] == 7
    # the apply would not change it: left as git says
    out = resolved(desired, deployment(1, managed=APPLIED_BY_AUTOSCALER), deployment(1, "nginx:2"), REPLICAS,
                   "helmop-configsync")
    assert out == desired


def test_list_items_are_owned_by_their_merge_keys() -> None:
    live = deployment(1)
    live["metadata"]["managedFields"] = [{"manager": "injector", "operation": "Apply", "fieldsV1": {"f:spec": {
        "f:template": {"f:spec": {"f:containers": {'k:{"name":"c"}': {"f:image": {}}}}}}}}]
    image = (("spec", "template", "spec", "containers", "0", "image"),)
    out = resolved(deployment(1, "nginx:2"), live, deployment(1, "nginx:2"), image, "helmop-configsync")
    assert "image" not in out["spec"]["template"]["spec"]["containers"][0]


def test_kubectls_fields_are_taken_over_with_client_side_marks() -> None:
    live = deployment(1, managed=[
        {"manager": "kubectl-edit", "operation": "Update", "fieldsV1": {"f:metadata": {"f:labels": {"f:extra": {}}}}},
        {"manager": "helmop-configsync", "operation": "Apply", "fieldsV1": {"f:spec": {"f:replicas": {}}}},
        {"manager": "kubectl", "operation": "Update", "subresource": "scale",
         "fieldsV1": {"f:spec": {"f:replicas": {}}}},
        {"manager": "hpa", "operation": "Update", "fieldsV1": {"f:spec": {"f:replicas": {}}}}])
    live["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": "{}"}
    before = copy.deepcopy(live)
    patch = taken_over(live, "helmop-configsync")
    assert live == before
    entries = patch[0]["value"]
    assert [e["manager"] for e in entries] == ["helmop-configsync", "kubectl", "hpa"]  # a subresource's stays
    assert entries[0]["fieldsV1"] == {"f:spec": {"f:replicas": {}}, "f:metadata": {"f:labels": {"f:extra": {}}}}
    assert patch[1] == {"op": "remove",
                        "path": "/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration"}
    assert taken_over(deployment(1, managed=APPLIED_BY_AUTOSCALER), "helmop-configsync") == []


@pytest.mark.parametrize(("raw", "said"), [
    ([{"paths": ["spec/replicas"]}], "spec.ignore[0].paths[0]"),
    ([{"paths": ["/a~2b"]}], "~0"),
    ([{"paths": []}], "spec.ignore[0].paths"),
    ([{"paths": ["/spec"], "target": {"name": "(["}}], "spec.ignore[0].target.name"),
    ({"paths": ["/spec"]}, "must be a list"),
])
def test_bad_ignore_rules_are_refused_by_name(raw: Any, said: str) -> None:
    with pytest.raises(SpecError) as refused:
        parse_ignore_rules(raw)
    assert refused.value.reason == "InvalidSpec" and said in str(refused.value)


def test_ignore_rules_select_their_targets() -> None:
    rules = parse_ignore_rules([{"paths": ["/spec/replicas"], "target": {"kind": "Deploy.*", "name": "w.b"}},
                                {"paths": ["/metadata/annotations/example.com~1hash"]}])
    assert ignored(rules, deployment(1)) == (("spec", "replicas"), ("metadata", "annotations", "example.com/hash"))
    assert ignored(rules, {"kind": "ConfigMap", "metadata": {"name": "web"}}) == (
        ("metadata", "annotations", "example.com/hash"),)


def test_pointers_read_remove_and_set() -> None:
    doc: dict[str, Any] = {"a": [{"b": 1}, {"b": 2}], "c~d": {"e/f": 3}}
    assert pointers.get(doc, pointers.parse("/a/1/b", "x")) == 2
    assert pointers.get(doc, pointers.parse("/c~0d/e~1f", "x")) == 3
    assert pointers.get(doc, ("a", "9")) is pointers.MISSING and pointers.get(doc, ("a", "01")) is pointers.MISSING
    pointers.put(doc, ("new", "deep"), 4)
    pointers.remove(doc, ("a", "0"))
    pointers.remove(doc, ("nothing", "here"))
    assert doc == {"a": [{"b": 2}], "c~d": {"e/f": 3}, "new": {"deep": 4}}


def test_flux_s_generated_kustomization() -> None:
    names = ["c/README.md", "c/b.yaml", "c/a.yml", "c/x.json", "c/UP.YAML", "c/deep/z.yaml", "c/deep/er/y.yaml",
             "c/sys/kustomization.yaml", "c/sys/inner/never.yaml", "c/sys/gotk.yaml", "c/odd/Kustomization",
             "other/o.yaml", "c/kustomizations/k.yaml"]
    layout = generate(names, "c")
    assert layout.resources == ("c/a.yml", "c/b.yaml", "c/deep/er/y.yaml", "c/deep/z.yaml",
                                "c/kustomizations/k.yaml", "c/odd", "c/sys")
    assert layout.folders == {"c/odd", "c/sys"}
    assert generate(names, "c/none").resources == () and generate(["a.yaml"], "").resources == ("a.yaml",)


def test_build_annotations_name_files_relative_to_the_path() -> None:
    built = {"kind": "ConfigMap", "metadata": {"name": "x", "annotations": {
        "config.kubernetes.io/origin": "path: ../repo/apps/cm.yaml\n",
        "alpha.config.kubernetes.io/transformations": "- configuredIn: ../repo/base/kustomization.yaml\n"
                                                      "  configuredBy:\n    apiVersion: builtin\n"
                                                      "    kind: PrefixTransformer\n"
                                                      "- configuredIn: kustomization.yaml\n  configuredBy:\n"
                                                      "    apiVersion: builtin\n    kind: NamespaceTransformer\n",
        "other": "path: ../repo/x"}}}
    annotations = relocated(built, "apps", "../repo")["metadata"]["annotations"]
    assert annotations["config.kubernetes.io/origin"] == "path: cm.yaml\n"
    assert annotations["alpha.config.kubernetes.io/transformations"].startswith(
        "- configuredIn: ../base/kustomization.yaml\n  configuredBy:\n    apiVersion: builtin\n")
    assert "- configuredIn: kustomization.yaml\n" in annotations["alpha.config.kubernetes.io/transformations"]
    assert annotations["other"] == "path: ../repo/x"
