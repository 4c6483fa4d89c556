"""An OCI artifact's signatures, read from its registry (through the chart mirror when one is set: what a
signature proves does not depend on where it was read) and checked by :mod:`.cosign` or :mod:`.notation`:
cosign's ``sha256-<digest>.sig`` tag, notation's referrers (the referrers API, or its tag fallback). Every
answer is bounded (manifests as the registry client bounds them, at most 16 cosign layers of 64 KiB, 3
notation envelopes of 256 KiB) and each blob checked against its digest. A result is remembered for the
manifest, the verification asked and the exact Secret content it was checked with."""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import aiohttp

from helmop.api.redaction import safe_url
from helmop.api.repositories import Verification

from ..artifacts import Descriptor
from ..errors import SourceError, unreachable
from ..repositories import MANIFEST_TYPES, Credentials, Repositories
from . import cosign, notation, sigstore
from .ssh import SignatureError

_REMEMBERED: OrderedDict[tuple[str, str, Verification, str], str | None] = OrderedDict()
_REMEMBER = 256
INDEX = "application/vnd.oci.image.index.v1+json"


async def verify(repos: Repositories, url: str, creds: Credentials, insecure: bool, manifest: Descriptor,
                 verification: Verification, entries: Mapping[str, bytes], source: str) -> str | None:
    """The SourceVerified message for ``manifest`` of the OCI repository ``url`` (None: the trust policy
    ignores it); SourceError (VerificationError) when it is not signed as ``verification`` and the entries of
    its Secret (``source``) require."""
    held = hashlib.sha256(json.dumps(sorted((k, v.hex()) for k, v in entries.items())).encode()).hexdigest()
    key = (url, manifest.digest, verification, held)
    if key in _REMEMBERED:
        _REMEMBERED.move_to_end(key)
        return _REMEMBERED[key]
    reference = safe_url(url).removeprefix("oci://")
    base, path = repos.oci_base(repos.mirrored(url), insecure)
    try:
        async with repos.session(creds, insecure, basic=False) as http:
            reader = _Reader(repos, http, base, path, creds)
            if verification.provider == "cosign" and not verification.secret_ref:
                root = _trusted_root(entries, source)
                signer = cosign.verify_keyless(manifest.digest, reference, await reader.cosign(manifest.digest),
                                               root, verification.identities)
                message: str | None = f"verified signature of {reference}@{manifest.digest} by {signer}"
            elif verification.provider == "cosign":
                keys = cosign.public_keys(entries, source)
                signer = cosign.verify(manifest.digest, reference, await reader.cosign(manifest.digest), keys)
                message = f"verified signature of {reference}@{manifest.digest} with key {signer}"
            else:
                policy, store = notation.trust(entries, source, reference)
                envelopes = await reader.notation(manifest.digest) if policy.level != "skip" else []
                message = notation.verify(envelopes, manifest.json(), f"{reference}@{manifest.digest}", policy,
                                          store)
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise unreachable(f"registry of {safe_url(url)}", exc) from None
    _REMEMBERED[key] = message
    while len(_REMEMBERED) > _REMEMBER:
        _REMEMBERED.popitem(last=False)
    return message


def _trusted_root(entries: Mapping[str, bytes], source: str) -> sigstore.TrustedRoot:
    data = entries.get("trusted_root.json")
    if data is None:
        raise SourceError("VerificationError", f"'trusted_root.json' not found in {source}", transient=False)
    try:
        return sigstore.TrustedRoot.parse(data)
    except SignatureError as exc:
        raise SourceError("VerificationError", f"{source}: {exc}", transient=False) from None


class _Reader:
    def __init__(self, repos: Repositories, http: aiohttp.ClientSession, base: str, path: str,
                 creds: Credentials) -> None:
        self.repos, self.http, self.base, self.path, self.creds = repos, http, base, path, creds

    async def _get(self, what: str, accept: str = "", limit: int = 1 << 20) -> tuple[int, bytes]:
        status, body, _ = await self.repos.oci_get(self.http, self.base, f"/v2/{self.path}/{what}", self.creds,
                                                   accept, limit=limit)
        return status, body

    async def blob(self, digest: str, limit: int) -> bytes:
        status, data = await self._get(f"blobs/{digest}", limit=limit)
        self.repos.raise_for(status, f"signature blob {digest}")
        if f"sha256:{hashlib.sha256(data).hexdigest()}" != digest:
            raise SourceError("VerificationError", f"signature blob {digest} does not match its digest",
                              transient=False)
        return data

    async def cosign(self, digest: str) -> list[cosign.Signature]:
        status, body = await self._get(f"manifests/{cosign.signature_tag(digest)}", MANIFEST_TYPES)
        if status == 404:
            return []
        self.repos.raise_for(status, "cosign's signature manifest")
        return [cosign.Signature(await self.blob(layer, cosign.MAX_PAYLOAD), annotations)
                for layer, annotations in cosign.layers(body)]

    async def notation(self, digest: str) -> list[tuple[str, bytes]]:
        status, body = await self._get(f"referrers/{digest}?artifactType={notation.SIGNATURE_TYPE}", INDEX)
        if status == 404:  # no referrers API: the referrers tag schema
            status, body = await self._get(f"manifests/{digest.replace(':', '-')}", INDEX)
        if status == 404:
            return []
        self.repos.raise_for(status, "the signatures' index")
        envelopes = []
        for descriptor in _signatures(body)[:notation.MAX_SIGNATURES]:
            status, manifest = await self._get(f"manifests/{descriptor}", MANIFEST_TYPES)
            self.repos.raise_for(status, f"signature manifest {descriptor}")
            media_type, layer = _layer(manifest)
            envelopes.append((media_type, await self.blob(layer, notation.MAX_ENVELOPE)))
        return envelopes


def _signatures(index: bytes) -> list[str]:
    """The digests of an index's notation signatures."""
    try:
        manifests: list[Any] = json.loads(index).get("manifests") or []
        return [str(m["digest"]) for m in manifests if isinstance(m, dict)
                and notation.SIGNATURE_TYPE in (m.get("artifactType"), (m.get("config") or {}).get("mediaType"))]
    except (ValueError, AttributeError, KeyError):
        raise SourceError("VerificationError", "the signatures' index is not an OCI index", transient=False) \
            from None


def _layer(manifest: bytes) -> tuple[str, str]:
    """(media type, digest) of a signature manifest's one layer."""
    try:
        layers = json.loads(manifest).get("layers") or []
        if len(layers) != 1:
            raise ValueError
        return str(layers[0]["mediaType"]), str(layers[0]["digest"])
    except (ValueError, AttributeError, KeyError, TypeError):
        raise SourceError("VerificationError", "a signature manifest does not have exactly one layer",
                          transient=False) from None
