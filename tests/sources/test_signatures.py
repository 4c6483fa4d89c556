"""Signed OCI artifacts (helmop.sources.verification.registry, cosign, notation) against a loopback registry with
token auth: a chart signed with cosign (a key pair made here, the signature stored as cosign stores it) or with
notation (a CA and a code-signing leaf made here, a JWS envelope pushed as a referrer) verifies; one signed by
another key or CA, a signature copied from another digest, none at all, or a certificate that has expired does
not; notation's trust policy levels and identities are honoured. Keyless cosign (a Sigstore made here: its CA,
CT log and Rekor) verifies against its trusted_root.json and the identities asked, and refuses what any one of
its proofs does not cover."""

from __future__ import annotations

import datetime
import hashlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509

from helmop.api.repositories import Verification
from helmop.sources import artifacts
from helmop.sources.errors import SourceError
from helmop.sources.repositories import Credentials, Repositories
from helmop.sources.verification import registry as signatures
from helmop.sources.verification.sigstore import BUNDLE, CERTIFICATE
from tests.registry import Registry
from tests.signing import NotationCA, cosign_key, cosign_sign, trust_policy
from tests.sigstore import GITHUB, WORKFLOW, Sigstore, push
from tests.tools import tool

CREDS = Credentials(username="robot", password="pw")


@pytest.fixture(scope="module")
def packaged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    root = tmp_path_factory.mktemp("charts")
    subprocess.run([tool("helm"), "create", str(root / "app")], check=True, capture_output=True)
    data = {}
    for version in ("1.0.0", "2.0.0"):
        subprocess.run([tool("helm"), "package", str(root / "app"), "--version", version, "-d", str(root / version)],
                       check=True, capture_output=True)
        data[version] = next((root / version).glob("*.tgz")).read_bytes()
    return data


@pytest.fixture
def charts(packaged: dict[str, bytes]) -> Iterator[Registry]:
    """A registry of this test alone: the signatures one test pushes are not another's."""
    reg = Registry(packaged)
    yield reg
    reg.loop.call_soon_threadsafe(reg.loop.stop)


async def check(charts: Registry, tmp_path: Path, version: str, provider: str | Verification,
                entries: dict[str, bytes]) -> str | None:
    url = f"oci://127.0.0.1:{charts.port}/charts/app"
    repos = Repositories(tmp_path)
    manifest = await artifacts.manifest_of(repos, url, version, CREDS, insecure=True)
    assert manifest.digest == charts.digest_of(version)
    verification = Verification(provider, "trust") if isinstance(provider, str) else provider
    return await signatures.verify(repos, url, CREDS, True, manifest, verification, entries, "Secret shop/trust")


async def test_cosign_verifies_the_key_that_signed_and_refuses_others(charts: Registry, tmp_path: Path) -> None:
    key, public = cosign_key()
    other, other_public = cosign_key()
    digest = charts.digest_of("1.0.0")
    reference = f"127.0.0.1:{charts.port}/charts/app"
    cosign_sign(charts, reference, digest, key)
    said = await check(charts, tmp_path, "1.0.0", "cosign", {"cosign.pub": public, "readme.txt": b"not a key"})
    assert said == f"verified signature of {reference}@{digest} with key cosign.pub"
    with pytest.raises(SourceError) as foreign:
        await check(charts, tmp_path / "b", "1.0.0", "cosign", {"other.pub": other_public})
    assert foreign.value.reason == "VerificationError"
    assert f"no matching signatures were found for '{reference}@{digest}'" in str(foreign.value)
    with pytest.raises(SourceError, match="no matching signatures"):  # version 2.0.0 has no signature at all
        await check(charts, tmp_path / "c", "2.0.0", "cosign", {"cosign.pub": public})


async def test_a_cosign_signature_copied_from_another_digest_is_refused(charts: Registry, tmp_path: Path) -> None:
    """The same key signed 2.0.0; its signature (naming 2.0.0's digest) stored under 1.0.0's tag proves nothing
    of 1.0.0 (the cosign CLI's check, which Flux leaves out)."""
    key, public = cosign_key()
    reference = f"127.0.0.1:{charts.port}/charts/app"
    cosign_sign(charts, reference, charts.digest_of("1.0.0"), key, claimed=charts.digest_of("2.0.0"))
    with pytest.raises(SourceError, match="no matching signatures"):
        await check(charts, tmp_path, "1.0.0", "cosign", {"cosign.pub": public})


