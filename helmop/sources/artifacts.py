"""OCIRepository artifacts: a reference (tag, semver range over the tags semverFilter keeps, or digest) resolved
to a manifest digest, and the layer spec.layerSelector selects (its media type, else the first layer), kept in
the cache by its digest: a chart archive for HelmReleases, or a tree of files (`flux push artifact`'s) for
ConfigSyncs, extracted with the ignore rules applied or copied as it is.

The manifest is read at each interval (Flux's revision, ``<tag>@sha256:<manifest digest>``, moves with it);
the layer is downloaded only when its digest is one the cache does not hold for these credentials.
"""

from __future__ import annotations

import asyncio
import functools
import gzip
import hashlib
import io
import json
import posixpath
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import re2
import yaml

from helmop.api import yamlc
from helmop.api.redaction import safe_url
from helmop.api.repositories import OCIRepositorySpec
from helmop.api.semver import highest
from helmop.infra.filememo import FileMemo

from . import tarballs
from .errors import SourceError, unreachable
from .ignore import FILE, Ignore
from .repositories import MANIFEST_TYPES, Credentials, Repositories, ResolvedChart, credential_key


@dataclass(frozen=True)
class Descriptor:
    """An OCI manifest as a signature names it."""

    media_type: str
    digest: str
    size: int

    def json(self) -> dict[str, Any]:
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size}


@dataclass(frozen=True)
class Artifact:
    revision: str  # <tag>@sha256:<manifest digest>, or sha256:<manifest digest> for a digest reference
    digest: str  # sha256:<hex> of the selected layer
    manifest: Descriptor
    layer_type: str = ""  # the selected layer's media type
    annotations: tuple[tuple[str, str], ...] = ()  # the manifest's (Flux's artifact metadata)


async def resolve(repos: Repositories, spec: OCIRepositorySpec, creds: Credentials) -> Artifact:
    """The artifact ``spec.ref`` names now: one tags list for a semver range (at most once per interval),
    one manifest read."""
    url = repos.mirrored(spec.url)
    if spec.digest:
        reference, tag = spec.digest, ""
    elif spec.semver:
        tags = await repos.tags(url, creds, spec.insecure, max_age=spec.interval)
        if spec.semver_filter:
            kept = re2.compile(spec.semver_filter)
            tags = [t for t in tags if kept.search(t.replace("+", "_"))]
        try:
            chosen = highest(tags, spec.semver)
        except ValueError as exc:
            raise SourceError("InvalidSpec", f"spec.ref.semver: {exc}", transient=False) from None
        if chosen is None:
            raise SourceError("VersionNotFound", f"no tag of {safe_url(spec.url)} matches {spec.semver!r}",
                              transient=False)
        reference = tag = chosen.replace("+", "_")
    else:
        reference = tag = spec.tag
    what = f"{safe_url(spec.url)}:{reference}"
    body, headers = await _manifest(repos, spec.url, reference, creds, spec.insecure, what)
    manifest = f"sha256:{hashlib.sha256(body).hexdigest()}"  # computed, not taken from the registry's header
    if spec.digest and manifest != spec.digest:
        raise SourceError("ArtifactDigestMismatch", f"{what}: the registry's manifest does not match the digest",
                          transient=False)
    document = _document(body, what)
    digest, layer_type = select_layer(document, spec.media_type, what)
    media_type = str(document.get("mediaType") or headers.get("Content-Type", "").split(";")[0])
    notes = document.get("annotations")
    notes = notes if isinstance(notes, dict) else {}
    return Artifact(f"{tag}@{manifest}" if tag else manifest, digest, Descriptor(media_type, manifest, len(body)),
                    layer_type, tuple(sorted((str(k), str(v)) for k, v in notes.items()))[:64])


