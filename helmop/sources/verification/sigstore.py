"""Keyless cosign signatures (a Fulcio certificate instead of a key, the signing recorded in Rekor), verified
offline against a Sigstore trusted root given in a Secret (Flux 2.9's ``trustedRootSecretRef``:
``trusted_root.json``, as ``cosign trusted-root create`` writes it) and never against the public Sigstore
infrastructure, which would need its TUF root and logs from the network (refused by name where no root is given).

For one signature layer (cosign's classic format: the certificate and the Rekor bundle in the layer's
annotations; the chain it may bring is not used: the root's own certificates are), as cosign verifies it:

* the signature verifies with the certificate's key over the simple-signing payload;
* the certificate chains to a certificate authority of the root (valid when the signing was logged), is a
  code-signing leaf, and carries a Signed Certificate Timestamp of a CT log of the root over its precertificate;
* the Rekor bundle's Signed Entry Timestamp verifies with a transparency log key of the root, its entry (a
  ``hashedrekord``) names this payload's hash, this signature and this certificate, and the time it was logged
  falls within the certificate's validity;
* the certificate's identity (its OIDC issuer extension, and a URI or email subject alternative name) matches
  one of ``matchOIDCIdentity`` (issuer and subject regexes, RE2, unanchored as Go's); none given: any."""

from __future__ import annotations

import base64
import binascii
import datetime
import hashlib
import itertools
import json
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import re2
from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID

from .ssh import SignatureError

CERTIFICATE = "dev.sigstore.cosign/certificate"
BUNDLE = "dev.sigstore.cosign/bundle"
_ISSUER_V1 = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.1")
_ISSUER_V2 = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.8")
MAX_ROOT = 1 << 20
_MAX_ENTRIES, _MAX_CHAIN = 32, 8  # what one signature may cost to check: Sigstore's own root lists a handful
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)

PublicKey = ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey | rsa.RSAPublicKey


def _time(text: Any) -> datetime.datetime | None:
    if not text:
        return None
    when = datetime.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    return when if when.tzinfo else when.replace(tzinfo=datetime.UTC)


@dataclass(frozen=True)
class _Key:
    key: PublicKey
    start: datetime.datetime | None
    end: datetime.datetime | None


@dataclass(frozen=True)
class TrustedRoot:
    authorities: tuple[tuple[tuple[x509.Certificate, ...], datetime.datetime | None, datetime.datetime | None], ...]
    tlogs: dict[bytes, _Key]  # by log ID (sha256 of the key's DER)
    ctlogs: dict[bytes, _Key]

    @classmethod
    def parse(cls, data: bytes) -> TrustedRoot:
        """A Sigstore ``trusted_root.json``; SignatureError when it is not one."""
        if len(data) > MAX_ROOT:
            raise SignatureError("trusted_root.json is too large")
        try:
            root = json.loads(data)
            authorities = tuple(
                (tuple(x509.load_der_x509_certificate(base64.b64decode(c["rawBytes"]))
                       for c in ca["certChain"]["certificates"]),
                 _time((ca.get("validFor") or {}).get("start")), _time((ca.get("validFor") or {}).get("end")))
                for ca in root.get("certificateAuthorities") or [])
            found = cls(authorities, _logs(root.get("tlogs") or []), _logs(root.get("ctlogs") or []))
        except (ValueError, KeyError, TypeError, AttributeError, binascii.Error, UnsupportedAlgorithm, RecursionError):
            raise SignatureError("trusted_root.json is not a Sigstore trusted root") from None
        if max(len(found.authorities), len(found.tlogs), len(found.ctlogs)) > _MAX_ENTRIES or any(
                len(chain) > _MAX_CHAIN for chain, _, _ in found.authorities):
            raise SignatureError(f"trusted_root.json lists more than {_MAX_ENTRIES} authorities or logs, or a chain "
                                 f"of more than {_MAX_CHAIN} certificates")
        return found