@pytest.mark.parametrize("referrers_api", [True, False])
async def test_notation_verifies_a_chain_to_the_trust_store(charts: Registry, tmp_path: Path,
                                                          referrers_api: bool) -> None:
    ca = NotationCA.make("notation-signer")
    digest, size = charts.digest_of("1.0.0"), len(charts.manifests["1.0.0"])
    charts.referrers_api = referrers_api
    try:
        ca.sign(charts, digest, size)
        if not referrers_api:  # the referrers tag schema: an index at sha256-<hex>
            found = [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": d, "size": len(b),
                      "artifactType": "application/vnd.cncf.notary.signature"}
                     for d, b in charts.by_digest.items() if digest.encode() in b and b'"subject"' in b]
            charts.push({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                         "manifests": found}, [], tag=digest.replace(":", "-"))
        trusted = {"trustpolicy.json": trust_policy(), "ca.crt": ca.root_pem()}
        said = await check(charts, tmp_path, "1.0.0", "notation", trusted)
        assert said is not None and "signed by CN=notation-signer" in said
    finally:
        charts.referrers_api = True


async def test_notation_refuses_what_its_trust_policy_does_not_trust(charts: Registry, tmp_path: Path) -> None:
    signer, stranger = NotationCA.make("signer"), NotationCA.make("stranger")
    digest, size = charts.digest_of("2.0.0"), len(charts.manifests["2.0.0"])
    signer.sign(charts, digest, size)

    async def verdict(policy: bytes, ca: NotationCA, where: str) -> str | None:
        return await check(charts, tmp_path / where, "2.0.0", "notation",
                           {"trustpolicy.json": policy, "root.pem": ca.root_pem()})

    with pytest.raises(SourceError, match="no trusted certificate or identity"):
        await verdict(trust_policy(), stranger, "a")
    with pytest.raises(SourceError, match="no trusted certificate or identity"):
        await verdict(trust_policy(identities=("x509.subject: C=US, ST=WA, O=someone else",)), signer, "b")
    assert await verdict(trust_policy(identities=("x509.subject: C=US, ST=WA, O=helmop tests",)), signer, "c")
    assert await verdict(trust_policy(level="audit"), stranger, "d") is None  # audit: logged, not refused
    assert await verdict(trust_policy(level="skip"), stranger, "e") is None
    with pytest.raises(SourceError, match=r"'trustpolicy\.json' not found"):
        await check(charts, tmp_path / "f", "2.0.0", "notation", {"root.pem": signer.root_pem()})


async def test_notation_refuses_an_expired_certificate_and_a_signature_of_another_artifact(
        charts: Registry, tmp_path: Path) -> None:
    expired = NotationCA.make("expired", days=-1)
    digest = charts.digest_of("1.0.0")
    expired.sign(charts, digest, len(charts.manifests["1.0.0"]))
    with pytest.raises(SourceError, match="not valid now"):
        await check(charts, tmp_path, "1.0.0", "notation",
                    {"trustpolicy.json": trust_policy(), "ca.crt": expired.root_pem()})
    liar = NotationCA.make("liar")
    liar.sign(charts, digest, size=1)  # a signature whose payload names another size: not this artifact
    with pytest.raises(SourceError, match="content descriptor mismatch"):
        await check(charts, tmp_path / "b", "1.0.0", "notation",
                    {"trustpolicy.json": trust_policy(), "ca.crt": liar.root_pem()})
    assert hashlib.sha256(charts.manifests["1.0.0"]).hexdigest() in digest


def keyless(*identities: tuple[str, str]) -> Verification:
    return Verification("cosign", "", "root", identities)


