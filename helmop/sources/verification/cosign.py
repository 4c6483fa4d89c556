"""cosign's key-based signatures of an OCI artifact, as cosign stores them and Flux's source-controller checks
them: the tag ``sha256-<digest>.sig`` beside the artifact holds one layer per signature, each a simple-signing
payload (``application/vnd.dev.cosign.simplesigning.v1+json``) whose signature is in the layer's annotation
``dev.cosignproject.cosign/signature``. A signature counts when one of the Secret's public keys (entries
``*.pub``: PEM, ECDSA, Ed25519 or RSA) verifies it over the payload bytes (ECDSA and RSA with SHA-256, RSA with
PKCS#1 v1.5) and the payload names this very manifest digest (as the cosign CLI checks; a signature copied from
another digest is refused). Keyless signatures (a Fulcio certificate, logged in Rekor) are verified against a
trusted root given in a Secret (:mod:`.sigstore`)."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from ..errors import SourceError
from . import sigstore, ssh

SIMPLE_SIGNING = "application/vnd.dev.cosign.simplesigning.v1+json"
SIGNATURE = "dev.cosignproject.cosign/signature"
PAYLOAD_TYPE = "cosign container image signature"
MAX_SIGNATURES = 16  # layers of a signature manifest looked at
MAX_PAYLOAD = 64 << 10

PublicKey = sigstore.PublicKey


def signature_tag(digest: str) -> str:
    """The tag cosign stores a manifest's signatures under: ``sha256:<hex>`` -> ``sha256-<hex>.sig``."""
    return digest.replace(":", "-") + ".sig"


def public_keys(entries: Mapping[str, bytes], source: str) -> list[tuple[str, PublicKey]]:
    """The Secret's ``*.pub`` entries as keys; one that does not parse stops verification (as in Flux)."""
    keys: list[tuple[str, PublicKey]] = []
    for name, data in sorted(entries.items()):
        if not name.endswith(".pub"):
            continue
        try:
            key = serialization.load_pem_public_key(data)
        except (ValueError, UnsupportedAlgorithm):
            raise SourceError("VerificationError", f"{source}: {name} is not a PEM public key", transient=False) \
                from None
        if not isinstance(key, ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey | rsa.RSAPublicKey):
            raise SourceError("VerificationError", f"{source}: {name} is not an ECDSA, Ed25519 or RSA key",
                              transient=False)
        keys.append((name, key))
    if not keys:
        raise SourceError("VerificationError", f"no public keys found in {source} (entries *.pub)", transient=False)
    return keys


@dataclass(frozen=True)
class Signature:
    payload: bytes
    annotations: Mapping[str, str]  # the layer's: the signature, and a keyless one's certificate and bundle

    @property
    def signature(self) -> str:
        return self.annotations[SIGNATURE]


def layers(manifest: bytes) -> list[tuple[str, dict[str, str]]]:
    """(digest, annotations) of each simple-signing layer of a signature manifest."""
    try:
        found = json.loads(manifest).get("layers") or []
        return [(str(x["digest"]), {str(k): str(v) for k, v in (x.get("annotations") or {}).items()})
                for x in found[:MAX_SIGNATURES] if isinstance(x, dict) and x.get("mediaType") == SIMPLE_SIGNING
                and SIGNATURE in (x.get("annotations") or {})]
    except (ValueError, AttributeError, KeyError, TypeError):
        raise SourceError("VerificationError", "the signature manifest is not an OCI image manifest",
                          transient=False) from None


def _names(payload: bytes, digest: str) -> bool:
    """Whether a simple-signing payload is a cosign signature of ``digest``."""
    try:
        critical = json.loads(payload)["critical"]
        return bool(critical["type"] == PAYLOAD_TYPE and critical["image"]["docker-manifest-digest"] == digest)
    except (ValueError, KeyError, TypeError):
        return False


def verify(digest: str, reference: str, signatures: list[Signature], keys: list[tuple[str, PublicKey]]) -> str:
    """Which key signed the manifest ``digest`` (of ``reference``, for messages); SourceError otherwise."""
    for found in _naming(signatures, digest):
        try:
            raw = base64.b64decode(found.signature, validate=True)
        except binascii.Error:
            continue
        for name, key in keys:
            if sigstore.verifies(key, raw, found.payload):
                return name
    raise SourceError("VerificationError", f"failed to verify the signature using provider 'cosign': no matching "
                                           f"signatures were found for '{reference}@{digest}'", transient=True)


def _naming(signatures: list[Signature], digest: str) -> list[Signature]:
    return [s for s in signatures if len(s.payload) <= MAX_PAYLOAD and _names(s.payload, digest)]


def verify_keyless(digest: str, reference: str, signatures: list[Signature], root: sigstore.TrustedRoot,
                   identities: tuple[tuple[str, str], ...]) -> str:
    """The identity of a keyless signature of ``digest`` that the trusted root proves; SourceError otherwise."""
    reasons = []
    for found in _naming(signatures, digest):
        certificate, bundle = found.annotations.get(sigstore.CERTIFICATE), found.annotations.get(sigstore.BUNDLE)
        if not certificate or not bundle:
            reasons.append("a signature without a certificate and a Rekor bundle")
            continue
        try:
            return sigstore.verify(found.payload, found.signature, certificate, bundle, root, identities)
        except ssh.SignatureError as exc:
            reasons.append(str(exc))
    said = "; ".join(reasons[:3]) or f"no matching signatures were found for '{reference}@{digest}'"
    raise SourceError("VerificationError", f"failed to verify the signature using provider 'cosign keyless': {said}",
                      transient=True)