def _logs(entries: Iterable[Any]) -> dict[bytes, _Key]:
    out = {}
    for entry in entries:
        der = base64.b64decode(entry["publicKey"]["rawBytes"])
        key = serialization.load_der_public_key(der)
        if not isinstance(key, ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey | rsa.RSAPublicKey):
            raise ValueError("an unsupported log key")
        valid = entry["publicKey"].get("validFor") or {}
        log_id = base64.b64decode(entry["logId"]["keyId"]) if entry.get("logId") else hashlib.sha256(der).digest()
        out[log_id] = _Key(key, _time(valid.get("start")), _time(valid.get("end")))
    return out


def verifies(key: PublicKey, signature: bytes, data: bytes) -> bool:
    """Whether ``signature`` over ``data`` is ``key``'s (ECDSA and RSA over SHA-256, or Ed25519)."""
    try:
        if isinstance(key, ec.EllipticCurvePublicKey):
            key.verify(signature, data, ec.ECDSA(hashes.SHA256()))
        elif isinstance(key, ed25519.Ed25519PublicKey):
            key.verify(signature, data)
        else:
            key.verify(signature, data, padding.PKCS1v15(), hashes.SHA256())
    except (InvalidSignature, ValueError):
        return False
    return True


def _chain(leaf: x509.Certificate, root: TrustedRoot, at: datetime.datetime) -> x509.Certificate:
    """The leaf's issuer, once the leaf chains, through an authority's own certificates (never the chain the
    signature brings), to that authority of the root, and all were valid when the signing was logged (``at``)."""
    chained = False
    for certificates, start, end in root.authorities:
        if not certificates:
            continue
        path = [leaf, *certificates]
        try:
            for cert, issuer in itertools.pairwise(path):
                cert.verify_directly_issued_by(issuer)
        except (ValueError, TypeError, InvalidSignature):
            continue
        chained = True
        if not (start and at < start) and not (end and at > end) and \
                all(c.not_valid_before_utc <= at <= c.not_valid_after_utc for c in path):
            return path[1]
    if chained:
        raise SignatureError("the certificate or its authority was not valid when the signing was logged")
    raise SignatureError("the certificate does not chain to a certificate authority of the trusted root")


def _sct(leaf: x509.Certificate, issuer: x509.Certificate, root: TrustedRoot) -> None:
    """A Signed Certificate Timestamp of one of the root's CT logs, over the leaf's precertificate."""
    try:
        scts = leaf.extensions.get_extension_for_class(x509.PrecertificateSignedCertificateTimestamps).value
    except x509.ExtensionNotFound:
        raise SignatureError("the certificate carries no Signed Certificate Timestamp") from None
    issuer_hash = hashlib.sha256(issuer.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)).digest()
    tbs = leaf.tbs_precertificate_bytes
    for sct in scts:
        log = root.ctlogs.get(sct.log_id)
        stamped = sct.timestamp.replace(tzinfo=datetime.UTC)
        if log is None or (log.start and stamped < log.start) or (log.end and stamped > log.end):
            continue
        millis = (stamped - _EPOCH) // datetime.timedelta(milliseconds=1)  # exact: no float rounding
        signed = (struct.pack(">BBQH", 0, 0, millis, 1) + issuer_hash + len(tbs).to_bytes(3, "big") + tbs
                  + struct.pack(">H", len(sct.extension_bytes)) + sct.extension_bytes)
        if verifies(log.key, sct.signature, signed):
            return
    raise SignatureError("no Signed Certificate Timestamp of the certificate is from a CT log of the trusted root")


