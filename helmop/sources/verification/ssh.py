"""SSH signatures (OpenSSH's SSHSIG, what ``git`` writes with ``gpg.format=ssh``), verified against a list of
public keys in ``authorized_keys`` form, as Flux's source-controller does: the signature's own public key must be
one of the list (compared as its wire encoding), its namespace ``git``, its hash SHA-256 or SHA-512, and the
signature valid over ``"SSHSIG" || namespace || reserved || hash || H(payload)``. Ed25519, ECDSA (P-256, P-384,
P-521) and RSA (rsa-sha2-256/512) keys; SHA-1 RSA and security-key types are refused."""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import struct

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

MAX_SIGNATURE = 16 << 10
_ARMOR = re.compile(r"-----BEGIN SSH SIGNATURE-----\s*(.*?)\s*-----END SSH SIGNATURE-----", re.S)
_CURVES: dict[str, tuple[ec.EllipticCurve, hashes.HashAlgorithm]] = {
    "nistp256": (ec.SECP256R1(), hashes.SHA256()), "nistp384": (ec.SECP384R1(), hashes.SHA384()),
    "nistp521": (ec.SECP521R1(), hashes.SHA512())}


class SignatureError(ValueError):
    """The signature does not verify (the message says why, never a key's bytes)."""


class _Reader:
    """RFC 4251's encoding: uint32-length-prefixed strings, read within the buffer."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def string(self) -> bytes:
        if self.at + 4 > len(self.data):
            raise SignatureError("the signature is truncated")
        size = struct.unpack_from(">I", self.data, self.at)[0]
        if self.at + 4 + size > len(self.data):
            raise SignatureError("the signature is truncated")
        value = self.data[self.at + 4:self.at + 4 + size]
        self.at += 4 + size
        return value

    def uint32(self) -> int:
        if self.at + 4 > len(self.data):
            raise SignatureError("the signature is truncated")
        self.at += 4
        return int(struct.unpack_from(">I", self.data, self.at - 4)[0])

    def done(self) -> bool:
        return self.at == len(self.data)


def _string(value: bytes) -> bytes:
    return struct.pack(">I", len(value)) + value


def fingerprint(blob: bytes) -> str:
    """OpenSSH's SHA256 fingerprint of a public key's wire encoding."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def authorized_keys(text: str) -> list[bytes]:
    """The public keys (wire encodings) of an ``authorized_keys`` text; options and comments are ignored."""
    keys = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        at = next((i for i, f in enumerate(fields) if f.startswith(("ssh-", "ecdsa-", "sk-"))), None)
        if at is None or at + 1 >= len(fields):
            raise SignatureError("a line is not an SSH public key")
        try:
            blob = base64.b64decode(fields[at + 1], validate=True)
        except binascii.Error:
            raise SignatureError("a line's key is not base64") from None
        if _Reader(blob).string().decode(errors="replace") != fields[at]:
            raise SignatureError("a line's key type does not match its key")
        keys.append(blob)
    return keys


def verify(armored: str, payload: bytes, trusted: list[bytes], namespace: str = "git") -> str:
    """The fingerprint of the trusted key that made ``armored`` over ``payload``; SignatureError otherwise."""
    match = _ARMOR.search(armored[:MAX_SIGNATURE])
    if match is None:
        raise SignatureError("not an SSH signature")
    try:
        blob = base64.b64decode("".join(match[1].split()), validate=True)
    except binascii.Error:
        raise SignatureError("the SSH signature is not base64") from None
    if not blob.startswith(b"SSHSIG"):
        raise SignatureError("the SSH signature lacks its SSHSIG preamble")
    reader = _Reader(blob[6:])
    if reader.uint32() != 1:
        raise SignatureError("the SSH signature's version is not 1")
    public, space, _reserved, algorithm, signature = (reader.string() for _ in range(5))
    if not reader.done():
        raise SignatureError("the SSH signature has trailing data")
    if space.decode(errors="replace") != namespace:
        raise SignatureError(f"the SSH signature is for namespace {space.decode(errors='replace')!r}, not "
                             f"{namespace!r}")
    if public not in trusted:
        raise SignatureError(f"signed by key {fingerprint(public)}, which is not among the trusted keys")
    hashers = {b"sha256": hashlib.sha256, b"sha512": hashlib.sha512}
    if algorithm not in hashers:
        raise SignatureError("the SSH signature's hash is not sha256 or sha512")
    signed = b"SSHSIG" + _string(space) + _string(b"") + _string(algorithm) + _string(hashers[algorithm](payload)
                                                                                     .digest())
    _check(public, signature, signed)
    return fingerprint(public)


def _check(public: bytes, signature: bytes, signed: bytes) -> None:
    key, sig = _Reader(public), _Reader(signature)
    kind, sig_kind, raw = key.string().decode(errors="replace"), sig.string().decode(errors="replace"), sig.string()
    try:
        if kind == "ssh-ed25519" and sig_kind == kind:
            ed25519.Ed25519PublicKey.from_public_bytes(key.string()).verify(raw, signed)
        elif kind.startswith("ecdsa-sha2-") and sig_kind == kind:
            curve, digest = _CURVES[key.string().decode(errors="replace")]
            point = ec.EllipticCurvePublicKey.from_encoded_point(curve, key.string())
            numbers = _Reader(raw)
            r, s = (int.from_bytes(numbers.string(), "big") for _ in range(2))
            point.verify(encode_dss_signature(r, s), signed, ec.ECDSA(digest))
        elif kind == "ssh-rsa" and sig_kind in ("rsa-sha2-256", "rsa-sha2-512"):
            e, n = (int.from_bytes(key.string(), "big") for _ in range(2))
            digest = hashes.SHA256() if sig_kind == "rsa-sha2-256" else hashes.SHA512()
            rsa.RSAPublicNumbers(e, n).public_key().verify(raw, signed, padding.PKCS1v15(), digest)
        else:
            raise SignatureError(f"a {sig_kind} signature by a {kind} key is not supported")
    except (InvalidSignature, KeyError, ValueError) as exc:
        if isinstance(exc, SignatureError):
            raise
        raise SignatureError("the SSH signature does not match the commit") from None
