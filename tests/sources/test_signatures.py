"""Signed OCI artifacts (helmop.sources.verification.registry, cosign, notation) against a loopback registry with
token auth: a chart signed with cosign (a key pair made here, the signature stored as cosign stores it) or with
notation (a CA and a code-signing leaf made here, a JWS envelope pushed as a referrer) verifies; one signed by
another key or CA, a signature copied from another digest, none at all, or a certificate that has expired does
not; notation's trust policy levels and identities are honoured."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from helmop.sources import artifacts
from helmop.sources.errors import SourceError
from helmop.sources.repositories import Credentials, Repositories
from helmop.sources.verification import registry as signatures
from tests.registry import Registry
from tests.signing import NotationCA, cosign_key, cosign_sign, trust_policy
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


async def check(charts: Registry, tmp_path: Path, version: str, provider: str,
                entries: dict[str, bytes]) -> str | None:
    url = f"oci://127.0.0.1:{charts.port}/charts/app"
    repos = Repositories(tmp_path)
    manifest = await artifacts.manifest_of(repos, url, version, CREDS, insecure=True)
    assert manifest.digest == charts.digest_of(version)
    return await signatures.verify(repos, url, CREDS, True, manifest, provider, entries, "Secret shop/trust")


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
