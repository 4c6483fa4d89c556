"""``helmop mcp --http``: the SDK's streamable HTTP transport, behind the web UI's authentication.

* ``--auth kubeconfig``: every request is the kubeconfig's user's; the server listens on loopback only, and the
  SDK answers only requests addressed to 127.0.0.1 or localhost (no DNS rebinding), as ``helmop ui`` does.
* ``--auth token``: every HTTP request carries ``Authorization: Bearer``, checked with TokenReview as the UI
  checks it (:class:`helmop.ui.access.TokenAccess`, its answers kept a minute); the tools of that request then
  impersonate that user and groups, so RBAC judges the caller, never this server. No token, or one the API
  server does not know: 401, before the MCP layer sees the request."""

from __future__ import annotations

import dataclasses
import json
import socket
from collections.abc import Callable
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from helmop.ui.access import TokenAccess

from .reads import Caller

PATH = "/mcp"
SCOPE_KEY = "helmop.caller"  # where the authenticated caller travels with the request, to the tools it runs


class Authenticated:
    """ASGI in front of the SDK's app: the caller of every HTTP request from its bearer token, or 401."""

    def __init__(self, app: ASGIApp, access: TokenAccess, base: Caller) -> None:
        self.app, self.access, self.base = app, access, base

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # (the lifespan: the SDK's session manager starting and stopping)
            await self.app(scope, receive, send)
            return
        header = Headers(scope=scope).get("authorization", "")
        token = header[7:].strip() if header[:7].lower() == "bearer " else ""
        viewer = await self.access.of_token(token)  # (TokenReview unreachable: an error, 500)
        if viewer is None:
            await _unauthorized(send)
            return
        # the tools' namespace when they name none: a ServiceAccount's own, else the server's -n
        scope[SCOPE_KEY] = dataclasses.replace(self.base, kube=viewer.kube,
                                               namespace=(*viewer.namespaces, self.base.namespace)[0])
        await self.app(scope, receive, send)


async def _unauthorized(send: Send) -> None:
    body = json.dumps({"error": "a bearer token the Kubernetes API server knows is needed (Authorization: Bearer "
                                "...)"}).encode()
    await send({"type": "http.response.start", "status": 401, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"www-authenticate", b'Bearer realm="helmop"')]})
    await send({"type": "http.response.body", "body": body})


def caller_of(base: Caller, token_auth: bool) -> Callable[[Any], Caller]:
    """Who a request's caller is: the one :class:`Authenticated` found for its HTTP request, or ``base``."""
    if not token_auth:
        return lambda _: base

    def of(request: Any) -> Caller:
        caller = request.scope.get(SCOPE_KEY) if request is not None else None
        if not isinstance(caller, Caller):  # (never: every HTTP request passes Authenticated first)
            raise PermissionError("a request without an authenticated caller")
        return caller
    return of


async def serve(server: MCPServer, *, address: str, port: int, access: TokenAccess | None, base: Caller,
                announce: Callable[[str], None]) -> None:
    """Serve until SIGINT or SIGTERM (uvicorn's own handlers end it)."""
    app: ASGIApp = server.streamable_http_app(streamable_http_path=PATH, host=address)
    if access is not None:
        app = Authenticated(app, access, base)
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.create_server((address, port), family=family)  # bound before it is announced (port 0: any)
    bound = sock.getsockname()[1]
    host = "127.0.0.1" if address in ("", "0.0.0.0") else f"[{address}]" if ":" in address else address
    announce(f"http://{host}:{bound}{PATH}")
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])
