"""Charts from an OCI registry: resolution over the tags list and a pull over the registry API,
against a minimal OCI distribution server on loopback (token auth included)."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from helmop.sources.errors import SourceError
from helmop.sources.repositories import Credentials, Repositories
from tests.registry import Registry
from tests.tools import tool


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    root = tmp_path_factory.mktemp("oci")
    subprocess.run([tool("helm"), "create", str(root / "app")], check=True, capture_output=True)
    charts = {}
    for version in ("1.0.0", "1.1.0", "2.0.0"):
        out = root / version
        subprocess.run([tool("helm"), "package", str(root / "app"), "--version", version, "-d", str(out)],
                       check=True, capture_output=True)
        charts[version] = next(out.glob("*.tgz")).read_bytes()
    reg = Registry(charts)
    yield reg
    reg.loop.call_soon_threadsafe(reg.loop.stop)


async def test_oci_constraint_resolution_and_pull(registry: Registry, tmp_path: Path) -> None:
    repos = Repositories(tmp_path)
    url = f"oci://127.0.0.1:{registry.port}/charts/app"
    creds = Credentials(username="robot", password="pw")
    resolved = await repos.resolve(url, "app", "^1.0", creds, insecure=True)
    assert resolved.version == "1.1.0"
    path = await repos.fetch(resolved, url, creds, insecure=True)
    assert path.read_bytes() == registry.blobs["sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()]
    listed = subprocess.run([tool("helm"), "show", "chart", str(path)], capture_output=True, text=True, check=True)
    assert "version: 1.1.0" in listed.stdout
    again = await repos.fetch(resolved, url, creds, insecure=True)
    assert again == path and repos.hits == 1 and repos.misses == 1  # an exact version is fetched once
    exact = await repos.resolve(url, "app", "2.0.0", creds, insecure=True)
    assert exact.version == "2.0.0"  # no registry round trip needed for an exact version
    with pytest.raises(SourceError) as missing:
        await repos.resolve(url, "app", "^3", creds, insecure=True)
    assert missing.value.reason == "VersionNotFound"
    with pytest.raises(SourceError) as denied:
        await repos.resolve(url, "app", "^1", Credentials(), insecure=True)
    assert denied.value.reason == "RepositoryAuthFailed"
