"""OpenPGP signatures (git's ``gpgsig``, a signed tag's signature), verified with Sequoia in the process against
the public keys of a Secret's entries, under Sequoia's standard policy (SHA-1 signatures, expired or revoked keys
refused). The signer is named as Flux names it: the 16 upper-case hex digits of the primary key's ID."""

from __future__ import annotations

import pysequoia

from .ssh import SignatureError

MAX_SIGNATURE = 16 << 10


def keys(data: bytes) -> list[pysequoia.Cert]:
    """The certificates of an armored key ring entry (several keys may be in one)."""
    try:
        return list(pysequoia.Cert.split_bytes(data))
    except Exception:  # Sequoia's parse errors
        raise SignatureError("not an OpenPGP public key") from None


def verify(armored: str, payload: bytes, certs: list[pysequoia.Cert]) -> str:
    """The key ID of the certificate whose key made ``armored`` over ``payload``; SignatureError otherwise."""
    if len(armored) > MAX_SIGNATURE:
        raise SignatureError("the OpenPGP signature is too large")
    try:
        signature = pysequoia.Sig.from_bytes(armored.encode())
    except Exception:
        raise SignatureError("not an OpenPGP signature") from None
    try:
        found = pysequoia.verify(bytes=payload, store=lambda _ids: certs, signature=signature).valid_sigs
    except Exception:  # Sequoia: "no valid signatures found", a policy refusal, a malformed packet
        found = []
    if not found:
        issuer = (signature.issuer_key_id or "an unknown key").upper()
        raise SignatureError(f"signed by {issuer}, which is not among the trusted keys (or the signature does not "
                             "match)")
    return str(found[0].certificate)[-16:].upper()
