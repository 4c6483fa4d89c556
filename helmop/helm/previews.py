"""One revision of a config repository rendered as the operator would apply it, for previews (``helmop preview`` and
the Preview kind): each folder built as a ConfigSync builds it (:class:`helmop.sources.build.Builder`), and each
HelmRelease among the built objects rendered with its chart and values as ``helmop render`` renders it, offline:
``helm template``, no cluster read. Secrets never leave here in the clear (:mod:`helmop.api.rendered`)."""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from helmop.api import yamlc
from helmop.api.actions import Action
from helmop.api.decryption import Decryption
from helmop.api.kinds import CONFIGSYNC, FLUX_KUSTOMIZE, family_of
from helmop.api.manifests import Manifest, parse
from helmop.api.redaction import redact
from helmop.api.rendered import Rendering, as_yaml, digest, label
from helmop.api.sources import ConfigSyncSpec, PostBuild
from helmop.api.substitution import SubstitutionError
from helmop.sources import kustomize
from helmop.sources.build import Builder, Built
from helmop.sources.decryption.keys import Keys
from helmop.sources.decryption.repository import Decryptor
from helmop.sources.errors import SourceError
from helmop.sources.repositories import Repositories
from helmop.sources.trees import TreeArtifact

from . import offline
from .engine import Engine
from .errors import HelmError
from .inputs import InputError, Opener
from .request import upgrade_request


class Unbuildable(Exception):
    """A revision that does not build or render: the file or object, and why; what the message may quote of the
    secrets read so far is masked."""

    def __init__(self, message: str, secrets: list[str] | None = None) -> None:
        super().__init__(redact(message, secrets or []))


@dataclass(frozen=True)
class Inputs:
    """What both revisions are rendered with."""

    values: dict[str, str]  # postBuild variables
    keys: Keys | None  # SOPS keys: what they decrypt is masked
    engine: Engine
    repos: Repositories  # shared: a chart version is fetched once for both revisions
    builder: Builder
    salt: bytes  # keys the Secret digests of this run


@dataclass(frozen=True)
class Builds:
    """What builds a folder: its group is named after it (``Kustomization apps``, ``ConfigSync apps``)."""

    kind: str
    api_version: str


@dataclass(frozen=True)
class Tree:
    """A revision's files, read within the limits of a fetched repository."""

    ref: str  # what messages call it
    root: Path  # a private folder holding the files (a chart path of the tree is read there)
    files: Mapping[str, bytes]


