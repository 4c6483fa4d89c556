"""A folder as an OCI artifact, as Flux's CLI pushes, pulls and tags one (`flux push artifact`), so that Flux's
tools and helmop's read each other's artifacts: one layer of type ``application/vnd.cncf.flux.content.v1.tar+gzip``
(the folder as a reproducible gzipped tar), a config of type ``application/vnd.cncf.flux.config.v1+json``, and
the manifest's annotations ``org.opencontainers.image.source``, ``.revision`` and ``.created``.

Blobs are uploaded monolithically (POST, then PUT with the digest), skipped when the registry has them; every
answer is bounded, a pulled layer checked against its digest and read as a source's tree is."""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlencode, urljoin

import aiohttp

from helmop.api.redaction import safe_url
from helmop.api.repositories import FLUX_CONFIG_MEDIA_TYPE, FLUX_CONTENT_MEDIA_TYPE

from . import tarballs
from .errors import SourceError, unreachable
from .repositories import MANIFEST_TYPES, Credentials, Repositories

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
SOURCE, REVISION, CREATED = ("org.opencontainers.image.source", "org.opencontainers.image.revision",
                             "org.opencontainers.image.created")
REPRODUCIBLE = "1970-01-01T00:00:00Z"


@dataclass(frozen=True)
class Reference:
    """``oci://host/repository:tag`` or ``oci://host/repository@sha256:<hex>``."""

    url: str  # oci://host/repository
    reference: str  # the tag or digest

    @classmethod
    def parse(cls, text: str) -> Reference:
        if not text.startswith("oci://"):
            raise SourceError("InvalidURL", f"{text[:200]!r} is not an oci:// reference", transient=False)
        if "@" in text:
            url, _, digest = text.partition("@")
            return cls(url, digest)
        slash = text.rfind("/")
        colon = text.rfind(":")
        if colon > slash > len("oci://"):
            return cls(text[:colon], text[colon + 1:])
        return cls(text, "latest")

    def __str__(self) -> str:
        separator = "@" if self.reference.startswith("sha256:") else ":"
        return f"{safe_url(self.url)}{separator}{self.reference}"


@dataclass(frozen=True)
class Pulled:
    digest: str  # the manifest's
    annotations: dict[str, str]
    tree: tarballs.Tree


def _digest(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


def build(tree: tarballs.Tree, source: str, revision: str, annotations: dict[str, str], *,
          reproducible: bool = False) -> tuple[bytes, bytes, bytes]:
    """(manifest, config, layer) of an artifact holding ``tree``."""
    layer = tarballs.pack(tree.files, tree.executable)
    created = REPRODUCIBLE if reproducible else datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    config = json.dumps({"created": created, "architecture": "", "os": "", "config": {},
                         "rootfs": {"type": "layers", "diff_ids": [_digest(gzip.decompress(layer))]}},
                        separators=(",", ":")).encode()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": FLUX_CONFIG_MEDIA_TYPE, "digest": _digest(config), "size": len(config)},
        "layers": [{"mediaType": FLUX_CONTENT_MEDIA_TYPE, "digest": _digest(layer), "size": len(layer)}],
        "annotations": {CREATED: created, SOURCE: source, REVISION: revision, **annotations}},
        separators=(",", ":")).encode()
    return manifest, config, layer


async def push(repos: Repositories, target: Reference, manifest: bytes, blobs: list[bytes], creds: Credentials,
               insecure: bool) -> str:
    """Upload ``blobs`` and ``manifest`` under ``target``'s tag; the manifest's digest."""
    base, path = repos.oci_base(target.url, insecure)
    try:
        async with repos.session(creds, insecure, basic=False) as http:
            for blob in blobs:
                await _upload(repos, http, base, path, blob, creds, str(target))
            status, _, _ = await repos.oci_request(http, "PUT", base, f"/v2/{path}/manifests/{target.reference}",
                                                   creds, {"Content-Type": OCI_MANIFEST}, manifest)
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise unreachable(f"registry of {target}", exc) from None
    repos.raise_for(status, f"the manifest of {target}")
    return _digest(manifest)


async def _upload(repos: Repositories, http: aiohttp.ClientSession, base: str, path: str, blob: bytes,
                  creds: Credentials, what: str) -> None:
    digest = _digest(blob)
    status, _, _ = await repos.oci_request(http, "HEAD", base, f"/v2/{path}/blobs/{digest}", creds)
    if status == 200:
        return
    status, _, headers = await repos.oci_request(http, "POST", base, f"/v2/{path}/blobs/uploads/", creds)
    location = headers.get("Location", "")
    if status != 202 or not location:
        repos.raise_for(status if status != 202 else 502, f"an upload to {what}")
    upload = urljoin(base + "/", location)
    if not upload.startswith(base + "/"):  # where the token goes: the registry itself, never elsewhere
        raise SourceError("RegistryError", f"the registry of {what} sent an upload to another host", transient=False)
    upload += ("&" if "?" in upload else "?") + urlencode({"digest": digest})
    status, _, _ = await repos.oci_request(http, "PUT", base, upload, creds,
                                           {"Content-Type": "application/octet-stream"}, blob)
    if status not in (201, 204):
        repos.raise_for(status if status >= 400 else 502, f"blob {digest} of {what}")


async def pull(repos: Repositories, source: Reference, creds: Credentials, insecure: bool) -> Pulled:
    """The artifact ``source`` names: its first layer's files (a gzipped tar), bounded as a source's tree."""
    base, path = repos.oci_base(source.url, insecure)
    try:
        async with repos.session(creds, insecure, basic=False) as http:
            status, body, _ = await repos.oci_get(http, base, f"/v2/{path}/manifests/{source.reference}", creds,
                                                  MANIFEST_TYPES)
            repos.raise_for(status, f"the manifest of {source}")
            document = json.loads(body)
            layer = str(document["layers"][0]["digest"])
            status, data, _ = await repos.oci_get(http, base, f"/v2/{path}/blobs/{layer}", creds,
                                                  limit=repos.chart_max_size, too_large="ArtifactTooLarge")
            repos.raise_for(status, f"layer {layer} of {source}")
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise unreachable(f"registry of {source}", exc) from None
    except (ValueError, KeyError, IndexError, TypeError):
        raise SourceError("ArtifactInvalid", f"{source} is not an artifact with a layer", transient=False) from None
    if _digest(data) != layer:
        raise SourceError("ArtifactDigestMismatch", f"layer {layer} of {source} does not match its digest",
                          transient=False)
    notes = document.get("annotations") if isinstance(document.get("annotations"), dict) else {}
    return Pulled(_digest(body), {str(k): str(v) for k, v in notes.items()}, tarballs.unpack(data, str(source)))


async def tag(repos: Repositories, source: Reference, tags: list[str], creds: Credentials, insecure: bool) -> str:
    """The manifest ``source`` names, tagged ``tags`` too (no blob moves); its digest."""
    base, path = repos.oci_base(source.url, insecure)
    try:
        async with repos.session(creds, insecure, basic=False) as http:
            status, body, headers = await repos.oci_get(http, base, f"/v2/{path}/manifests/{source.reference}",
                                                        creds, MANIFEST_TYPES)
            repos.raise_for(status, f"the manifest of {source}")
            kind = headers.get("Content-Type", OCI_MANIFEST).split(";")[0]
            for name in tags:
                status, _, _ = await repos.oci_request(http, "PUT", base, f"/v2/{path}/manifests/{name}", creds,
                                                       {"Content-Type": kind}, body)
                repos.raise_for(status, f"tag {name} of {safe_url(source.url)}")
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise unreachable(f"registry of {source}", exc) from None
    return _digest(body)
