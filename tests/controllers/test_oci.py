"""Charts from an OCI registry: resolution over the tags list and a pull over the registry API,
against a minimal OCI distribution server on loopback (token auth included)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from helmop.sources.errors import SourceError
from helmop.sources.repositories import HELM_CHART_LAYER, Credentials, Repositories
from tests.conftest import tool


class Registry:
    """Serves /v2/charts/<name>/{tags/list,manifests/<tag>,blobs/<digest>} behind bearer-token auth."""

    def __init__(self, charts: dict[str, bytes]) -> None:
        self.blobs: dict[str, bytes] = {}
        self.manifests: dict[str, bytes] = {}
        self.tags: list[str] = []
        for tag, data in charts.items():
            digest = "sha256:" + hashlib.sha256(data).hexdigest()
            self.blobs[digest] = data
            self.manifests[tag] = json.dumps({"schemaVersion": 2, "layers": [
                {"mediaType": HELM_CHART_LAYER, "digest": digest, "size": len(data)}]}).encode()
            self.tags.append(tag)
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()
        self.ready.wait(10)

    def _serve(self) -> None:
        app = web.Application()
        app.router.add_get("/token", self._token)
        app.router.add_get("/v2/charts/{name}/tags/list", self._tags)
        app.router.add_get("/v2/charts/{name}/manifests/{tag}", self._manifest)
        app.router.add_get("/v2/charts/{name}/blobs/{digest}", self._blob)
        runner = web.AppRunner(app)
        self.loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.port = runner.addresses[0][1]
        self.ready.set()
        self.loop.run_forever()

    def _authorized(self, request: web.Request) -> None:
        if request.headers.get("Authorization") != "Bearer good-token":
            realm = f"http://127.0.0.1:{self.port}/token"
            raise web.HTTPUnauthorized(headers={"WWW-Authenticate": f'Bearer realm="{realm}",service="reg"'})

    async def _token(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") is None:  # basic auth required for the token
            return web.Response(status=401)
        return web.json_response({"token": "good-token"})

    async def _tags(self, request: web.Request) -> web.Response:
        self._authorized(request)
        return web.json_response({"name": request.match_info["name"], "tags": self.tags})

    async def _manifest(self, request: web.Request) -> web.Response:
        self._authorized(request)
        body = self.manifests.get(request.match_info["tag"])
        if body is None:
            raise web.HTTPNotFound()
        return web.Response(body=body, content_type="application/vnd.oci.image.manifest.v1+json")

    async def _blob(self, request: web.Request) -> web.Response:
        self._authorized(request)
        return web.Response(body=self.blobs[request.match_info["digest"]])


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
