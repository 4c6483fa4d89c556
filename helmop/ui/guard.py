"""What every answer of the UI carries and every request must pass: security headers (a CSP without inline
scripts or styles), the Host check that defeats DNS rebinding of a local UI, and the anti-forgery token every
POST must carry (derived from the viewer, so a page of another site can neither read nor forge it), with the
browser's Origin and Sec-Fetch-Site checked as well."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit, urlunsplit

from aiohttp import web

HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                                "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",  # (no-referrer would make the browser send `Origin: null` with forms)
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
}
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def local_path(target: str) -> str:
    """Where to go after logging in: a path of this UI, read as a browser reads it (it drops tabs and line breaks
    anywhere, and takes a backslash for a slash), never another site; "/" otherwise."""
    if "\\" in target or any(ord(c) < 0x20 or ord(c) == 0x7F for c in target):
        return "/"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not parts.path.startswith("/") or parts.path.startswith("//"):
        return "/"
    return urlunsplit(("", "", parts.path, parts.query, parts.fragment))


class Guard:
    def __init__(self, hosts: frozenset[str] | None) -> None:
        self.hosts = hosts  # the Host headers answered (None: any, behind a Service or an ingress)
        self._key = secrets.token_bytes(32)  # per process: a restart makes open forms ask again

    def csrf(self, viewer_key: str) -> str:
        return hmac.new(self._key, viewer_key.encode(), hashlib.sha256).hexdigest()

    def check_form(self, request: web.Request, viewer_key: str, sent: str) -> None:
        """Refuse a POST that another site's page could have made."""
        site = request.headers.get("Sec-Fetch-Site", "same-origin")
        origin = request.headers.get("Origin")
        # the host only: behind a proxy that ends TLS, the browser's scheme is not the one seen here
        if site not in ("same-origin", "none") or (origin is not None and urlsplit(origin).netloc != request.host):
            raise web.HTTPForbidden(text="a request from another site is refused")
        if not hmac.compare_digest(sent.encode(), self.csrf(viewer_key).encode()):
            raise web.HTTPForbidden(text="the form is stale or forged: reload the page and try again")

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if self.hosts is not None and request.host not in self.hosts:
            raise web.HTTPMisdirectedRequest(text=f"this UI answers only to {', '.join(sorted(self.hosts))}")
        return await handler(request)

    @staticmethod
    async def on_prepare(request: web.Request, response: web.StreamResponse) -> None:
        """Headers on every answer, errors and streams included (a middleware would be too late for a stream)."""
        response.headers.update(HEADERS)
        if not request.path.startswith("/static/"):
            response.headers["Cache-Control"] = "no-store"  # what a viewer may see is theirs alone
