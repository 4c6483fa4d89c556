"""A minimal OCI distribution server on loopback (token auth included), serving helm charts, and what signs
them: manifests pushed by tag or by digest (cosign's ``sha256-<hex>.sig``), and the referrers API (notation);
clients push to it as the distribution spec says (monolithic blob uploads, manifests by tag)."""

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
        self.by_digest: dict[str, bytes] = {}  # every manifest, by its digest
        for body in self.manifests.values():
            self.by_digest["sha256:" + hashlib.sha256(body).hexdigest()] = body
        self.referrers_api = True  # off: the referrers API answers 404 (the tag schema is used)
        self.page = 0  # tags per page of tags/list when a client asks with ?n= (0: all in one answer)
        self.next_page = ""  # a Link the first page sends instead of the real one (a hostile registry)
        self.uploads = 0
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
        app.router.add_get("/v2/charts/{name}/referrers/{digest}", self._referrers)
        app.router.add_post("/v2/charts/{name}/blobs/uploads/", self._start_upload)
        app.router.add_put("/v2/charts/{name}/blobs/uploads/{upload}", self._finish_upload)
        app.router.add_put("/v2/charts/{name}/manifests/{tag}", self._put_manifest)
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
        if not self.page or "n" not in request.query:
            return web.json_response({"name": request.match_info["name"], "tags": self.tags})
        # the distribution spec's pagination: n per page, after the tag `last`, a Link to the next page
        size = min(self.page, int(request.query["n"]))
        last = request.query.get("last")
        start = self.tags.index(last) + 1 if last in self.tags else 0
        page = self.tags[start:start + size]
        headers = {}
        if start + size < len(self.tags):
            target = self.next_page or f"{request.path}?n={size}&last={page[-1]}"
            headers["Link"] = f'<{target}>; rel="next"'
        return web.json_response({"name": request.match_info["name"], "tags": page}, headers=headers)

    def digest_of(self, tag: str) -> str:
        return "sha256:" + hashlib.sha256(self.manifests[tag]).hexdigest()

    def push(self, manifest: dict[str, object], blobs: list[bytes], tag: str = "") -> str:
        """A manifest and its blobs (by tag, or by digest alone); its digest."""
        for blob in blobs:
            self.blobs["sha256:" + hashlib.sha256(blob).hexdigest()] = blob
        body = json.dumps(manifest).encode()
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        self.by_digest[digest] = body
        if tag:
            self.manifests[tag] = body
        return digest

    async def _manifest(self, request: web.Request) -> web.Response:
        self._authorized(request)
        reference = request.match_info["tag"]
        body = self.by_digest.get(reference) if reference.startswith("sha256:") else self.manifests.get(reference)
        if body is None:
            raise web.HTTPNotFound()
        kind = json.loads(body).get("mediaType") or "application/vnd.oci.image.manifest.v1+json"
        return web.Response(body=body, content_type=kind)

    async def _referrers(self, request: web.Request) -> web.Response:
        self._authorized(request)
        if not self.referrers_api:
            raise web.HTTPNotFound()
        wanted, kind = request.match_info["digest"], request.query.get("artifactType")
        found = []
        for digest, body in self.by_digest.items():
            manifest = json.loads(body)
            if (manifest.get("subject") or {}).get("digest") == wanted and kind in (None, manifest.get("artifactType")):
                found.append({"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest,
                              "size": len(body), "artifactType": manifest.get("artifactType")})
        return web.json_response({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                                  "manifests": found}, content_type="application/vnd.oci.image.index.v1+json")

    async def _blob(self, request: web.Request) -> web.Response:  # GET, and HEAD (aiohttp routes it here)
        self._authorized(request)
        if request.match_info["digest"] not in self.blobs:
            raise web.HTTPNotFound()
        return web.Response(body=self.blobs[request.match_info["digest"]])

    async def _start_upload(self, request: web.Request) -> web.Response:
        self._authorized(request)
        self.uploads += 1
        return web.Response(status=202, headers={
            "Location": f"/v2/charts/{request.match_info['name']}/blobs/uploads/u{self.uploads}?state=x"})

    async def _finish_upload(self, request: web.Request) -> web.Response:
        self._authorized(request)
        data = await request.read()
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        if request.query.get("digest") != digest or request.query.get("state") != "x":
            raise web.HTTPBadRequest(text="digest invalid")
        self.blobs[digest] = data
        return web.Response(status=201, headers={"Docker-Content-Digest": digest})

    async def _put_manifest(self, request: web.Request) -> web.Response:
        self._authorized(request)
        body = await request.read()
        manifest = json.loads(body)
        missing = [d["digest"] for d in [manifest.get("config") or {}, *(manifest.get("layers") or [])]
                   if d and d.get("digest") not in self.blobs]
        if missing:
            raise web.HTTPBadRequest(text=f"blob unknown: {missing}")
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        self.by_digest[digest] = body
        tag = request.match_info["tag"]
        if not tag.startswith("sha256:"):
            self.manifests[tag] = body
            if tag not in self.tags:
                self.tags.append(tag)
        return web.Response(status=201, headers={"Docker-Content-Digest": digest})
