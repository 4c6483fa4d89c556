"""Signatures of OCI artifacts made in the tests, stored where cosign and notation store them, written from their
formats with ``cryptography``: cosign's simple-signing payload in a ``sha256-<digest>.sig`` manifest; a notation
JWS envelope, by a leaf certificate of a test CA, pushed as a referrer of the artifact."""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.registry import Registry

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
EMPTY = b"{}"


def cosign_key() -> tuple[ec.EllipticCurvePrivateKey, bytes]:
    """A cosign key pair as ``cosign generate-key-pair`` makes (ECDSA P-256): the key, its PEM public key."""
    key = ec.generate_private_key(ec.SECP256R1())
    return key, key.public_key().public_bytes(serialization.Encoding.PEM,
                                              serialization.PublicFormat.SubjectPublicKeyInfo)


def cosign_sign(registry: Registry, repository: str, digest: str, key: ec.EllipticCurvePrivateKey,
                claimed: str = "") -> None:
    """A signature of ``digest`` (of ``repository``, e.g. 127.0.0.1:PORT/charts/app) as ``cosign sign --key``
    stores it; ``claimed``: the digest the payload names, when it is another's (a copied signature)."""
    payload = json.dumps({"critical": {"identity": {"docker-reference": repository},
                                       "image": {"docker-manifest-digest": claimed or digest},
                                       "type": "cosign container image signature"}, "optional": None},
                         separators=(",", ":")).encode()
    signature = base64.b64encode(key.sign(payload, ec.ECDSA(hashes.SHA256()))).decode()
    registry.push({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                   "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": _digest(EMPTY),
                              "size": len(EMPTY)},
                   "layers": [{"mediaType": "application/vnd.dev.cosign.simplesigning.v1+json",
                               "digest": _digest(payload), "size": len(payload),
                               "annotations": {"dev.cosignproject.cosign/signature": signature}}]},
                  [EMPTY, payload], tag=digest.replace(":", "-") + ".sig")


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
                      x509.NameAttribute(NameOID.STATE_OR_PROVINCE_NAME, "WA"),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "helmop tests"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common)])


@dataclass
class NotationCA:
    """A test CA and a code-signing leaf it issued (valid ``days`` from now, or in the past when negative)."""

    root_key: ec.EllipticCurvePrivateKey
    root: x509.Certificate
    leaf_key: ec.EllipticCurvePrivateKey
    leaf: x509.Certificate

    @classmethod
    def make(cls, name: str = "signer", days: int = 30) -> NotationCA:
        now = datetime.datetime.now(datetime.UTC)
        root_key, leaf_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
        root = (x509.CertificateBuilder().subject_name(_name(f"{name} CA")).issuer_name(_name(f"{name} CA"))
                .public_key(root_key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=365))
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                             data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                             crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
                .sign(root_key, hashes.SHA256()))
        start = now - datetime.timedelta(days=1) if days > 0 else now + datetime.timedelta(days=days * 2)
        leaf = (x509.CertificateBuilder().subject_name(_name(name)).issuer_name(root.subject)
                .public_key(leaf_key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(start).not_valid_after(now + datetime.timedelta(days=days))
                .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                             data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                             crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
                .sign(root_key, hashes.SHA256()))
        return cls(root_key, root, leaf_key, leaf)

    def root_pem(self) -> bytes:
        return self.root.public_bytes(serialization.Encoding.PEM)

    def sign(self, registry: Registry, digest: str, size: int, media_type: str = OCI_MANIFEST) -> None:
        """A JWS notation signature of the manifest (``digest``, ``size``), pushed as its referrer."""
        def b64url(data: bytes) -> str:
            return base64.urlsafe_b64encode(data).decode().rstrip("=")

        protected = b64url(json.dumps({
            "alg": "ES256", "cty": "application/vnd.cncf.notary.payload.v1+json",
            "io.cncf.notary.signingScheme": "notary.x509",
            "io.cncf.notary.signingTime": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "crit": ["io.cncf.notary.signingScheme"]}).encode())
        payload = b64url(json.dumps({"targetArtifact": {"mediaType": media_type, "digest": digest,
                                                        "size": size}}).encode())
        r, s = decode_dss_signature(self.leaf_key.sign(f"{protected}.{payload}".encode(), ec.ECDSA(hashes.SHA256())))
        envelope = json.dumps({"payload": payload, "protected": protected,
                               "header": {"x5c": [base64.b64encode(c.public_bytes(serialization.Encoding.DER))
                                                  .decode() for c in (self.leaf, self.root)]},
                               "signature": b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big"))}).encode()
        registry.push({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                       "artifactType": "application/vnd.cncf.notary.signature",
                       "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": _digest(EMPTY),
                                  "size": len(EMPTY)},
                       "layers": [{"mediaType": "application/jose+json", "digest": _digest(envelope),
                                   "size": len(envelope)}],
                       "subject": {"mediaType": media_type, "digest": digest, "size": size}}, [EMPTY, envelope])


def trust_policy(level: str = "strict", identities: tuple[str, ...] = ("*",)) -> bytes:
    return json.dumps({"version": "1.0", "trustPolicies": [{
        "name": "test", "registryScopes": ["*"], "signatureVerification": {"level": level},
        "trustStores": ["ca:test"], "trustedIdentities": list(identities)}]}).encode()
