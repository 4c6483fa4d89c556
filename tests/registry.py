"""A minimal OCI distribution server on loopback (token auth included), serving helm charts."""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading

from aiohttp import web

from helmop.api.repositories import HELM_CHART_MEDIA_TYPE as HELM_CHART_LAYER


class Registry:
    """Serves /v2/charts/<name>/{tags/list,manifests/<tag>,blobs/<digest>} behind bearer-token auth."""

    def __init__(self, charts: dict[str, bytes]) -> None:
        self.blobs: dict[str, bytes] = {}
        self.manifests: dict[str, bytes] = {}
        self.tags: list[str] = []
        self.listed = 0  # tags/list requests answered (the benchmark counts them)
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
        self.listed += 1
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
