"""Every source a reader reads is named by someone (helmop.sources.readers.Referrer), and the tenancy policy judges
that reference before the object is read: an ExternalArtifact's producer, an ArtifactGenerator's sources and
includes the same as a ConfigSync's sourceRef. Under --no-cross-namespace-refs an ExternalArtifact naming another
namespace's generator (its status written by its own team) is CrossNamespaceRef, even when this replica keeps a
copy of what it names; without it, the reference is followed. And names and paths that would bend a request path
or leave an artifact are refused as the spec is parsed."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from helmop.api.errors import SpecError
from helmop.api.generators import parse_artifact_generator
from helmop.api.kinds import HELMOP
from helmop.api.sources import parse_config_sync, parse_git_repository
from helmop.api.tenancy import Tenancy
from helmop.sources import readers
from helmop.sources.errors import SourceError
from helmop.sources.readers import Referrer
from helmop.sources.repositories import Repositories

GROUP = "helmop.dev/v1alpha1"
DIGEST = "sha256:" + "a" * 64


@dataclass
class _Kube:
    objects: dict[str, dict[str, Any]]
    read: list[str] = field(default_factory=list)

    async def get(self, path: str) -> dict[str, Any] | None:
        self.read.append(path)
        return self.objects.get(path)


@dataclass
class _Readers:
    kube: _Kube
    repos: Repositories
    tenancy: Tenancy
    git: Any = None


def _generator(sources: list[dict[str, str]]) -> dict[str, Any]:
    return {"spec": {"sources": sources,
                     "artifacts": [{"name": "bundle", "copy": [{"from": "@src/apps/", "to": "@artifact/"}]}]}}


def _external(producer: str, namespace: str) -> dict[str, Any]:
    return {"spec": {"sourceRef": {"apiVersion": GROUP, "kind": "ArtifactGenerator", "name": producer,
                                   "namespace": namespace}},
            "status": {"artifact": {"revision": f"latest@{DIGEST}", "digest": DIGEST}}}


def _readers(tmp_path: Path, lockdown: bool, objects: dict[str, dict[str, Any]]) -> _Readers:
    return _Readers(_Kube(objects), Repositories(tmp_path), Tenancy(no_cross_namespace_refs=lockdown))


async def test_an_external_artifact_names_no_generator_of_another_namespace_under_lockdown(tmp_path: Path) -> None:
    ea, gen = HELMOP.externalartifact, HELMOP.artifactgenerator
    objects = {ea.path("team-a", "bundle"): _external("gen", "team-b"),
               gen.path("team-b", "gen"): _generator([{"alias": "src", "kind": "GitRepository", "name": "private"}])}
    locked = _readers(tmp_path, True, objects)
    cached = readers.generated_path(locked.repos, "team-a", "bundle", DIGEST)
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"a copy this replica keeps")  # no exception for it
    with pytest.raises(SourceError) as refused:
        await readers.source_artifact(locked, HELMOP, "ExternalArtifact", "team-a", "bundle",
                                      Referrer("team-a", "spec.sourceRef"))
    assert (refused.value.reason, refused.value.transient) == ("CrossNamespaceRef", False)
    assert str(refused.value).startswith("ExternalArtifact team-a/bundle spec.sourceRef refers to namespace 'team-b'")
    assert not [path for path in locked.kube.read if "team-b" in path]  # refused before anything was read

    with pytest.raises(SourceError) as first:  # the reader's own reference, the same check
        await readers.source_artifact(locked, HELMOP, "ExternalArtifact", "team-b", "bundle",
                                      Referrer("team-a", "spec.sourceRef"))
    assert first.value.reason == "CrossNamespaceRef" and locked.kube.read == [ea.path("team-a", "bundle")]

    cached.unlink()
    opened = _readers(tmp_path, False, objects)  # no lockdown: followed (to team B's repository, here missing)
    with pytest.raises(SourceError) as followed:
        await readers.source_artifact(opened, HELMOP, "ExternalArtifact", "team-a", "bundle",
                                      Referrer("team-a", "spec.sourceRef"))
    assert followed.value.reason == "SourceNotFound" and "GitRepository team-b/private" in str(followed.value)


async def test_a_generators_sources_are_judged_on_every_reader_path(tmp_path: Path) -> None:
    ea, gen = HELMOP.externalartifact, HELMOP.artifactgenerator
    objects = {ea.path("team-a", "bundle"): _external("gen2", "team-a"),
               gen.path("team-a", "gen2"): _generator([{"alias": "src", "kind": "GitRepository", "name": "private",
                                                         "namespace": "team-b"}])}
    locked = _readers(tmp_path, True, objects)
    with pytest.raises(SourceError) as refused:
        await readers.source_artifact(locked, HELMOP, "ExternalArtifact", "team-a", "bundle",
                                      Referrer("team-a", "spec.sourceRef"))
    assert refused.value.reason == "CrossNamespaceRef"
    assert str(refused.value).startswith("ArtifactGenerator team-a/gen2 spec.sources[0] refers to namespace 'team-b'")
    assert not [path for path in locked.kube.read if "team-b" in path]


@pytest.mark.parametrize(("parse", "spec", "said"), [
    (parse_git_repository, {"url": "https://x", "include": [{"repository": {"name": ".."}}]},
     "spec.include[0].repository.name: '..' is not an object name"),
    (parse_git_repository, {"url": "https://x", "include": [{"repository": {"name": "a/b"}}]},
     "spec.include[0].repository.name: 'a/b' is not an object name"),
    (parse_git_repository, {"url": "https://x", "include": [{"repository": {"name": "a"}, "toPath": "../up"}]},
     "spec.include[0].toPath leaves the artifact"),
    (parse_git_repository, {"url": "https://x", "include": [{"repository": {"name": "a"}, "fromPath": "/etc"}]},
     "spec.include[0].fromPath must be a relative path"),
    (parse_config_sync, {"sourceRef": {"name": "a"}, "path": "apps/../../up"}, "spec.path leaves the artifact"),
    (parse_artifact_generator, {"sources": [{"alias": "s", "kind": "GitRepository", "name": "a", "namespace": ".."}],
                                "artifacts": [{"name": "b", "copy": [{"from": "@s/", "to": "@artifact/"}]}]},
     "spec.sources[0].namespace '..' is not a namespace name")])
def test_names_and_paths_that_would_leave_are_refused_as_parsed(parse: Any, spec: dict[str, Any], said: str) -> None:
    with pytest.raises(SpecError, match=said.replace("[", r"\[").replace("]", r"\]")) as refused:
        parse(spec)
    assert refused.value.reason in ("InvalidSpec", "ValidationFailed", "InvalidPath")


def test_paths_as_flux_writes_them_still_parse() -> None:
    assert parse_config_sync({"sourceRef": {"name": "a"}, "path": "./apps"}).path == "./apps"
    include = parse_git_repository({"url": "https://x", "include": [
        {"repository": {"name": "shared.v1"}, "fromPath": "./deploy", "toPath": "vendor/shared"}]}).include[0]
    assert (include.repository, include.from_path, include.to_path) == ("shared.v1", "deploy", "vendor/shared")


async def test_access_from_narrows_every_reference_from_another_namespace(tmp_path: Path) -> None:
    repo = HELMOP.helmrepository
    grants = {"namespaceSelectors": [{"matchLabels": {"team": "web"}}]}
    objects = {repo.path("shared", "charts"): {"spec": {"url": "https://charts", "accessFrom": grants}},
               "/api/v1/namespaces/web": {"metadata": {"labels": {"team": "web"}}},
               "/api/v1/namespaces/other": {"metadata": {"labels": {"team": "other"}}}}
    opened = _readers(tmp_path, False, objects)
    by_web, by_other = Referrer("web", "spec.chart.spec.sourceRef"), Referrer("other", "spec.chart.spec.sourceRef")
    assert await readers.referenced(opened, repo, "shared", "charts", by_web)
    with pytest.raises(SourceError, match="does not grant namespace other access") as denied:
        await readers.referenced(opened, repo, "shared", "charts", by_other)
    assert (denied.value.reason, denied.value.transient) == ("AccessDenied", False)
    assert await readers.referenced(opened, repo, "shared", "charts", Referrer("shared", "spec.chart"))  # its own
    with pytest.raises(SourceError) as locked:  # lockdown first, whatever accessFrom grants
        await readers.referenced(_readers(tmp_path, True, objects), repo, "shared", "charts", by_web)
    assert locked.value.reason == "CrossNamespaceRef"
