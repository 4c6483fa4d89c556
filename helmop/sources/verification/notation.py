"""Notary Project (notation) signatures of an OCI artifact, as notation verifies them with the trust policy and
trust store Flux's source-controller takes from a Secret (``trustpolicy.json``, and ``*.crt``/``*.pem``
certificates, every one of them in every named store, as Flux does). Signatures are found as OCI referrers of
the artifact (artifact type ``application/vnd.cncf.notary.signature``); each is a JWS envelope (JSON
serialization) over ``{"targetArtifact": descriptor}``, signed by the leaf of its ``x5c`` chain.

Checked, in notation's order: integrity (the JWS with the leaf's key, its algorithm the one the leaf's key
implies: PS256/384/512, ES256/384/512; the protected header's content type, signing scheme ``notary.x509``,
signing time and critical headers; the chain's structure and the code-signing certificate rules), the payload
naming this artifact (digest, size, media type), authenticity (a certificate of the chain is one of the trust
store's), trusted identities (``*`` or ``x509.subject`` attributes the leaf's subject holds), expiry, and every
certificate valid now. Levels ``strict``, ``permissive`` (expiry only logged), ``audit`` (authenticity only
logged: the artifact is not refused, and no SourceVerified condition is set) and ``skip``. Not done: RFC 3161
timestamps, revocation (OCSP, CRL) and COSE envelopes; the latter is refused by name."""

from __future__ import annotations

import base64
import binascii
import datetime
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ..errors import SourceError

log = logging.getLogger(__name__)

SIGNATURE_TYPE = "application/vnd.cncf.notary.signature"
JWS = "application/jose+json"
PAYLOAD_TYPE = "application/vnd.cncf.notary.payload.v1+json"
MAX_SIGNATURES = 3  # tried, as Flux's verifier
MAX_ENVELOPE = 256 << 10
_ALGORITHMS: dict[str, type[hashes.SHA256 | hashes.SHA384 | hashes.SHA512]] = {
    "PS256": hashes.SHA256, "PS384": hashes.SHA384, "PS512": hashes.SHA512, "ES256": hashes.SHA256,
    "ES384": hashes.SHA384, "ES512": hashes.SHA512}
_KEY_ALGORITHM = {("rsa", 2048): "PS256", ("rsa", 3072): "PS384", ("rsa", 4096): "PS512",
                  ("ec", 256): "ES256", ("ec", 384): "ES384", ("ec", 521): "ES512"}
_NOT_FOR_CODE = (ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH, ExtendedKeyUsageOID.EMAIL_PROTECTION,
                 ExtendedKeyUsageOID.TIME_STAMPING, ExtendedKeyUsageOID.OCSP_SIGNING)
_DN = {"C": NameOID.COUNTRY_NAME, "ST": NameOID.STATE_OR_PROVINCE_NAME, "S": NameOID.STATE_OR_PROVINCE_NAME,
       "O": NameOID.ORGANIZATION_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME, "CN": NameOID.COMMON_NAME,
       "L": NameOID.LOCALITY_NAME}


class Refused(Exception):
    """One signature does not pass (the message says which check)."""


def _fail(why: str) -> SourceError:
    return SourceError("VerificationError", f"failed to verify the signature using provider 'notation': {why}",
                       transient=True)


@dataclass(frozen=True)
class Policy:
    name: str
    level: str  # strict, permissive, audit, skip
    identities: tuple[str, ...]


def trust(entries: Mapping[str, bytes], source: str, repository: str) -> tuple[Policy, list[x509.Certificate]]:
    """The trust policy for ``repository`` (``host/path``) and the trust store's certificates, from a Secret."""
    if "trustpolicy.json" not in entries:
        raise _fail(f"'trustpolicy.json' not found in {source}")
    certs: list[x509.Certificate] = []
    for name, data in sorted(entries.items()):
        if name.endswith((".crt", ".pem")):
            try:
                certs += (x509.load_pem_x509_certificates(data) if b"-----BEGIN" in data
                          else [x509.load_der_x509_certificate(data)])
            except ValueError:
                raise _fail(f"{name} in {source} is not a certificate") from None
    if not certs:
        raise _fail(f"no certificates found in {source}")
    return _policy(entries["trustpolicy.json"], repository), certs