async def _manifest(repos: Repositories, url: str, reference: str, creds: Credentials, insecure: bool,
                    what: str) -> tuple[bytes, dict[str, str]]:
    base, path = repos.oci_base(repos.mirrored(url), insecure)
    try:
        async with repos.session(creds, insecure, basic=False) as http:
            status, body, headers = await repos.oci_get(http, base, f"/v2/{path}/manifests/{reference}", creds,
                                                        MANIFEST_TYPES)
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise unreachable(f"registry of {safe_url(url)}", exc) from None
    if status == 404:
        raise SourceError("ArtifactNotFound", f"{what} not found in the registry", transient=False)
    repos.raise_for(status, f"manifest of {what}")
    return body, headers


def _document(body: bytes, what: str) -> dict[str, Any]:
    try:
        document = json.loads(body)
    except ValueError:
        document = None
    if not isinstance(document, dict):
        raise SourceError("ArtifactInvalid", f"{what}: the manifest is not an OCI image manifest", transient=False)
    return document


def select_layer(document: dict[str, Any], media_type: str, what: str) -> tuple[str, str]:
    """(digest, media type) of the layer spec.layerSelector.mediaType names ("": the first), as Flux selects."""
    layers = [x for x in document.get("layers") or [] if isinstance(x, dict)]
    chosen = next((x for x in layers if not media_type or x.get("mediaType") == media_type), None)
    digest = str((chosen or {}).get("digest") or "")
    if chosen is None or not digest.startswith("sha256:") or len(digest) != 71:
        raise SourceError("ArtifactNotFound", f"{what} has no layer" + (f" of media type {media_type} "
                                                                        "(spec.layerSelector.mediaType)"
                                                                        if media_type else ""), transient=False)
    return digest, str(chosen.get("mediaType") or "")


async def layer_of(repos: Repositories, spec: OCIRepositorySpec, revision: str, creds: Credentials) -> str:
    """The digest of the layer spec selects in the manifest ``revision`` names (what was published, whatever the
    tag names now)."""
    manifest = revision.rpartition("@")[2]
    what = f"{safe_url(spec.url)}@{manifest}"
    body, _ = await _manifest(repos, spec.url, manifest, creds, spec.insecure, what)
    if f"sha256:{hashlib.sha256(body).hexdigest()}" != manifest:
        raise SourceError("ArtifactDigestMismatch", f"{what}: the registry's manifest does not match the digest",
                          transient=False)
    document = _document(body, what)
    digest, _ = select_layer(document, spec.media_type, what)
    announced = next((x.get("size") for x in document.get("layers") or [] if isinstance(x, dict)
                      and x.get("digest") == digest), 0)
    if isinstance(announced, int) and announced > repos.chart_max_size:
        raise SourceError("ArtifactTooLarge", f"{what}: its layer is announced at {announced} bytes, more than the "
                                              f"{repos.chart_max_size >> 20} MiB an artifact may have", transient=False)
    return digest


async def config(repos: Repositories, spec: OCIRepositorySpec, layer: str, creds: Credentials) -> tarballs.Tree:
    """The files of a config layer (a gzipped tar: `flux push artifact`'s), from the cache or the registry by
    digest, bounded as a source's tree; extracted, the ignore rules leave files out (copy: as it is)."""
    what = f"layer {layer} of {safe_url(spec.url)}"
    path = repos.cache_dir / "layers" / credential_key(spec.url, creds)[:32] / f"{layer.removeprefix('sha256:')}.tgz"
    path = await repos.cached(path, lambda: _blob(repos, spec.url, layer, creds, spec.insecure), what,
                              check=tarballs.unpack)
    tree = await asyncio.to_thread(tarballs.unpack, path.read_bytes(), what)
    if spec.operation == "copy":
        return tree
    sourceignore = {posixpath.dirname(k): v.decode(errors="replace") for k, v in tree.files.items()
                    if posixpath.basename(k) == FILE}
    try:
        rules = Ignore.of(sourceignore, spec.ignore)
    except ValueError as exc:
        raise SourceError("SourceIgnoreError", f"{what}: {exc}", transient=False) from None
    return tarballs.Tree({k: v for k, v in tree.files.items() if not rules.excludes(k)},
                         frozenset(k for k in tree.executable if not rules.excludes(k)))


