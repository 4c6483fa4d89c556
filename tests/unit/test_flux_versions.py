"""Flux's removed API versions, served (--flux-api): each CRD serves them deprecated beside the current version,
and every field only they had is read as the current version's (Flux's deprecation notes) or dropped where the
last Flux serving it ignored it, never lost unsaid; the object's managedFields say which version each such field
was written in (the entry owning it)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from typing import Any

import pytest
import yaml
from helmop_sandbox import Sandbox

from helmop.api.errors import SpecError
from helmop.api.flux import convert, upgrade, versions
from helmop.api.flux import crds as flux_crds
from helmop.api.flux import spec as flux_spec
from helmop.api.flux.crds import PAIRS
from helmop.api.flux.paths import dotted
from helmop.api.helmrelease import parse_spec
from helmop.api.kinds import FLUX, HELMOP
from helmop.api.objects import slim
from helmop.cli.main import parser
from helmop.controllers import fluxversions
from helmop.controllers.configsyncs import prune
from helmop.decisions.specs import read_spec
from helmop.decisions.sync import OWNER_UID, Marks, ObjectId
from helmop.infra.kube import Connection, Kube
from tests.tools import ROOT, tool

HELM = "helm.toolkit.fluxcd.io"
DEPLOYMENT_PATCH = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web.app"},
                    "spec": {"replicas": 2}}
EVERY = lambda _: True  # noqa: E731 (every removed field read as written in its version)
LABEL_PATCH = {"target": {"kind": "Service", "name": "web"},
               "patch": [{"op": "add", "path": "/metadata/labels/tier", "value": "front"}]}


def test_each_crd_serves_flux_s_removed_versions_deprecated_beside_the_current_one() -> None:
    for crd in flux_crds.definitions():
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        known = versions.flux_kind(f"{group}/x", kind)
        assert known is not None
        current, *removed = crd["spec"]["versions"]
        assert (current["name"], current["storage"]) == (known.served, True)
        assert [v["name"] for v in removed] == [version for version, _ in known.removed]
        for version in removed:
            assert version["served"] and not version["storage"] and version["deprecated"]
            assert version["schema"] == current["schema"]  # so the fields only they had survive storage
            assert version["deprecationWarning"] == (
                f"{group}/{version['name']} {kind} is deprecated (removed in Flux "
                f"{dict(known.removed)[version['name']]}): use {known.served_api_version}")
        assert crd["spec"].get("conversion", {"strategy": "None"}) == {"strategy": "None"}
    by_name = {c["metadata"]["name"]: c for c in flux_crds.definitions()}
    assert [v["name"] for v in by_name[f"helmreleases.{HELM}"]["spec"]["versions"]] == ["v2", "v2beta1", "v2beta2"]
    assert [len(c["spec"]["versions"]) for c in flux_crds.definitions(removed=False)] == [1] * len(PAIRS)


def test_a_v2beta1_helmrelease_is_read_as_v2() -> None:
    spec: dict[str, Any] = {"chart": {"spec": {"chart": "demo", "version": "0.1.x", "valuesFile": "values-prod.yaml",
                               "valuesFiles": ["values-eu.yaml"],
                               "sourceRef": {"kind": "HelmRepository", "name": "charts"}}},
            "postRenderers": [{"kustomize": {"patchesStrategicMerge": [DEPLOYMENT_PATCH],
                                             "patches": [{"patch": "metadata: {labels: {a: b}}",
                                                          "target": {"kind": "Service"}}],
                                             "patchesJson6902": [LABEL_PATCH]}}]}
    read, said = upgrade.upgrade("HelmRelease", spec, EVERY)
    assert read["chart"]["spec"]["valuesFiles"] == ["values-prod.yaml", "values-eu.yaml"]  # Flux merged it first
    assert "valuesFile" not in read["chart"]["spec"] and "valuesFile" in spec["chart"]["spec"]  # a copy
    assert read["postRenderers"] == [{"kustomize": {"patches": [
        # a strategic merge without a target: kustomize (and the post-renderer) patches the one object it names
        {"patch": json.dumps(DEPLOYMENT_PATCH)},
        {"patch": "metadata: {labels: {a: b}}", "target": {"kind": "Service"}},
        {"patch": json.dumps(LABEL_PATCH["patch"]), "target": {"kind": "Service", "name": "web"}}]}}]
    assert said == ["spec.chart.spec.valuesFile read as spec.chart.spec.valuesFiles[0]",
                    "spec.postRenderers[0].kustomize.patchesStrategicMerge read as "
                    "spec.postRenderers[0].kustomize.patches",
                    "spec.postRenderers[0].kustomize.patchesJson6902 read as spec.postRenderers[0].kustomize.patches"]
    kind = next(theirs for _, theirs in PAIRS if theirs.kind == "HelmRelease")
    flux_spec.check(kind, read)  # nothing left that helmop does not implement
    chart = parse_spec(read, "web", "apps").chart
    assert getattr(chart, "values_files", None) == ("values-prod.yaml", "values-eu.yaml")


def test_a_v1beta2_kustomization_is_read_as_v1() -> None:
    spec = {"interval": "10m", "path": "./apps", "prune": True, "validation": "client",
            "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
            "patchesStrategicMerge": [DEPLOYMENT_PATCH], "patchesJson6902": [LABEL_PATCH]}
    read, said = upgrade.upgrade("Kustomization", spec, EVERY)
    assert "validation" not in read and read["patches"] == [
        {"patch": json.dumps(DEPLOYMENT_PATCH)}, {"patch": json.dumps(LABEL_PATCH["patch"]),
                                                  "target": LABEL_PATCH["target"]}]
    assert said == ["spec.patchesStrategicMerge read as spec.patches", "spec.patchesJson6902 read as spec.patches",
                    "spec.validation ignored, as the last Flux that served it did (remove it)"]
    kind = next(theirs for _, theirs in PAIRS if theirs.kind == "Kustomization")
    flux_spec.check(kind, read)
    read_spec(HELMOP.configsync, {"metadata": {"name": "apps", "namespace": "flux-system"}, "spec": read})


@pytest.mark.parametrize("kind", [k for k in versions.KINDS if k.gone])
def test_every_field_flux_removed_is_read_or_dropped_and_said(kind: versions.FluxKind) -> None:
    """versions.KINDS lists what each kind lost; each such field, written, is gone after the upgrade (read as its
    replacement or dropped) and named: none reaches the adapter to be refused as unknown."""
    for pattern, _ in kind.gone:
        spec: dict[str, Any] = {}
        _put(spec, pattern.removeprefix("spec.").replace("[]", ".[]").split("."))
        read, said = upgrade.upgrade(kind.kind, spec, EVERY)
        assert not list(versions.present({"spec": read}, pattern)), pattern
        assert len(said) == 1 and said[0].startswith(pattern.replace("[]", "[0]")), (pattern, said)


def _put(node: dict[str, Any], parts: list[str]) -> None:
    """A value of the shape a removed version had at ``parts``."""
    name, rest = parts[0], parts[1:]
    if rest and rest[0] == "[]":
        node[name] = [{}]
        _put(node[name][0], rest[1:])
    elif rest:
        node[name] = {}
        _put(node[name], rest)
    else:
        node[name] = {"valuesFile": "values.yaml", "patchesStrategicMerge": [DEPLOYMENT_PATCH],
                      "patchesJson6902": [LABEL_PATCH]}.get(name, "go-git")


@pytest.mark.parametrize(("kind", "spec", "said"), [
    ("Kustomization", {"patchesStrategicMerge": "kind: Deployment"},
     "spec.patchesStrategicMerge must be a list of objects"),
    ("Kustomization", {"patchesStrategicMerge": [{"spec": {"replicas": 2}}]},
     "spec.patchesStrategicMerge[0] must name the object it patches"),
    ("Kustomization", {"patchesJson6902": [{"target": "web", "patch": []}]},
     "spec.patchesJson6902[0] must have a target (an object) and a patch"),
    ("Kustomization", {"patchesJson6902": [LABEL_PATCH], "patches": {"patch": "x"}}, "spec.patches must be a list"),
    ("HelmChart", {"valuesFile": ["a.yaml"]}, "spec.valuesFile must be a path"),
    ("HelmRelease", {"chart": {"spec": {"valuesFile": "a.yaml", "valuesFiles": "b.yaml"}}},
     "spec.chart.spec.valuesFile must be a path, and valuesFiles a list"),
])
def test_a_removed_field_not_of_its_version_s_shape_is_refused_by_name(kind: str, spec: dict[str, Any],
                                                                       said: str) -> None:
    with pytest.raises(SpecError) as caught:
        upgrade.upgrade(kind, spec, EVERY)
    assert caught.value.reason == "InvalidSpec" and str(caught.value).startswith(said)


def _entry(manager: str, version: str, fields: dict[str, Any], **more: str) -> dict[str, Any]:
    return {"manager": manager, "operation": "Update", "apiVersion": f"{HELM}/{version}", "fieldsType": "FieldsV1",
            "fieldsV1": fields, **more}


def _release(*entries: Any, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{HELM}/v2", "kind": "HelmRelease", "metadata": {"managedFields": list(entries)},
            "spec": spec}


CHART = {"chart": {"spec": {"chart": "demo", "valuesFile": "values.yaml"}}}
OWNS_VALUES_FILE: dict[str, Any] = {"f:spec": {"f:chart": {"f:spec": {"f:chart": {}, "f:valuesFile": {}}}}}


def test_a_removed_field_is_old_only_where_an_entry_of_a_removed_version_owns_it() -> None:
    """kube-apiserver keeps a manager's Update entry per apiVersion: an old entry says nothing of the fields it
    does not own (Flux's own helm-controller, before Flux 2.3, left one owning the finalizers only)."""
    old = _entry("kubectl-client-side-apply", "v2beta1", OWNS_VALUES_FILE)
    assert upgrade.written_as(_release(old, **CHART)) == {"spec.chart.spec.valuesFile": f"{HELM}/v2beta1"}
    finalizers = _entry("helm-controller", "v2beta1", {"f:metadata": {"f:finalizers": {
        ".": {}, 'v:"finalizers.fluxcd.io"': {}}}})
    current = _entry("kubectl", "v2", OWNS_VALUES_FILE, operation="Apply")
    assert upgrade.written_as(_release(finalizers, current, **CHART)) == {}
    # an old entry that still owns other fields, not this one (applied as v2 since: this field is v2's)
    assert upgrade.written_as(_release(_entry("kubectl", "v2beta1", {"f:spec": {"f:interval": {}}}), current,
                                       **CHART)) == {}
    # an atomic list (postRenderers has no list-type) owns all it holds
    renderers = {"postRenderers": [{"kustomize": {"images": []}},
                                   {"kustomize": {"patchesStrategicMerge": [DEPLOYMENT_PATCH]}}]}
    assert upgrade.written_as(_release(_entry("flux", "v2beta2", {"f:spec": {"f:postRenderers": {}}}),
                                       **renderers)) == {
        "spec.postRenderers[1].kustomize.patchesStrategicMerge": f"{HELM}/v2beta2"}
    keyed: dict[str, Any] = {"f:spec": {"f:postRenderers": {'k:{"name":"a"}': {"f:kustomize": {
        "f:patchesStrategicMerge": {}}}}}}
    assert list(upgrade.written_as(_release(_entry("flux", "v2beta2", keyed), **renderers))) == [
        "spec.postRenderers[1].kustomize.patchesStrategicMerge"]


@pytest.mark.parametrize("entries", [
    [_entry("helmop", "v2beta1", OWNS_VALUES_FILE, subresource="status")],  # a status write: not the spec's
    [_entry("other", "v2", OWNS_VALUES_FILE)],
    [_entry("empty", "v2beta1", {})],
    [_entry("odd", "v2beta1", {"f:spec": []})],
    ["garbage", 7],
    [*[_entry("x", "v2", {})] * upgrade.MAX_MANAGERS, _entry("late", "v2beta1", OWNS_VALUES_FILE)],  # bounded
])
def test_nothing_else_says_a_field_was_written_in_a_removed_version(entries: list[Any]) -> None:
    assert upgrade.written_as(_release(*entries, **CHART)) == {}


def test_written_as_is_for_flux_s_kinds_only() -> None:
    body = _release(_entry("kubectl", "v2beta1", OWNS_VALUES_FILE), **CHART)
    assert upgrade.written_as({**body, "apiVersion": "v1", "kind": "ConfigMap"}) == {}
    assert upgrade.written_as({**body, "metadata": {"managedFields": "x"}}) == {}


def test_the_warning_names_the_version_what_was_read_and_the_replacement() -> None:
    known = versions.flux_kind(f"{HELM}/v2", "HelmRelease")
    assert known is not None
    assert upgrade.notes(known, [f"{HELM}/v2beta1"], ["spec.chart.spec.valuesFile read as "
                                                      "spec.chart.spec.valuesFiles[0]"]) == (
        f"written as {HELM}/v2beta1 (removed in Flux 2.7), served as {HELM}/v2: spec.chart.spec.valuesFile read as "
        f"spec.chart.spec.valuesFiles[0]. Rewrite it as {HELM}/v2 (flux migrate -f does) with these fields as "
        "they are read")


def test_only_the_removed_fields_written_so_are_read() -> None:
    spec = {"chart": {"spec": {"valuesFile": "a.yaml"}}, "postRenderers": [{"kustomize": {
        "patchesStrategicMerge": [DEPLOYMENT_PATCH], "patchesJson6902": [LABEL_PATCH]}}]}
    old = {"spec.postRenderers[0].kustomize.patchesJson6902"}
    read, said = upgrade.upgrade("HelmRelease", spec, lambda path: dotted(path) in old)
    assert said == ["spec.postRenderers[0].kustomize.patchesJson6902 read as spec.postRenderers[0].kustomize.patches"]
    # the others stay for the adapter to refuse by name
    assert read["chart"]["spec"] == {"valuesFile": "a.yaml"}
    assert read["postRenderers"][0]["kustomize"]["patchesStrategicMerge"] == [DEPLOYMENT_PATCH]


def test_flux_api_serves_the_removed_versions_unless_current() -> None:
    def flux_api(*args: str) -> str | None:
        value: str | None = parser().parse_args(["run", *args]).flux_api
        return value

    assert (flux_api(), flux_api("--flux-api"), flux_api("--flux-api=current")) == (None, "all", "current")
    assert flux_api("--flux-api", "--flux-namespace", "gitops") == "all"
    with pytest.raises(SystemExit):
        flux_api("--flux-api=v1beta2")


def test_the_chart_passes_its_flux_api_versions_on() -> None:
    def args(*values: str) -> list[str]:
        rendered = subprocess.run([tool("helm"), "template", "helmop", str(ROOT / "deploy" / "helmop"), "--set",
                                   "fluxAPI.enabled=true", *(f"--set={v}" for v in values)],
                                  capture_output=True, text=True)
        if rendered.returncode:
            return [rendered.stderr.strip()]
        deployment = next(d for d in yaml.safe_load_all(rendered.stdout) if d and d["kind"] == "Deployment")
        return [a for a in deployment["spec"]["template"]["spec"]["containers"][0]["args"] if "--flux-api" in a]

    assert args() == ["--flux-api=all"]
    assert args("fluxAPI.versions=current") == ["--flux-api=current"]
    assert "fluxAPI.versions must be all or current" in args("fluxAPI.versions=v1beta2")[0]


def test_helmop_convert_still_names_the_replacement() -> None:
    """Served by the operator, a removed version is still no manifest for a Flux of today: convert says so."""
    old = {"apiVersion": f"{HELM}/v2beta1", "kind": "HelmRelease", "metadata": {"name": "web"},
           "spec": {"chart": {"spec": {"chart": "demo", "valuesFile": "values-prod.yaml",
                                       "sourceRef": {"kind": "HelmRepository", "name": "charts"}}}}}
    with pytest.raises(convert.Refused) as caught:
        convert.convert(old, to_flux=False, read=read_spec)
    assert [r.message for r in caught.value.refusals] == [
        f"{HELM}/v2beta1 was removed in Flux 2.7: rewrite it as {HELM}/v2 (flux migrate -f does)",
        f"spec.chart.spec.valuesFile is not in {HELM}/v2: use spec.chart.spec.valuesFiles, a list"]


def test_the_version_written_is_kept_past_slimming_and_cannot_be_forged() -> None:
    written = {**_release(_entry("kubectl", "v2beta2", OWNS_VALUES_FILE), **CHART), "metadata": {
        "name": "web", "managedFields": [_entry("kubectl", "v2beta2", OWNS_VALUES_FILE)]}}
    noted = slim(fluxversions.noted(FLUX.helmrelease, written))
    assert noted["metadata"]["annotations"] == {fluxversions.WRITTEN_AS: f"spec.chart.spec.valuesFile={HELM}/v2beta2"}
    assert "annotations" not in written["metadata"]  # the watched body is not changed
    forged = {**written, "metadata": {"name": "web", "annotations": {
        fluxversions.WRITTEN_AS: f"spec.chart.spec.valuesFile={HELM}/v2beta1", "team": "a"}}}
    assert fluxversions.noted(FLUX.helmrelease, forged)["metadata"]["annotations"] == {"team": "a"}
    plain = {**written, "metadata": {"name": "web"}}
    assert fluxversions.noted(FLUX.helmrelease, plain) is plain
    assert fluxversions.noted(HELMOP.helmrelease, written) is written


def test_with_flux_api_current_the_removed_fields_keep_their_places() -> None:
    """Objects written while the removed versions were served keep their old fields under =current, for the
    adapter to refuse by name rather than have the API server prune them unseen."""
    for removed in (True, False):
        by_kind = {c["spec"]["names"]["kind"]: c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
                   ["spec"] for c in flux_crds.definitions(removed)}
        kustomize = by_kind["HelmRelease"]["properties"]["postRenderers"]["items"]["properties"]["kustomize"]
        assert kustomize["x-kubernetes-preserve-unknown-fields"] is True
        assert by_kind["HelmRelease"]["properties"]["chart"]["properties"]["spec"][
            "x-kubernetes-preserve-unknown-fields"] is True


def test_an_object_recorded_in_a_version_no_longer_served_is_pruned_in_the_served_one() -> None:
    """After --flux-api=current (or Flux's own CRDs back), an inventory's v1beta1 entry is the same object in the
    version served now; a kind not served at all fails the prune (the object kept in the inventory), never taken
    for gone."""
    group = "prune.flux-versions.test"
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}

    def crd(old_served: bool) -> dict[str, Any]:
        return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": f"widgets.{group}"},
                "spec": {"group": group, "scope": "Namespaced", "conversion": {"strategy": "None"},
                         "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                         "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema},
                                      {"name": "v1beta1", "served": old_served, "storage": False, "schema": schema}]}}

    marks = Marks(label="apps", uid="sync-uid")
    recorded = ObjectId(f"{group}/v1beta1", "Widget", "default", "w")

    async def scenario(kube: Kube) -> None:
        await kube.apply(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{group}", crd(True),
                         "test")
        await kube.apply(await kube.path_of(recorded.api_version, "Widget", "default", "w"), {
            "apiVersion": recorded.api_version, "kind": "Widget", "metadata": {
                "name": "w", "namespace": "default", "annotations": {OWNER_UID: marks.uid}}}, "test")
        await kube.apply(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{group}", crd(False),
                         "test")
        unserved = ObjectId(f"{group}/v1beta1", "Gadget", "default", "g")
        pruned, failures = await prune.prune(kube, [unserved, recorded], marks, {})
        assert pruned == [recorded]
        assert failures == [f"Gadget/default/g: prune failed: the server serves no Gadget of {group} (recorded as "
                            f"{group}/v1beta1): not known to be gone"]
        left = await kube.get(f"/apis/{group}/v1/namespaces/default/widgets/w")
        assert left is None, left["metadata"]
        gone_group = ObjectId("gone.flux-versions.test/v1", "Widget", "default", "w")
        assert (await prune.prune(kube, [gone_group], marks, {}))[1] == [
            "Widget/default/w: prune failed: the server serves no Widget of gone.flux-versions.test (recorded as "
            "gone.flux-versions.test/v1): not known to be gone"]

    with Sandbox(ready_delay=0.05) as sandbox:
        async def run() -> None:
            kube = Kube(Connection.from_kubeconfig(sandbox.kubeconfig))
            try:
                await scenario(kube)
            finally:
                await kube.close()

        asyncio.run(run())