def _policy(text: bytes, repository: str) -> Policy:
    try:
        document = json.loads(text)
        if document.get("version") != "1.0":
            raise _fail("the trust policy's version must be 1.0")
        statements = [p for p in document.get("trustPolicies") or [] if isinstance(p, dict)]
    except (ValueError, AttributeError):
        raise _fail("error occurred while parsing trustpolicy.json") from None
    exact = [p for p in statements if repository in (p.get("registryScopes") or [])]
    matching = exact or [p for p in statements if "*" in (p.get("registryScopes") or [])]
    if not matching:
        raise _fail(f"artifact {repository!r} has no applicable trust policy statement")
    chosen = matching[0]
    level = str((chosen.get("signatureVerification") or {}).get("level") or "")
    if level not in ("strict", "permissive", "audit", "skip"):
        raise _fail(f"trust policy {chosen.get('name')!r} has no valid signatureVerification level")
    return Policy(str(chosen.get("name") or ""), level, tuple(str(i) for i in chosen.get("trustedIdentities") or []))


def _b64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _envelope(data: bytes) -> tuple[dict[str, Any], dict[str, Any], bytes, bytes, list[x509.Certificate]]:
    """(protected header, payload, signing input, signature, chain) of a JWS envelope."""
    try:
        envelope = json.loads(data)
        protected_text, payload_text = str(envelope["protected"]), str(envelope["payload"])
        protected, payload = json.loads(_b64url(protected_text)), json.loads(_b64url(payload_text))
        signature = _b64url(str(envelope["signature"]))
        chain = [x509.load_der_x509_certificate(base64.b64decode(c)) for c in envelope["header"]["x5c"]]
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise Refused("the signature envelope is not a notation JWS") from None
    if not chain or not isinstance(protected, dict) or not isinstance(payload, dict):
        raise Refused("the signature envelope has no certificate chain")
    return protected, payload, f"{protected_text}.{payload_text}".encode(), signature, chain


def _algorithm(leaf: x509.Certificate) -> str:
    key = leaf.public_key()
    if isinstance(key, rsa.RSAPublicKey):
        found = _KEY_ALGORITHM.get(("rsa", key.key_size))
    elif isinstance(key, ec.EllipticCurvePublicKey):
        found = _KEY_ALGORITHM.get(("ec", key.curve.key_size))
    else:
        found = None
    if found is None:
        raise Refused("the signing certificate's key is not RSA 2048/3072/4096 or ECDSA P-256/384/521")
    return found


def _integrity(protected: dict[str, Any], signed: bytes, signature: bytes, leaf: x509.Certificate) -> None:
    alg = str(protected.get("alg") or "")
    if alg != _algorithm(leaf):
        raise Refused(f"the signing algorithm {alg!r} is not the one the signing certificate's key implies")
    if protected.get("cty") != PAYLOAD_TYPE:
        raise Refused("the payload's content type is not notation's")
    if protected.get("io.cncf.notary.signingScheme") != "notary.x509":
        raise Refused("the signing scheme is not notary.x509")
    critical = protected.get("crit") or []
    if not isinstance(critical, list) or "io.cncf.notary.signingScheme" not in critical or any(
            name not in protected for name in critical) or ("io.cncf.notary.expiry" in protected
                                                            and "io.cncf.notary.expiry" not in critical):
        raise Refused("the protected header's critical attributes are not as notation requires")
    if not protected.get("io.cncf.notary.signingTime"):
        raise Refused("the signature has no signing time")
    digest = _ALGORITHMS[alg]()
    key = leaf.public_key()
    try:
        if isinstance(key, ec.EllipticCurvePublicKey):
            half = len(signature) // 2
            der = encode_dss_signature(int.from_bytes(signature[:half], "big"), int.from_bytes(signature[half:], "big"))
            key.verify(der, signed, ec.ECDSA(digest))
        elif isinstance(key, rsa.RSAPublicKey):
            key.verify(signature, signed, padding.PSS(mgf=padding.MGF1(digest), salt_length=padding.PSS.AUTO), digest)
    except (InvalidSignature, ValueError):
        raise Refused("the signature does not verify with its signing certificate") from None


def _key_usage(cert: x509.Certificate) -> x509.KeyUsage:
    try:
        extension = cert.extensions.get_extension_for_class(x509.KeyUsage)
    except x509.ExtensionNotFound:
        raise Refused("a certificate of the chain has no key usage") from None
    if not extension.critical:
        raise Refused("a certificate's key usage is not critical")
    return extension.value


