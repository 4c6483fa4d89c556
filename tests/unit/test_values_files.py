"""spec.valuesFiles (a HelmRelease's values files from sources' artifacts) as parsed, as the tenancy policy judges
them, as app kinds carry them, and as they are read and merged from an artifact's tree (the tree readers' own
confinement and limits applied)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from helmop.api.apps import parse_apps
from helmop.api.errors import SpecError
from helmop.api.helmrelease import MAX_VALUES_FILES, ValuesFile, parse_spec
from helmop.api.kinds import FLUX, HELMOP
from helmop.api.tenancy import Tenancy
from helmop.decisions.specs import read_spec
from helmop.helm import inputs
from helmop.helm.apps import release_spec
from helmop.helm.inputs import MAX_VALUES_FILE_BYTES, InputError, source_values
from helmop.sources.trees import TreeArtifact
from helmop.views.values_diff import MASK, _secret_paths, changes

CHART = {"repository": {"url": "https://charts.example", "name": "web", "version": "1.0.0"}}


def _files(*entries: dict[str, Any]) -> tuple[ValuesFile, ...]:
    return parse_spec({"chart": CHART, "valuesFiles": list(entries)}, "web", "shop").values_files


def _entry(path: str = "web/values.yaml", kind: str = "GitRepository", **more: Any) -> dict[str, Any]:
    return {"sourceRef": {"kind": kind, "name": "config", **more.pop("ref", {})}, "path": path, **more}


@pytest.mark.parametrize("kind", ["GitRepository", "OCIRepository", "Bucket", "ExternalArtifact"])
def test_values_files_come_from_the_sources_that_publish_trees(kind: str) -> None:
    found = _files(_entry("./web/values.yaml", kind, ref={"namespace": "shared"}), _entry("b.yaml", kind,
                                                                                          optional=True))
    assert found == (ValuesFile(kind, "config", "web/values.yaml", "shared"),
                     ValuesFile(kind, "config", "b.yaml", "", optional=True))
    assert found[0].describe("shop") == f"'web/values.yaml' of {kind} shared/config"
    assert found[1].describe("shop") == f"'b.yaml' of {kind} shop/config"


@pytest.mark.parametrize("kind", ["HelmRepository", "HelmChart", "", "ConfigMap"])
def test_other_kinds_are_refused(kind: str) -> None:
    with pytest.raises(SpecError, match=r"spec.valuesFiles\[0\].sourceRef.kind") as refused:
        _files(_entry(kind=kind))
    assert refused.value.reason == "UnsupportedSourceKind"


@pytest.mark.parametrize("path", ["../values.yaml", "web/../../values.yaml", "web/..", "/etc/passwd", "", "web/",
                                  "web//values.yaml", "web/./values.yaml", "..\\values.yaml", "a\0b"])
def test_paths_that_could_leave_the_artifact_are_refused(path: str) -> None:
    with pytest.raises(SpecError, match=r"spec.valuesFiles\[0\].path") as refused:
        _files(_entry(path))
    assert refused.value.reason == "InvalidSpec"


@pytest.mark.parametrize(("entries", "said"), [
    ([{"path": "a.yaml"}], r"spec.valuesFiles\[0\] needs sourceRef"),
    ([_entry(ref={"name": ".."})], r"spec.valuesFiles\[0\].sourceRef.name: '..' is not an object name"),
    ([_entry(ref={"namespace": "a/b"})], r"spec.valuesFiles\[0\].sourceRef.namespace: 'a/b' is not a namespace"),
    ([_entry()] * (MAX_VALUES_FILES + 1), f"lists {MAX_VALUES_FILES + 1} files, more than {MAX_VALUES_FILES}"),
    ("web/values.yaml", "spec.valuesFiles must be a list")])
def test_malformed_entries_are_refused(entries: Any, said: str) -> None:
    with pytest.raises(SpecError, match=said):
        parse_spec({"chart": CHART, "valuesFiles": entries}, "web", "shop")


def test_a_source_of_another_namespace_follows_the_tenancy_policy() -> None:
    body = {"metadata": {"name": "web", "namespace": "shop"},
            "spec": {"chart": CHART, "valuesFiles": [_entry(ref={"namespace": "shop"}),
                                                     _entry(ref={"namespace": "shared"})]}}
    assert len(read_spec(HELMOP.helmrelease, body, Tenancy()).values_files) == 2
    with pytest.raises(SpecError, match=r"spec.valuesFiles\[1\].sourceRef refers to namespace 'shared'") as refused:
        read_spec(HELMOP.helmrelease, body, Tenancy(no_cross_namespace_refs=True))
    assert refused.value.reason == "CrossNamespaceRef"


def test_an_app_kind_gives_its_resources_releases_its_values_files() -> None:
    text = """apps:
- group: demo.example.com
  version: v1
  kind: Webapp
  chart: {repository: {url: "https://charts.example", name: web}}
  valuesFiles: [{sourceRef: {kind: GitRepository, name: config}, path: webapp/values.yaml}]
