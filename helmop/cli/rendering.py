"""One revision of a config repository rendered as the operator would apply it, for ``helmop preview``: each
folder built as a ConfigSync builds it, and each HelmRelease among the built objects rendered with its chart
and values as ``helmop render`` renders it. Secrets never leave here in the clear: a Secret's values become a
keyed digest (the same value gives the same marker within one run, so a change shows, a value does not)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from helmop.api import k8syaml, yamlc
from helmop.api.actions import Action
from helmop.api.kinds import CONFIGSYNC, FLUX_KUSTOMIZE
from helmop.api.manifests import Manifest, parse
from helmop.helm import values as helm_values
from helmop.helm.engine import Engine
from helmop.helm.errors import HelmError
from helmop.helm.inputs import InputError
from helmop.helm.request import upgrade_request
from helmop.sources.decryption.keys import Keys
from helmop.sources.errors import SourceError
from helmop.sources.repositories import Repositories

from . import builds, releases, revisions
from .errors import Failed


class Unbuildable(Failed):
    """A revision that does not build or render: the file or object, and why."""


@dataclass(frozen=True)
class Inputs:
    """What both revisions are rendered with."""

    values: dict[str, str]  # postBuild variables
    keys: Keys | None
    engine: Engine
    repos: Repositories  # shared: a chart version is fetched once for both revisions
    cache: Path
    salt: bytes  # keys the Secret digests of this run


@dataclass
class Rendering:
    groups: dict[str, dict[str, str]] = field(default_factory=dict)  # group -> kind/namespace/name -> YAML
    releases: dict[str, tuple[str, str]] = field(default_factory=dict)  # group -> (chart digest, values digest)
    secrets: list[str] = field(default_factory=list)  # every secret string seen: masked in any output


def label(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return "/".join(str(p) for p in (obj.get("kind", ""), meta.get("namespace"), meta.get("name", "")) if p)


def _masked(obj: dict[str, Any], found: list[str], salt: bytes) -> dict[str, Any]:
    """A Secret with its values as digests (``found`` gets the values, decoded too)."""
    if obj.get("kind") != "Secret" or obj.get("apiVersion") != "v1":
        return obj
    out = dict(obj)
    for key in ("data", "stringData"):
        if isinstance(obj.get(key), dict):
            found += [str(v) for v in obj[key].values()]
            if key == "data":
                found += [_decoded(str(v)) for v in obj[key].values()]
            out[key] = {k: f"<secret {_digest(str(v).encode(), salt)}>" for k, v in obj[key].items()}
    return out


def _digest(data: bytes, salt: bytes) -> str:
    return "hmac-sha256:" + hmac.new(salt, data, hashlib.sha256).hexdigest()[:16]


def _chart_digest(path: Path) -> str:
    """Of a chart archive's bytes, or a chart folder's files."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    digest = hashlib.sha256()
    for file in files:
        digest.update(file.relative_to(path).as_posix().encode() if file != path else b"")
        digest.update(file.read_bytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class Revision:
    ref: str
    root: Path  # a private folder holding its files


def checkout(repo: Path, ref: str, into: Path) -> Revision:
    """``ref``'s files under ``into``, read from git at once: a bad revision stops before anything renders."""
    into.mkdir()
    (into / ".git").mkdir()  # marks the folder as the repository a build may read (builds.repository_root)
    revisions.read_revision(repo, ref, into)
    return Revision(ref, into)


async def both(base: Revision, head: Revision, paths: list[str], given: Inputs) -> tuple[Rendering, Rendering]:
    paths = paths or sorted(set(folders(base.root)) | set(folders(head.root)))
    if not paths:
        raise Failed("no ConfigSync or Kustomization in either revision: name the folders with --path")
    outside = [p for p in paths if p.startswith("/") or posixpath.normpath(p).split("/")[0] == ".."]
    if outside:
        raise Unbuildable(f"{outside[0]}: a folder outside the repository")
    out = []
    for side in (base, head):
        try:
            out.append(await render(side.root, paths, given))
        except Unbuildable as exc:
            raise Unbuildable(f"{side.ref}: {str(exc).replace(str(side.root) + '/', '')}") from None
    return out[0], out[1]


def _decoded(text: str) -> str:
    try:
        return base64.b64decode(text).decode(errors="replace")
    except (binascii.Error, ValueError):
        return text


def folders(root: Path) -> list[str]:
    """The folders the tree's ConfigSyncs and Flux Kustomizations build (its charts' templates left out)."""
    found, _ = parse(releases.read_tree([root]))
    paths = {str((item.obj.get("spec") or {}).get("path") or ".") for item in found
             if (item.kind, item.api_version.partition("/")[0]) in (("ConfigSync", CONFIGSYNC.group),
                                                                    ("Kustomization", FLUX_KUSTOMIZE))}
    return sorted({p.strip("/").removeprefix("./") or "." for p in paths})


async def render(root: Path, paths: list[str], given: Inputs) -> Rendering:
    """Every folder of ``paths`` under ``root`` (one missing in this revision builds nothing), and the
    HelmReleases among what they build."""
    out = Rendering()
    for path in paths:
        if not (root / path).is_dir():
            continue
        try:
            built = await builds.build(root / path, given.values, given.cache, keys=given.keys)
        except Failed as exc:
            raise Unbuildable(f"{path}: {exc}") from None
        out.secrets += built.plaintexts
        out.groups[f"ConfigSync {path}"] = _objects([item.obj for item in built.objects], out.secrets, given.salt)
        await _releases(root, built.objects, given, out)
    return out


def _objects(objs: list[dict[str, Any]], secrets: list[str], salt: bytes) -> dict[str, str]:
    return {label(obj): k8syaml.dump_all([_masked(obj, secrets, salt)]) for obj in objs}


async def _releases(root: Path, built: list[Manifest], given: Inputs, out: Rendering) -> None:
    planned, problems = releases.planned(built, [], "default")
    if problems:
        raise Unbuildable("; ".join(problems))
    values_of = releases.tree_values(built)
    sources = {(item.kind, str((item.obj.get("metadata") or {}).get("namespace") or "default"), item.name): item.obj
               for item in built if item.kind in ("HelmRepository", "OCIRepository", "HelmChart")}
    for release in planned:
        group = f"HelmRelease {release.namespace}/{release.name}"
        try:
            chart, values = await _inputs(root, release, values_of, sources, given.repos)
            request = upgrade_request(release.spec, release.namespace, release.name, chart=chart, values=values,
                                      digest="", action=Action.INSTALL)
            rendered = await given.engine.template(request)
        except (InputError, SourceError, HelmError, ValueError) as exc:
            raise Unbuildable(f"{release.origin}: {group}: {exc}") from None
        # named by namespace as helm installs them: a template rarely names the release's namespace itself
        docs = {f"{kind}/{namespace}/{name}": _load(text) for (_, kind, namespace, name), text
                in releases.manifest_objects(rendered, release.spec.target_namespace).items()}
        out.groups[group] = {name: k8syaml.dump_all([_masked(obj, out.secrets, given.salt)])
                             for name, obj in docs.items() if obj}
        out.releases[group] = (_chart_digest(chart), _digest(json.dumps(values, sort_keys=True).encode(), given.salt))


async def _inputs(root: Path, release: releases.Planned, values_of: dict[tuple[str, str, str], dict[str, str]],
                  sources: dict[tuple[str, str, str], dict[str, Any]],
                  repos: Repositories) -> tuple[Path, dict[str, Any]]:
    """The chart and the values the operator would install ``release`` with (as ``helmop render``)."""
    pieces = []
    for ref in release.spec.values_from:
        data = values_of.get((ref.kind, release.namespace, ref.name))
        if data is None or ref.values_key not in data:
            if ref.optional:
                continue
            raise InputError("ValuesFromNotFound", f"{ref.kind} {release.namespace}/{ref.name} (key "
                                                   f"{ref.values_key}) is not in the build")
        pieces.append((ref, data[ref.values_key]))
    chart, base = await releases.offline_chart(release.spec, root, repos, sources, release.namespace)
    return chart, helm_values.compose(pieces, release.spec.values, base)


def _load(text: str) -> dict[str, Any] | None:
    try:
        obj = yamlc.load(text)
    except yaml.YAMLError:
        return None
    return obj if isinstance(obj, dict) else None