async def _blob(repos: Repositories, url: str, digest: str, creds: Credentials, insecure: bool) -> bytes:
    base, repository = repos.oci_base(repos.mirrored(url), insecure)
    try:
        async with repos.session(creds, insecure, basic=False) as http:
            status, data, _ = await repos.oci_get(http, base, f"/v2/{repository}/blobs/{digest}", creds,
                                                  limit=repos.chart_max_size, too_large="ArtifactTooLarge")
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise unreachable(f"registry of {safe_url(url)}", exc) from None
    repos.raise_for(status, f"layer {digest} of {safe_url(url)}")
    if hashlib.sha256(data).hexdigest() != digest.removeprefix("sha256:"):
        raise SourceError("ArtifactDigestMismatch", f"layer {digest} of {safe_url(url)} does not match its digest",
                          transient=False)
    return data


async def manifest_of(repos: Repositories, url: str, tag: str, creds: Credentials, insecure: bool) -> Descriptor:
    """The manifest a tag names now (what a chart's signature must name)."""
    what = f"{safe_url(url)}:{tag}"
    body, headers = await _manifest(repos, url, tag, creds, insecure, what)
    media_type = str(_document(body, what).get("mediaType") or headers.get("Content-Type", "").split(";")[0])
    return Descriptor(media_type, f"sha256:{hashlib.sha256(body).hexdigest()}", len(body))


async def chart(repos: Repositories, url: str, digest: str, creds: Credentials, insecure: bool) -> tuple[
        ResolvedChart, Path]:
    """The chart archive of layer ``digest`` in the cache (downloaded if this process has not checked it for
    these credentials), and the chart it holds (name and version from its Chart.yaml)."""
    folder = credential_key(url, creds)[:32]
    path = repos.cache_dir / "artifacts" / folder / f"{digest.removeprefix('sha256:')[:64]}.tgz"

    async def download() -> bytes:
        return await _blob(repos, url, digest, creds, insecure)

    path = await repos.cached(path, download, f"the chart layer of {safe_url(url)}")
    name, version = await asyncio.to_thread(_charts.read, path, functools.partial(_name_and_version,
                                                                                  what=safe_url(url)))
    return ResolvedChart(safe_url(url), name, version, digest=digest.removeprefix("sha256:")), path


_charts: FileMemo[tuple[str, str]] = FileMemo()  # name and version of each cached layer, read at every look


def _name_and_version(path: Path, what: str) -> tuple[str, str]:
    """Chart.yaml's name and version (the archive was checked when cached: one top folder, bounded sizes)."""
    with gzip.open(path) as inflated, tarfile.open(fileobj=io.BytesIO(inflated.read()), mode="r:") as archive:
        member = next((m for m in archive if m.name.count("/") == 1 and m.name.endswith("/Chart.yaml")), None)
        found = archive.extractfile(member) if member is not None else None
        try:
            meta = yamlc.load(found.read()) if found is not None else None
        except yaml.YAMLError:
            meta = None
    if not isinstance(meta, dict) or not meta.get("name") or not meta.get("version"):
        raise SourceError("ChartInvalid", f"the chart from {what} has no name and version in its Chart.yaml",
                          transient=False)
    return str(meta["name"]), str(meta["version"])


def read_file(path: Path, name: str) -> bytes | None:
    """A file of a chart archive by its path inside the chart (``values-prod.yaml``); None if absent."""
    with gzip.open(path) as inflated, tarfile.open(fileobj=io.BytesIO(inflated.read()), mode="r:") as archive:
        for member in archive:
            parts = member.name.split("/", 1)
            if member.isfile() and len(parts) == 2 and parts[1] == name.removeprefix("./"):
                found = archive.extractfile(member)
                return found.read() if found is not None else None
    return None

