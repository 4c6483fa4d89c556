"""The webhook server: helmop's push webhook, and Flux's Receivers (``/hook/<digest>``, :mod:`.receivers`).

The push webhook: ``POST /hooks/<namespace>/<gitrepository>`` makes that repository fetch now.

Accepted when the call proves it knows the token in the Secret named by ``spec.webhook.secretRef``
(key ``token``): GitHub's ``X-Hub-Signature-256`` (HMAC-SHA256 of the body), GitLab's
``X-Gitlab-Token``, or a generic ``X-Signature: sha256=<hex HMAC of the body>``. Anything else gets
401 and changes nothing. An unknown repository, one without a webhook and a bad signature all get the
same 401 answer, so which repositories exist cannot be learned without a token.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
from datetime import UTC, datetime

from aiohttp import web

from helmop.api.kinds import GITREPOSITORY, REQUESTED_AT, is_namespace_name, is_object_name

from .kube import Kube
from .receivers import Receivers

log = logging.getLogger(__name__)


def signature_valid(token: bytes, body: bytes, headers: dict[str, str]) -> bool:
    expected = "sha256=" + hmac.new(token, body, hashlib.sha256).hexdigest()
    for header in ("X-Hub-Signature-256", "X-Signature"):
        given = headers.get(header)
        if given is not None:
            return hmac.compare_digest(given.strip().lower(), expected)
    gitlab = headers.get("X-Gitlab-Token")
    if gitlab is not None:
        return hmac.compare_digest(gitlab.encode(), token)
    return False


def app(kube: Kube, receivers: Receivers | None = None) -> web.Application:
    async def hook(request: web.Request) -> web.Response:
        # aiohttp decoded the path once (%2F is a "/" inside a segment now): anything but a namespace and a
        # name is refused before any lookup, with the same answer as a bad signature.
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        if not (is_namespace_name(namespace) and is_object_name(name)):
            log.warning("webhook refused: %r is not a namespace/name path", request.path[:300])
            return web.json_response({"error": "invalid or missing signature"}, status=401)
        body = await request.read()
        repo = await kube.get(GITREPOSITORY.path(namespace, name))
        secret_name = ((((repo or {}).get("spec") or {}).get("webhook") or {}).get("secretRef") or {}).get("name")
        secret = await kube.get(f"/api/v1/namespaces/{namespace}/secrets/{secret_name}") if secret_name else None
        raw = ((secret or {}).get("data") or {}).get("token")
        headers = {k: v for k, v in request.headers.items()}
        if not raw or not signature_valid(base64.b64decode(raw), body, headers):
            why = "no such GitRepository" if repo is None else "no webhook secret" if not raw else "bad signature"
            log.warning("webhook for %s/%s refused: %s", namespace, name, why)
            return web.json_response({"error": "invalid or missing signature"}, status=401)
        if request.headers.get("X-GitHub-Event") == "ping":
            return web.json_response({"ok": True, "event": "ping"})
        # Recorded on the object as a reconcile request rather than only woken here: the replica that
        # answered may be a standby (or another shard's), and the one that acts sees the annotation.
        stamp = datetime.now(UTC).isoformat()
        await kube.merge_patch(GITREPOSITORY.path(namespace, name),
                                   {"metadata": {"annotations": {REQUESTED_AT: stamp}}})
        return web.json_response({"ok": True}, status=202)

    async def health(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    application = web.Application(client_max_size=5 * 1024 * 1024)
    application.router.add_post("/hooks/{namespace}/{name}", hook)
    if receivers is not None:  # any method, as Flux's receiver server takes them
        application.router.add_route("*", "/hook/{digest:.*}", receivers.handle)
    application.router.add_get("/healthz", health)
    return application
