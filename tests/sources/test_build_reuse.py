"""What a build keeps for the next one: manifests parsed once per content, each build's objects its own; and
small CPU work done on the event loop, large work in a thread (helmop.infra.offload)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from helmop.api import manifests
from helmop.api.k8syaml import _dumped
from helmop.api.sources import ConfigSyncSpec, Decryption, PostBuild
from helmop.infra.offload import SMALL, by_size
from helmop.sources import build as build_module
from helmop.sources.build import Builder
from helmop.sources.decryption.keys import Keys
from helmop.sources.kustomize import Kustomize
from helmop.sources.trees import TreeArtifact

APP = b"""apiVersion: v1
kind: ConfigMap
metadata: {name: "app-${INDEX}"}
data: {replicas: "r-${INDEX}", note: plain}
"""


def _spec(index: str) -> ConfigSyncSpec:
    return ConfigSyncSpec(source_name="", path="app", post_build=PostBuild(substitute=(("INDEX", index),)))


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The files each call of manifests.parse was given."""
    calls: list[list[str]] = []
    real = manifests.parse

    def counted(files: dict[str, bytes], loaded: object = None) -> object:
        calls.append(sorted(files))
        return real(files, loaded)  # type: ignore[arg-type]

    monkeypatch.setattr(manifests, "parse", counted)
    return calls


async def test_the_same_files_are_parsed_once_and_every_build_gets_objects_of_its_own(
        tmp_path: Path, parses: list[list[str]]) -> None:
    builder = Builder(Kustomize("kubectl", tmp_path))
    tree = {"app/app.yaml": APP + f"# {tmp_path}\n".encode()}  # content of this test's own: nothing kept before it
    first = await builder.build(TreeArtifact(tree), _spec("1"), {"INDEX": "1"})
    first.objects[0].obj["data"]["note"] = "changed by its reader"
    second = await builder.build(TreeArtifact(tree), _spec("2"), {"INDEX": "2"})
    assert [m.obj for m in first.objects] == [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app-1"},
                                               "data": {"replicas": "r-1", "note": "changed by its reader"}}]
    assert [m.obj for m in second.objects] == [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app-2"},
                                                "data": {"replicas": "r-2", "note": "plain"}}]
    assert [m.origin for m in second.objects] == ["app/app.yaml:1"]
    assert parses == [["app/app.yaml"]]
    changed = {"app/app.yaml": tree["app/app.yaml"] + b"---\napiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n"}
    third = await builder.build(TreeArtifact(changed), _spec("3"), {"INDEX": "3"})
    assert [m.obj["kind"] for m in third.objects] == ["ConfigMap", "Namespace"]
    assert parses == [["app/app.yaml"], ["app/app.yaml"]]


async def test_broken_files_are_not_kept(tmp_path: Path, parses: list[list[str]]) -> None:
    builder = Builder(Kustomize("kubectl", tmp_path))
    tree = {"app/app.yaml": b"a: [\n# " + str(tmp_path).encode() + b"\n"}
    for _ in range(2):
        with pytest.raises(build_module.SourceError, match="broken manifest"):
            await builder.build(TreeArtifact(tree), _spec("1"), {"INDEX": "1"})
    assert len(parses) == 2


async def test_small_work_runs_on_the_loop_and_large_work_in_a_thread() -> None:
    def where() -> int:
        return threading.get_ident()

    assert await by_size(SMALL, SMALL, where) == threading.get_ident()
    assert await by_size(SMALL + 1, SMALL, where) != threading.get_ident()


async def test_nothing_decrypted_is_kept(tmp_path: Path, parses: list[list[str]]) -> None:
    builder = Builder(Kustomize("kubectl", tmp_path))
    spec = ConfigSyncSpec(source_name="", path="app", post_build=PostBuild(substitute=(("INDEX", "1"),)),
                          decryption=Decryption())
    tree = {"app/app.yaml": APP + f"# {tmp_path} decrypted\n".encode()}  # nothing encrypted: read as it is
    asked = _dumped.cache_info()
    for _ in range(2):
        built = await builder.build(TreeArtifact(tree), spec, {"INDEX": "1"}, keys=Keys())
        assert built.objects[0].obj["metadata"]["name"] == "app-1"
    assert len(parses) == 2
    after = _dumped.cache_info()
    assert (after.hits, after.misses) == (asked.hits, asked.misses)  # the kept YAML texts were not even asked