"""
    kind = parse_apps(text)[0]
    spec = parse_spec(release_spec(kind, "shop", {"replicaCount": 2}), "shop-webapp", "team")
    assert spec.values_files == (ValuesFile("GitRepository", "config", "webapp/values.yaml"),)
    assert spec.values == {"replicaCount": 2}
    with pytest.raises(SpecError, match=r"spec.valuesFiles\[0\].path"):
        parse_apps(text.replace("webapp/values.yaml", "../values.yaml"))


def _reading(monkeypatch: pytest.MonkeyPatch, trees: dict[str, dict[str, bytes]]) -> list[tuple[str, str]]:
    """source_values reading these trees (by source name) as the sources' artifacts; the sources read, in order."""
    read: list[tuple[str, str]] = []

    async def artifact(_ctx: Any, _family: Any, kind: str, namespace: str, name: str, by: Any) -> TreeArtifact:
        assert by.namespace == "shop" and by.field.startswith("spec.valuesFiles[")
        read.append((namespace, name))
        return TreeArtifact(trees[name], f"rev-of-{name}")

    monkeypatch.setattr(inputs, "source_artifact", artifact)
    return read


async def test_files_merge_in_order_and_each_source_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    read = _reading(monkeypatch, {"config": {"web/base.yaml": b"a: {b: 1, c: 1}\nlist: [1, 2]\n",
                                             "web/prod.yaml": b"a: {c: 2}\nlist: [3]\ngone: null\n"},
                                  "other": {"extra.yaml": b"gone: here\n"}})
    files = (ValuesFile("Bucket", "other", "extra.yaml"), ValuesFile("GitRepository", "config", "web/base.yaml"),
             ValuesFile("GitRepository", "config", "web/missing.yaml", optional=True),
             ValuesFile("GitRepository", "config", "web/prod.yaml"))
    merged = await source_values(SimpleNamespace(), "shop", files)
    assert merged == {"a": {"b": 1, "c": 2}, "list": [3]}
    assert read == [("shop", "other"), ("shop", "config")]


@pytest.mark.parametrize(("tree", "reason", "said"), [
    ({}, "ValuesFileNotFound", "spec.valuesFiles[0]: 'web/v.yaml' of GitRepository shop/config does not exist at "
                               "revision rev-of-config (set optional to skip it)"),
    ({"web/v.yaml": b"x" * (MAX_VALUES_FILE_BYTES + 1)}, "ValuesTooLarge", "more than 1 MiB"),
    ({"web/v.yaml": b"\xff\xfe"}, "ValuesInvalid", "is not UTF-8 text"),
    ({"web/v.yaml": b"- a list\n"}, "ValuesInvalid", "'web/v.yaml' of GitRepository shop/config must be a YAML map"),
])
async def test_a_file_missing_too_large_or_not_values_is_refused(monkeypatch: pytest.MonkeyPatch,
                                                                 tree: dict[str, bytes], reason: str,
                                                                 said: str) -> None:
    _reading(monkeypatch, {"config": tree})
    with pytest.raises(InputError) as refused:
        await source_values(SimpleNamespace(), "shop", (ValuesFile("GitRepository", "config", "web/v.yaml"),))
    assert refused.value.reason == reason and not refused.value.transient
    assert said in str(refused.value)


def test_the_uis_values_diff_masks_every_value_of_a_release_that_decrypts() -> None:
    """Decrypted values are in helm's records; the UI never decrypts to learn where they went: all masked."""
    class NoApi:
        def __getattr__(self, name: str) -> object:
            raise AssertionError(f"the API was asked ({name})")

    spec = parse_spec({"chart": {"repository": {"url": "https://charts.example", "name": "demo"}},
                       "decryption": {"provider": "sops", "secretRef": {"name": "keys"}}}, "web", "shop")
    assert asyncio.run(_secret_paths(NoApi(), "shop", spec)) == (None, [])  # type: ignore[arg-type]
    masked = changes({"a": 1}, {"a": 2}, None, [])
    assert [(c.old, c.new) for c in masked] == [(MASK, MASK)]


def test_a_flux_helmrelease_names_its_sops_keys_in_an_annotation() -> None:
    body = {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": "web", "namespace": "shop", "annotations": {"helmop.dev/decryption-secret": "keys"}},
            "spec": {"interval": "1h", "chart": {"spec": {"chart": "web", "sourceRef": {
                "kind": "HelmRepository", "name": "charts"}}}}}
    spec = read_spec(FLUX.helmrelease, body)
    assert spec.decryption is not None and spec.decryption.secret_ref == "keys"
    assert read_spec(HELMOP.helmrelease, {**body, "apiVersion": "helmop.dev/v1alpha1",
                                          "spec": {"chart": {"repository": {"url": "https://c.example",
                                                                            "name": "web"}}}}).decryption is None
    body["metadata"]["annotations"]["helmop.dev/decryption-secret"] = "../etc"
    with pytest.raises(SpecError, match="must name a Secret"):
        read_spec(FLUX.helmrelease, body)