def _chart_digest(path: Path) -> str:
    """Of a chart archive's bytes, or a chart folder's files."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    found = hashlib.sha256()
    for file in files:
        found.update(file.relative_to(path).as_posix().encode() if file != path else b"")
        found.update(file.read_bytes())
    return found.hexdigest()


def folders(files: Mapping[str, bytes]) -> dict[str, Builds]:
    """The folders the tree's ConfigSyncs and Flux Kustomizations build (its charts' templates left out), each with
    what builds it (a ConfigSync before a Kustomization naming the same folder)."""
    charts = {posixpath.dirname(name) for name in files if posixpath.basename(name) == "Chart.yaml"}
    manifests = {name: data for name, data in files.items()
                 if not any(name.startswith(f"{chart}/") or not chart for chart in charts)}
    found, _ = parse(manifests)
    out: dict[str, Builds] = {}
    for item in sorted(found, key=lambda item: item.kind != "ConfigSync"):
        if (item.kind, item.api_version.partition("/")[0]) in (("ConfigSync", CONFIGSYNC.group),
                                                               ("Kustomization", FLUX_KUSTOMIZE)):
            path = str((item.obj.get("spec") or {}).get("path") or ".").strip("/").removeprefix("./") or "."
            out.setdefault(path, Builds(item.kind, item.api_version))
    return out


def paths_of(given: list[str], *trees: Tree) -> dict[str, Builds]:
    """The folders to build: ``given``, else those the trees' ConfigSyncs and Kustomizations name (none: {}); each
    named after what builds it in the first tree that names it (a folder no tree names: a ConfigSync)."""
    named: dict[str, Builds] = {}
    for tree in trees:
        named = {**folders(tree.files), **named}
    return {path: named.get(path, Builds(CONFIGSYNC.kind, CONFIGSYNC.api_version)) for path in given or sorted(named)}


async def both(base: Tree, head: Tree, paths: Mapping[str, Builds], given: Inputs) -> tuple[Rendering, Rendering]:
    """Both revisions rendered."""
    out = [await render(side, paths, given) for side in (base, head)]
    return out[0], out[1]


async def render(tree: Tree, paths: Mapping[str, Builds], given: Inputs) -> Rendering:
    """Every folder of ``paths`` (one missing in this revision builds nothing), and the HelmReleases among what
    they build; Unbuildable names the revision, the file and why. A release whose chart cannot be fetched or
    rendered is said in its group (:attr:`Rendering.unrendered`): the other groups are still shown."""
    outside = [p for p in paths if p.startswith("/") or posixpath.normpath(p).split("/")[0] == ".."]
    if outside:
        raise Unbuildable(f"{outside[0]}: a folder outside the repository")
    out = Rendering()
    try:
        for path, builds in paths.items():
            folder = kustomize.folder_of(path)
            if folder and not any(name.startswith(f"{folder}/") for name in tree.files):
                continue
            built = await _build(tree, folder, given)
            out.secrets += built.plaintexts
            group = f"{builds.kind} {path}"
            out.groups[group] = {label(item.obj): as_yaml(item.obj, out.secrets, given.salt)
                                 for item in built.objects}
            out.api_versions[group] = builds.api_version
            await _releases(tree, built.objects, given, out)
    except Unbuildable as exc:
        raise Unbuildable(f"{tree.ref}: {str(exc).replace(str(tree.root) + '/', '')}", out.secrets) from None
    return out


async def _build(tree: Tree, folder: str, given: Inputs) -> Built:
    """What a ConfigSync over ``folder`` applies: the operator's build stage over the revision's files."""
    spec = ConfigSyncSpec(source_name="", path=folder, post_build=PostBuild(substitute=tuple(given.values.items())),
                          decryption=Decryption() if given.keys is not None else None)
    try:
        return await given.builder.build(TreeArtifact(tree.files), spec, given.values, keys=given.keys)
    except (SourceError, SubstitutionError) as exc:
        raise Unbuildable(f"{folder or '.'}: {exc}") from None


async def _releases(tree: Tree, built: list[Manifest], given: Inputs, out: Rendering) -> None:
    root = tree.root
    planned, problems = offline.planned(built, [], "default")
    if problems:
        raise Unbuildable("; ".join(problems))
    values_of = offline.tree_values(built)
    for release in planned:
        group = f"HelmRelease {release.namespace}/{release.name}"
        out.api_versions[group] = release.api_version
        opener = Opener(Decryptor(given.keys) if given.keys is not None else None)
        try:
            chart, values = await offline.chart_and_values(release, root, values_of, _sources(built, release),
                                                           given.repos, "build", files=tree.files, opener=opener)
            request = upgrade_request(release.spec, release.namespace, release.name, chart=chart, values=values,
                                      digest="", action=Action.INSTALL)
            rendered = await given.engine.template(request)
        except (InputError, SourceError, HelmError, ValueError) as exc:
            out.unrendered[group] = redact(f"{release.origin}: {exc}".replace(str(root) + "/", ""), out.secrets)
            continue
        finally:
            out.secrets += opener.plaintexts()
        # named by namespace as helm installs them: a template rarely names the release's namespace itself
        docs = {f"{kind}/{namespace}/{name}": _load(text) for (_, kind, namespace, name), text
                in offline.manifest_objects(rendered, release.spec.target_namespace).items()}
        out.groups[group] = {name: as_yaml(obj, out.secrets, given.salt) for name, obj in docs.items() if obj}
        out.releases[group] = (_chart_digest(chart), digest(json.dumps(values, sort_keys=True).encode(), given.salt))
        out.stored[group] = (release.spec.release_name, release.spec.storage_namespace, release.spec.target_namespace)


def _sources(built: list[Manifest], release: offline.Planned) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The chart sources of the build that ``release`` may name: of its own family (a Flux HelmRelease's
    HelmRepository is Flux's, a helmop one's helmop's), as the operator resolves a sourceRef."""
    family = family_of(release.api_version.partition("/")[0])
    return {(item.kind, str((item.obj.get("metadata") or {}).get("namespace") or "default"), item.name): item.obj
            for item in built if item.kind in ("HelmRepository", "OCIRepository", "HelmChart")
            and family_of(item.api_version.partition("/")[0]) == family}


def _load(text: str) -> dict[str, Any] | None:
    try:
        obj = yamlc.load(text)
    except yaml.YAMLError:
        return None
    return obj if isinstance(obj, dict) else None