def _rekor(bundle: Any, payload: bytes, signature: str, leaf: x509.Certificate,
           root: TrustedRoot) -> datetime.datetime:
    """When the signing was logged, once the bundle's entry is this signing and its timestamp is the log's."""
    try:
        entry = bundle["Payload"]
        log = root.tlogs.get(bytes.fromhex(str(entry["logID"])))
        canonical = json.dumps({"body": entry["body"], "integratedTime": entry["integratedTime"],
                                "logIndex": entry["logIndex"], "logID": entry["logID"]},
                               sort_keys=True, separators=(",", ":")).encode()
        stamp = base64.b64decode(bundle["SignedEntryTimestamp"])
        body = json.loads(base64.b64decode(entry["body"]))
        kind, spec = body["kind"], body["spec"]
        logged_hash, logged_signature = spec["data"]["hash"]["value"], spec["signature"]["content"]
        logged_cert = x509.load_pem_x509_certificate(base64.b64decode(spec["signature"]["publicKey"]["content"]))
        logged = datetime.datetime.fromtimestamp(int(entry["integratedTime"]), datetime.UTC)
    except (ValueError, KeyError, TypeError, binascii.Error, OverflowError, OSError, RecursionError):
        raise SignatureError("the Rekor bundle is malformed") from None
    if log is None or not verifies(log.key, stamp, canonical):
        raise SignatureError("the Rekor bundle is not signed by a transparency log of the trusted root")
    if (log.start and logged < log.start) or (log.end and logged > log.end):
        raise SignatureError("the Rekor bundle's log was not valid when the signing was logged")
    if kind != "hashedrekord" or logged_hash != hashlib.sha256(payload).hexdigest() \
            or logged_signature != signature or logged_cert != leaf:
        raise SignatureError("the Rekor entry is not this signing (hash, signature or certificate differ)")
    return logged


def _identity(leaf: x509.Certificate) -> tuple[str, list[str]]:
    """(OIDC issuer, subject alternative names) of a Fulcio certificate."""
    issuer = ""
    for extension in leaf.extensions:
        if extension.oid in (_ISSUER_V1, _ISSUER_V2) and isinstance(extension.value, x509.UnrecognizedExtension):
            raw = extension.value.value
            issuer = raw[2:].decode(errors="replace") if extension.oid == _ISSUER_V2 else raw.decode(errors="replace")
    try:
        names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        names = x509.SubjectAlternativeName([])
    return issuer, [*names.get_values_for_type(x509.UniformResourceIdentifier),
                    *names.get_values_for_type(x509.RFC822Name)]


def verify(payload: bytes, signature: str, certificate: str, bundle_text: str, root: TrustedRoot,
           identities: Iterable[tuple[str, str]]) -> str:
    """The identity (``issuer subject``) that made ``signature`` (base64) over ``payload`` with ``certificate``
    (PEM), logged as ``bundle_text`` says, once every check of the module passes; SignatureError otherwise."""
    try:
        leaf = x509.load_pem_x509_certificate(certificate.encode())
        bundle = json.loads(bundle_text)
        raw = base64.b64decode(signature, validate=True)
    except (ValueError, binascii.Error, RecursionError):
        raise SignatureError("the keyless signature's certificate or bundle is malformed") from None
    try:
        return _checked(leaf, payload, raw, signature, bundle, root, list(identities))
    except SignatureError:
        raise
    except (ValueError, UnsupportedAlgorithm):  # extensions are parsed as they are read
        raise SignatureError("the keyless signature's certificate is malformed") from None


def _checked(leaf: x509.Certificate, payload: bytes, raw: bytes, signature: str, bundle: Any, root: TrustedRoot,
             identities: list[tuple[str, str]]) -> str:
    key = leaf.public_key()
    if not isinstance(key, ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey | rsa.RSAPublicKey) or not verifies(
            key, raw, payload):
        raise SignatureError("the signature does not verify with its certificate")
    logged = _rekor(bundle, payload, signature, leaf, root)
    issuer = _chain(leaf, root, logged)
    try:
        usage = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        usage = x509.ExtendedKeyUsage([])
    if ExtendedKeyUsageOID.CODE_SIGNING not in usage:
        raise SignatureError("the certificate is not for code signing")
    _sct(leaf, issuer, root)
    oidc, subjects = _identity(leaf)
    if identities and not any(re2.search(want_issuer, oidc) and any(re2.search(want_subject, s) for s in subjects)
                              for want_issuer, want_subject in identities):
        raise SignatureError(f"the signer {', '.join(subjects) or '(none)'} of {oidc or '(no issuer)'} matches no "
                             "spec.verify.matchOIDCIdentity")
    return f"{oidc} {', '.join(subjects)}".strip()
