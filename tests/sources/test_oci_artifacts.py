"""Folders as OCI artifacts (helmop.sources.oci, artifacts): pushed by `helmop push artifact` to a loopback registry
in Flux's format, pulled and tagged back; an OCIRepository's layer selected as Flux selects it, extracted with its
ignore rules or copied; tags filtered by semverFilter; hostile layers (a link out, a path out, a size announced
beyond the limit, a digest that lies) refused by reason."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from helmop.api.repositories import FLUX_CONTENT_MEDIA_TYPE, parse_oci_repository
from helmop.cli.main import main
from helmop.sources import artifacts, oci, tarballs
from helmop.sources.errors import SourceError
from helmop.sources.repositories import Credentials, Repositories
from tests.registry import Registry

CREDS = Credentials(username="robot", password="pw")


@pytest.fixture
def registry() -> Iterator[Registry]:
    reg = Registry({})
    yield reg
    reg.loop.call_soon_threadsafe(reg.loop.stop)


def folder(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_push_pull_and_tag_artifact_from_the_command_line(registry: Registry, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    src = folder(tmp_path / "src", {"apps/app.yaml": "kind: A\n", "logo.png": "png", ".git/HEAD": "x"})
    url = f"oci://127.0.0.1:{registry.port}/charts/config"
    common = ["--creds", "robot:pw", "--insecure-registry"]
    assert main(["push", "artifact", f"{url}:v1", "--path", str(src), "--source", "https://git.example/config",
                 "--revision", "main@sha1:abc", "-a", "team=payments", "--reproducible", *common]) == 0
    said = capsys.readouterr().out
    manifest = json.loads(registry.manifests["v1"])
    assert said.strip().endswith(f"{url}@sha256:{hashlib.sha256(registry.manifests['v1']).hexdigest()}")
    assert manifest["layers"][0]["mediaType"] == FLUX_CONTENT_MEDIA_TYPE
    assert manifest["config"]["mediaType"] == "application/vnd.cncf.flux.config.v1+json"
    assert manifest["annotations"] == {"org.opencontainers.image.created": "1970-01-01T00:00:00Z",
                                       "org.opencontainers.image.source": "https://git.example/config",
                                       "org.opencontainers.image.revision": "main@sha1:abc", "team": "payments"}
    first = registry.digest_of("v1")
    assert main(["push", "artifact", f"{url}:again", "--path", str(src), "--source", "https://git.example/config",
                 "--revision", "main@sha1:abc", "-a", "team=payments", "--reproducible", *common]) == 0
    assert registry.digest_of("again") == first  # reproducible: the same files, the same digest
    assert main(["tag", "artifact", f"{url}:v1", "--tag", "prod", *common]) == 0
    assert registry.digest_of("prod") == first
    out = tmp_path / "out"
    out.mkdir()
    assert main(["pull", "artifact", f"{url}:prod", "-o", str(out), *common]) == 0
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == ["apps/app.yaml"]
    assert "revision main@sha1:abc" in capsys.readouterr().out
    assert main(["pull", "artifact", f"{url}:missing", "-o", str(out), *common]) == 2


async def test_an_ocirepository_extracts_with_ignore_rules_or_copies(registry: Registry, tmp_path: Path) -> None:
    repos = Repositories(tmp_path / "cache")
    url = f"oci://127.0.0.1:{registry.port}/charts/config"
    tree = tarballs.Tree({"apps/app.yaml": b"kind: A\n", "apps/notes.md": b"n", "img/a.png": b"p"})
    manifest, config, layer = oci.build(tree, "src", "rev", {})
    await oci.push(repos, oci.Reference(url, "1.2.0"), manifest, [config, layer], CREDS, True)
    await oci.push(repos, oci.Reference(url, "1.3.0-rc1"), manifest, [config, layer], CREDS, True)

    spec = parse_oci_repository({"url": url, "insecure": True, "ref": {"semver": ">=1.0.0-0"}})
    found = await artifacts.resolve(repos, spec, CREDS)
    assert found.revision.startswith("1.3.0-rc1@sha256:") and found.layer_type == FLUX_CONTENT_MEDIA_TYPE
    filtered = parse_oci_repository({"url": url, "insecure": True,
                                     "ref": {"semver": ">=1.0.0-0", "semverFilter": "^1\\.[0-9]+\\.[0-9]+$"}})
    assert (await artifacts.resolve(repos, filtered, CREDS)).revision.startswith("1.2.0@")
    extracted = await artifacts.config(repos, spec, found.digest, CREDS)
    assert sorted(extracted.files) == ["apps/app.yaml", "apps/notes.md"]  # Flux's defaults: no *.png
    ignoring = parse_oci_repository({"url": url, "insecure": True, "ignore": "*.md\n"})
    assert sorted((await artifacts.config(repos, ignoring, found.digest, CREDS)).files) == ["apps/app.yaml",
                                                                                             "img/a.png"]
    copied = parse_oci_repository({"url": url, "insecure": True, "ignore": "*.md\n",
                                   "layerSelector": {"operation": "copy", "mediaType": FLUX_CONTENT_MEDIA_TYPE}})
    assert len((await artifacts.config(repos, copied, found.digest, CREDS)).files) == 3  # copy: as it is
    with pytest.raises(SourceError, match="no layer of media type"):
        await artifacts.resolve(repos, parse_oci_repository({"url": url, "insecure": True, "ref": {"tag": "1.2.0"},
                                                             "layerSelector": {"mediaType": "application/x-other"}}),
                                CREDS)


def _layer(*members: tarfile.TarInfo) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for member in members:
            tar.addfile(member, io.BytesIO(b"x" * member.size) if member.isfile() else None)
    return gzip.compress(raw.getvalue())


def _push_raw(registry: Registry, tag: str, layer: bytes, size: int = 0) -> str:
    digest = "sha256:" + hashlib.sha256(layer).hexdigest()
    registry.push({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                   "layers": [{"mediaType": FLUX_CONTENT_MEDIA_TYPE, "digest": digest, "size": size or len(layer)}]},
                  [layer], tag=tag)
    return digest


@pytest.mark.parametrize(("member", "reason"), [
    (tarfile.TarInfo("../outside.yaml"), "outside its root"),
    (tarfile.TarInfo("/etc/passwd"), "outside its root"),
])
async def test_hostile_layers_are_refused_by_reason(registry: Registry, tmp_path: Path, member: tarfile.TarInfo,
                                                    reason: str) -> None:
    member.size = 3
    link = tarfile.TarInfo("deploy/link.yaml")
    link.type, link.linkname = tarfile.SYMTYPE, "/var/run/secrets/kubernetes.io/serviceaccount/token"
    url = f"oci://127.0.0.1:{registry.port}/charts/hostile"
    spec = parse_oci_repository({"url": url, "insecure": True})
    repos = Repositories(tmp_path / "cache")
    with pytest.raises(SourceError, match=reason) as refused:
        await artifacts.config(repos, spec, _push_raw(registry, "a", _layer(member)), CREDS)
    assert refused.value.reason == "InvalidPath"
    with pytest.raises(SourceError, match="a link or a device") as linked:
        await artifacts.config(repos, spec, _push_raw(registry, "b", _layer(link)), CREDS)
    assert linked.value.reason == "InvalidPath"
    assert not list((tmp_path / "cache").rglob("*.tgz"))  # nothing refused is cached


async def test_a_layer_larger_than_the_limit_or_lying_about_its_digest_is_refused(registry: Registry,
                                                                                  tmp_path: Path) -> None:
    url = f"oci://127.0.0.1:{registry.port}/charts/big"
    spec = parse_oci_repository({"url": url, "insecure": True})
    repos = Repositories(tmp_path / "cache", chart_max_size=1 << 20)
    small = _layer(tarfile.TarInfo("a.yaml"))
    _push_raw(registry, "announced", small, size=10 << 30)  # a manifest announcing 10 GiB: refused unread
    with pytest.raises(SourceError, match="announced at 10737418240 bytes") as announced:
        await artifacts.layer_of(repos, spec, f"announced@{registry.digest_of('announced')}", CREDS)
    assert announced.value.reason == "ArtifactTooLarge"
    noise = os.urandom(2 << 20)  # 2 MiB that do not compress: more than the 1 MiB limit on the wire
    with pytest.raises(SourceError) as refused:
        await artifacts.config(repos, spec, _push_raw(registry, "big", noise), CREDS)
    assert refused.value.reason == "ArtifactTooLarge"
    registry.blobs["sha256:" + "0" * 64] = small  # served under a digest it does not have
    with pytest.raises(SourceError) as lying:
        await artifacts.config(repos, spec, "sha256:" + "0" * 64, CREDS)
    assert lying.value.reason == "ArtifactDigestMismatch"