def _chain(chain: list[x509.Certificate]) -> None:
    """notation's code-signing chain rules: each issued by the next, the last self-signed, CA and leaf usage."""
    for cert, issuer in zip(chain, [*chain[1:], chain[-1]], strict=True):
        try:
            cert.verify_directly_issued_by(issuer)
        except (ValueError, TypeError, InvalidSignature):
            raise Refused("the certificate chain is not one of issuers") from None
    for ca in chain[1:]:
        try:
            constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints).value
        except x509.ExtensionNotFound:
            raise Refused("a CA certificate of the chain has no basic constraints") from None
        if not constraints.ca or not _key_usage(ca).key_cert_sign:
            raise Refused("a CA certificate of the chain may not sign certificates")
    usage = _key_usage(chain[0])
    if not usage.digital_signature or usage.key_cert_sign or usage.crl_sign or usage.key_encipherment \
            or usage.data_encipherment or usage.key_agreement:
        raise Refused("the signing certificate's key usage is not for signing")
    try:
        extended = chain[0].extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        if any(oid in extended for oid in _NOT_FOR_CODE):
            raise Refused("the signing certificate's extended key usage is not for code signing")
    except x509.ExtensionNotFound:
        pass


def _identity(leaf: x509.Certificate, identities: tuple[str, ...]) -> bool:
    if "*" in identities:
        return True
    held = {(attribute.oid, str(attribute.value)) for attribute in leaf.subject}
    for identity in identities:
        kind, _, name = identity.partition(":")
        if kind.strip() != "x509.subject":
            continue
        wanted = set()
        for part in name.split(","):
            key, _, value = part.strip().partition("=")
            if key.strip() in _DN:
                wanted.add((_DN[key.strip()], value.strip()))
        if wanted and wanted <= held:
            return True
    return False


def verify_one(data: bytes, descriptor: Mapping[str, Any], policy: Policy, store: list[x509.Certificate],
               now: datetime.datetime) -> str | None:
    """The signer of one envelope, when it passes (None: its authenticity failed under ``audit``); Refused
    otherwise."""
    protected, payload, signed, signature, chain = _envelope(data)
    _integrity(protected, signed, signature, chain[0])
    _chain(chain)
    target = payload.get("targetArtifact") or {}
    if not isinstance(target, dict) or any(target.get(k) != descriptor[k] for k in ("digest", "size", "mediaType")):
        raise Refused("the signature is for another artifact (content descriptor mismatch)")
    trusted = {cert.public_bytes(Encoding.DER) for cert in store}
    authentic = any(c.public_bytes(Encoding.DER) in trusted for c in chain) and _identity(chain[0], policy.identities)
    if not authentic:
        if policy.level == "audit":
            log.warning("notation: a signature of %s is not from a trusted identity (audit)", descriptor["digest"])
            return None
        raise Refused("no trusted certificate or identity signed it")
    expiry = protected.get("io.cncf.notary.expiry")
    if expiry and datetime.datetime.fromisoformat(str(expiry)) <= now and policy.level == "strict":
        raise Refused("the signature has expired")
    if policy.level == "strict" and any(not c.not_valid_before_utc <= now <= c.not_valid_after_utc for c in chain):
        raise Refused("a certificate of the chain is not valid now")
    return chain[0].subject.rfc4514_string()


def verify(envelopes: list[tuple[str, bytes]], descriptor: Mapping[str, Any], reference: str, policy: Policy,
           store: list[x509.Certificate]) -> str | None:
    """The SourceVerified message for the first envelope that passes (None: ignored, under ``skip`` or
    ``audit``); SourceError with the reasons otherwise. ``envelopes``: (media type, bytes) of each signature."""
    if policy.level == "skip":
        return None
    if not envelopes:
        raise _fail(f"no signature is associated with {reference!r}, make sure the artifact was signed "
                    "successfully")
    reasons = []
    now = datetime.datetime.now(datetime.UTC)
    for media_type, data in envelopes[:MAX_SIGNATURES]:
        if media_type != JWS:
            reasons.append(f"a {media_type} envelope is not supported (JWS only)")
            continue
        if len(data) > MAX_ENVELOPE:
            reasons.append("a signature envelope is too large")
            continue
        try:
            signer = verify_one(data, descriptor, policy, store, now)
        except Refused as exc:
            reasons.append(str(exc))
            continue
        return None if signer is None else f"verified signature of revision {reference} (signed by {signer})"
    raise _fail(f"{reference}: " + "; ".join(reasons))
