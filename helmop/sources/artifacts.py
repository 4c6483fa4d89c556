"""OCIRepository artifacts: a reference (tag, semver range or digest) resolved to a manifest digest, and the
layer it selects (a chart archive) kept in the chart cache by its digest.

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
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from helmop.api import yamlc
from helmop.api.redaction import safe_url
from helmop.api.repositories import OCIRepositorySpec
from helmop.infra.filememo import FileMemo

from .errors import SourceError, unreachable
from .repositories import MANIFEST_TYPES, Credentials, Repositories, ResolvedChart, credential_key
from .semver import highest


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


async def resolve(repos: Repositories, spec: OCIRepositorySpec, creds: Credentials) -> Artifact:
    """The artifact ``spec.ref`` names now: one tags list for a semver range (at most once per interval),
    one manifest read."""
    url = repos.mirrored(spec.url)
    if spec.digest:
        reference, tag = spec.digest, ""
    elif spec.semver:
        try:
            chosen = highest(await repos.tags(url, creds, spec.insecure, max_age=spec.interval), spec.semver)
        except ValueError as exc:
            raise SourceError("InvalidSpec", f"spec.ref.semver: {exc}", transient=False) from None
        if chosen is None:
            raise SourceError("VersionNotFound", f"no tag of {safe_url(spec.url)} matches {spec.semver!r}",
                              transient=False)
        reference = tag = chosen.replace("+", "_")
    else:
        reference = tag = spec.tag
    base, path = repos.oci_base(url, spec.insecure)
    what = f"{safe_url(spec.url)}:{reference}"
    try:
        async with repos.session(creds, spec.insecure, basic=False) as http:
            status, body, headers = await repos.oci_get(http, base, f"/v2/{path}/manifests/{reference}", creds,
                                                        MANIFEST_TYPES)
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise unreachable(f"registry of {safe_url(spec.url)}", exc) from None
    if status == 404:
        raise SourceError("ArtifactNotFound", f"{what} not found in the registry", transient=False)
    repos.raise_for(status, f"manifest of {what}")
    manifest = f"sha256:{hashlib.sha256(body).hexdigest()}"  # computed, not taken from the registry's header
    if spec.digest and manifest != spec.digest:
        raise SourceError("ArtifactDigestMismatch", f"{what}: the registry's manifest does not match the digest",
                          transient=False)
    try:
        document = json.loads(body)
        layers = [x for x in document.get("layers") or [] if x.get("mediaType") == spec.media_type]
        digest = str(layers[0]["digest"]) if layers else ""
        media_type = str(document.get("mediaType") or headers.get("Content-Type", "").split(";")[0])
    except (ValueError, AttributeError, KeyError, TypeError):
        raise SourceError("ArtifactInvalid", f"{what}: the manifest is not an OCI image manifest",
                          transient=False) from None
    if not digest.startswith("sha256:") or len(digest) != 71:
        raise SourceError("ArtifactNotFound", f"{what} has no layer of media type {spec.media_type} "
                                              "(spec.layerSelector.mediaType)", transient=False)
    return Artifact(f"{tag}@{manifest}" if tag else manifest, digest, Descriptor(media_type, manifest, len(body)))


async def manifest_of(repos: Repositories, url: str, tag: str, creds: Credentials, insecure: bool) -> Descriptor:
    """The manifest a tag names now (what a chart's signature must name)."""
    base, path = repos.oci_base(repos.mirrored(url), insecure)
    try:
        async with repos.session(creds, insecure, basic=False) as http:
            status, body, headers = await repos.oci_get(http, base, f"/v2/{path}/manifests/{tag}", creds,
                                                        MANIFEST_TYPES)
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise unreachable(f"registry of {safe_url(url)}", exc) from None
    repos.raise_for(status, f"manifest of {safe_url(url)}:{tag}")
    try:
        media_type = str(json.loads(body).get("mediaType") or headers.get("Content-Type", "").split(";")[0])
    except (ValueError, AttributeError):
        raise SourceError("ArtifactInvalid", f"{safe_url(url)}:{tag}: the manifest is not an OCI image manifest",
                          transient=False) from None
    return Descriptor(media_type, f"sha256:{hashlib.sha256(body).hexdigest()}", len(body))


async def chart(repos: Repositories, url: str, digest: str, creds: Credentials, insecure: bool) -> tuple[
        ResolvedChart, Path]:
    """The chart archive of layer ``digest`` in the cache (downloaded if this process has not checked it for
    these credentials), and the chart it holds (name and version from its Chart.yaml)."""
    mirrored = repos.mirrored(url)
    folder = credential_key(url, creds)[:32]
    path = repos.cache_dir / "artifacts" / folder / f"{digest.removeprefix('sha256:')[:64]}.tgz"

    async def download() -> bytes:
        base, repository = repos.oci_base(mirrored, insecure)
        try:
            async with repos.session(creds, insecure, basic=False) as http:
                status, data, _ = await repos.oci_get(http, base, f"/v2/{repository}/blobs/{digest}", creds,
                                                      limit=repos.chart_max_size, too_large="ChartTooLarge")
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise unreachable(f"registry of {safe_url(url)}", exc) from None
        repos.raise_for(status, f"layer {digest} of {safe_url(url)}")
        if hashlib.sha256(data).hexdigest() != digest.removeprefix("sha256:"):
            raise SourceError("ArtifactDigestMismatch", f"layer {digest} of {safe_url(url)} does not match its "
                                                        "digest", transient=False)
        return data

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

