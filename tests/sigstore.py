"""A Sigstore of the tests' own, written from the formats with ``cryptography``: a Fulcio-like CA (root and
intermediate) that issues short-lived code-signing certificates for an OIDC identity, a CT log that signs their
precertificates (the SCT embedded as Fulcio embeds it), and a Rekor-like log whose Signed Entry Timestamp covers a
``hashedrekord`` entry; its ``trusted_root.json`` is what ``cosign trusted-root create`` writes for such an
infrastructure. ``sign`` stores a keyless signature as ``cosign sign`` does (classic format: certificate, chain and
bundle in the layer's annotations)."""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import struct
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.registry import Registry
from tests.signing import EMPTY, OCI_MANIFEST, _digest

GITHUB = "https://token.actions.githubusercontent.com"
WORKFLOW = "https://github.com/acme/app/.github/workflows/release.yml@refs/heads/main"
_SCT_LIST = x509.ObjectIdentifier("1.3.6.1.4.1.11129.2.4.2")
_ISSUER_V2 = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.8")


def _der(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _ca(subject: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Name, signer: ec.EllipticCurvePrivateKey,
        now: datetime.datetime) -> x509.Certificate:
    return (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(issuer).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=30)).not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(signer, hashes.SHA256()))


@dataclass
class Sigstore:
    root_key: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    intermediate_key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    ct_key: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    rekor_key: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))

    def __post_init__(self) -> None:
        now = datetime.datetime.now(datetime.UTC)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-fulcio")])
        self.root = _ca("test-fulcio", self.root_key, name, self.root_key, now)
        self.intermediate = _ca("test-fulcio-intermediate", self.intermediate_key, name, self.root_key, now)

    def trusted_root(self) -> bytes:
        """``trusted_root.json`` of this infrastructure."""
        def log(key: ec.EllipticCurvePrivateKey, url: str) -> dict[str, object]:
            der = _der(key)
            return {"baseUrl": url, "hashAlgorithm": "SHA2_256",
                    "publicKey": {"rawBytes": _b64(der), "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                                  "validFor": {"start": "2020-01-01T00:00:00Z"}},
                    "logId": {"keyId": _b64(hashlib.sha256(der).digest())}}

        return json.dumps({
            "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
            "tlogs": [log(self.rekor_key, "https://rekor.test")],
            "certificateAuthorities": [{
                "subject": {"organization": "helmop tests", "commonName": "test-fulcio"}, "uri": "https://fulcio.test",
                "certChain": {"certificates": [{"rawBytes": _b64(c.public_bytes(serialization.Encoding.DER))}
                                               for c in (self.intermediate, self.root)]},
                "validFor": {"start": "2020-01-01T00:00:00Z"}}],
            "ctlogs": [log(self.ct_key, "https://ctfe.test")], "timestampAuthorities": []}).encode()

    def certificate(self, key: ec.EllipticCurvePrivateKey, subject: str, issuer: str, *, code_signing: bool = True,
                    sct: bool = True) -> x509.Certificate:
        """A Fulcio certificate for ``key``: ``subject`` (a URI, or an email when it has an @ and no scheme) of the
        OIDC ``issuer``, valid ten minutes, its SCT from the CT log over the precertificate."""
        now = datetime.datetime.now(datetime.UTC)
        san: x509.GeneralName = (x509.RFC822Name(subject) if "@" in subject and "://" not in subject
                                 else x509.UniformResourceIdentifier(subject))
        usage = ExtendedKeyUsageOID.CODE_SIGNING if code_signing else ExtendedKeyUsageOID.SERVER_AUTH
        builder = (x509.CertificateBuilder().subject_name(x509.Name([])).issuer_name(self.intermediate.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=1))
                   .not_valid_after(now + datetime.timedelta(minutes=10))
                   .add_extension(x509.SubjectAlternativeName([san]), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
                   .add_extension(x509.UnrecognizedExtension(_ISSUER_V2, b"\x0c" + bytes([len(issuer)])
                                                             + issuer.encode()), critical=False))
        if not sct:
            return builder.sign(self.intermediate_key, hashes.SHA256())
        tbs = builder.sign(self.intermediate_key, hashes.SHA256()).tbs_certificate_bytes
        millis = int(now.timestamp() * 1000)
        issuer_hash = hashlib.sha256(_der(self.intermediate_key)).digest()
        signed = (struct.pack(">BBQH", 0, 0, millis, 1) + issuer_hash + len(tbs).to_bytes(3, "big") + tbs
                  + struct.pack(">H", 0))
        signature = self.ct_key.sign(signed, ec.ECDSA(hashes.SHA256()))
        entry = (b"\x00" + hashlib.sha256(_der(self.ct_key)).digest() + struct.pack(">QH", millis, 0)
                 + struct.pack(">BBH", 4, 3, len(signature)) + signature)
        listed = struct.pack(">H", len(entry) + 2) + struct.pack(">H", len(entry)) + entry
        octets = b"\x04" + _length(len(listed)) + listed
        return builder.add_extension(x509.UnrecognizedExtension(_SCT_LIST, octets), critical=False) \
            .sign(self.intermediate_key, hashes.SHA256())

    def bundle(self, payload: bytes, signature: str, certificate: x509.Certificate,
               logged: datetime.datetime | None = None) -> str:
        """The Rekor bundle of a ``hashedrekord`` entry of the signing, logged now (or at ``logged``)."""
        pem = certificate.public_bytes(serialization.Encoding.PEM)
        body = _b64(json.dumps({"apiVersion": "0.0.1", "kind": "hashedrekord", "spec": {
            "data": {"hash": {"algorithm": "sha256", "value": hashlib.sha256(payload).hexdigest()}},
            "signature": {"content": signature, "publicKey": {"content": _b64(pem)}}}}).encode())
        entry = {"body": body, "integratedTime": int((logged or datetime.datetime.now(datetime.UTC)).timestamp()),
                 "logIndex": 7, "logID": hashlib.sha256(_der(self.rekor_key)).hexdigest()}
        canonical = json.dumps(entry, sort_keys=True, separators=(",", ":")).encode()
        return json.dumps({"SignedEntryTimestamp": _b64(self.rekor_key.sign(canonical, ec.ECDSA(hashes.SHA256()))),
                           "Payload": entry})

    def sign(self, registry: Registry, repository: str, digest: str, subject: str = WORKFLOW, issuer: str = GITHUB,
             **certificate: bool) -> tuple[bytes, dict[str, str]]:
        """A keyless signature of ``digest`` (of ``repository``) pushed as ``cosign sign`` stores it; its payload
        and annotations returned (to tamper with in a test, and push again with :func:`push`)."""
        payload = json.dumps({"critical": {"identity": {"docker-reference": repository},
                                           "image": {"docker-manifest-digest": digest},
                                           "type": "cosign container image signature"}, "optional": None},
                             separators=(",", ":")).encode()
        key = ec.generate_private_key(ec.SECP256R1())
        signature = _b64(key.sign(payload, ec.ECDSA(hashes.SHA256())))
        cert = self.certificate(key, subject, issuer, **certificate)
        annotations = {"dev.cosignproject.cosign/signature": signature,
                       "dev.sigstore.cosign/certificate": cert.public_bytes(serialization.Encoding.PEM).decode(),
                       "dev.sigstore.cosign/chain": b"".join(c.public_bytes(serialization.Encoding.PEM)
                                                             for c in (self.intermediate, self.root)).decode(),
                       "dev.sigstore.cosign/bundle": self.bundle(payload, signature, cert)}
        push(registry, digest, payload, annotations)
        return payload, annotations


def push(registry: Registry, digest: str, payload: bytes, annotations: dict[str, str]) -> None:
    """A cosign signature manifest of ``digest`` with one simple-signing layer."""
    registry.push({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                   "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": _digest(EMPTY),
                              "size": len(EMPTY)},
                   "layers": [{"mediaType": "application/vnd.dev.cosign.simplesigning.v1+json",
                               "digest": _digest(payload), "size": len(payload), "annotations": annotations}]},
                  [EMPTY, payload], tag=digest.replace(":", "-") + ".sig")


def _length(n: int) -> bytes:
    """A DER length."""
    if n < 128:
        return bytes([n])
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(raw)]) + raw