async def test_keyless_cosign_verifies_the_identity_its_trusted_root_proves(charts: Registry, tmp_path: Path) -> None:
    sigstore = Sigstore()
    digest = charts.digest_of("1.0.0")
    sigstore.sign(charts, f"127.0.0.1:{charts.port}/charts/app", digest)
    root = {"trusted_root.json": sigstore.trusted_root()}
    said = await check(charts, tmp_path, "1.0.0", keyless((r"^https://token\.actions\.", "acme/app")), root)
    assert said == f"verified signature of 127.0.0.1:{charts.port}/charts/app@{digest} by {GITHUB} {WORKFLOW}"
    assert await check(charts, tmp_path / "any", "1.0.0", keyless(), root)  # no identities asked: any
    assert await check(charts, tmp_path / "or", "1.0.0", keyless(("gitlab", "."), ("github", "acme")), root)
    with pytest.raises(SourceError, match=r"matches no spec\.verify\.matchOIDCIdentity") as other:
        await check(charts, tmp_path / "b", "1.0.0", keyless((GITHUB, "evil/app")), root)
    assert other.value.reason == "VerificationError"
    with pytest.raises(SourceError, match="not signed by a transparency log of the trusted root"):
        await check(charts, tmp_path / "c", "1.0.0", keyless(), {"trusted_root.json": Sigstore().trusted_root()})
    other_ca = Sigstore(ct_key=sigstore.ct_key, rekor_key=sigstore.rekor_key)  # its logs, another CA
    with pytest.raises(SourceError, match="does not chain to a certificate authority"):
        await check(charts, tmp_path / "c2", "1.0.0", keyless(), {"trusted_root.json": other_ca.trusted_root()})
    with pytest.raises(SourceError, match=r"'trusted_root\.json' not found in Secret shop/trust"):
        await check(charts, tmp_path / "d", "1.0.0", keyless(), {"root.json": sigstore.trusted_root()})
    with pytest.raises(SourceError, match="not a Sigstore trusted root"):
        await check(charts, tmp_path / "e", "1.0.0", keyless(), {"trusted_root.json": b"[" * 100_000})
    with pytest.raises(SourceError, match="no matching signatures"):  # 2.0.0 is not signed
        await check(charts, tmp_path / "f", "2.0.0", keyless(), root)


@pytest.mark.parametrize(("forgery", "reason"), [
    ("another CT log", "no Signed Certificate Timestamp of the certificate is from a CT log"),
    ("no SCT", "carries no Signed Certificate Timestamp"),
    ("not for code signing", "not for code signing"),
    ("another Rekor", "not signed by a transparency log of the trusted root"),
    ("logged after expiry", "not valid when the signing was logged"),
    ("entry of another payload", "the Rekor entry is not this signing"),
    ("signature of another payload", "does not verify with its certificate"),
    ("no bundle", "without a certificate and a Rekor bundle"),
    ("bundle not JSON", "malformed"),
])
async def test_keyless_cosign_refuses_what_a_proof_does_not_cover(charts: Registry, tmp_path: Path, forgery: str,
                                                                  reason: str) -> None:
    sigstore, stranger = Sigstore(), Sigstore()
    digest, reference = charts.digest_of("1.0.0"), f"127.0.0.1:{charts.port}/charts/app"
    options = {"sct": forgery != "no SCT", "code_signing": forgery != "not for code signing"}
    payload, annotations = sigstore.sign(charts, reference, digest, **options)
    certificate = x509.load_pem_x509_certificate(annotations[CERTIFICATE].encode())
    signature = annotations["dev.cosignproject.cosign/signature"]
    if forgery == "another CT log":
        sigstore.ct_key = stranger.ct_key
    elif forgery == "another Rekor":
        annotations[BUNDLE] = stranger.bundle(payload, signature, certificate)
    elif forgery == "logged after expiry":
        later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
        annotations[BUNDLE] = sigstore.bundle(payload, signature, certificate, logged=later)
    elif forgery == "entry of another payload":
        annotations[BUNDLE] = sigstore.bundle(payload + b" ", signature, certificate)
    elif forgery == "signature of another payload":
        payload = payload.replace(b'"optional":null', b'"optional":{}')
    elif forgery == "no bundle":
        del annotations[BUNDLE]
    elif forgery == "bundle not JSON":
        annotations[BUNDLE] = "{" * 50_000
    push(charts, digest, payload, annotations)
    with pytest.raises(SourceError) as refused:
        await check(charts, tmp_path, "1.0.0", keyless(), {"trusted_root.json": sigstore.trusted_root()})
    assert reason in str(refused.value) and refused.value.reason == "VerificationError"
