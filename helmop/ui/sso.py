"""``helmop ui --auth oidc``: viewers sign in with an OIDC issuer (authorization code with PKCE), and every request
of a signed-in viewer impersonates the user and groups its ID token's claims map to (:class:`ClaimMapping`, as
kube-apiserver's flags map them), with the UI's own account: RBAC judges the viewer.

The browser keeps two sealed cookies (HMAC with the session key, each with its expiry; nothing is kept here, so
replicas sharing the key answer alike): the sign-in under way (state, nonce, PKCE verifier, where to go after; ten
minutes, sent back to the callback only), and the session (the mapped user and groups, never the ID token). Both
are HttpOnly, SameSite=Lax (the issuer's answer is a navigation from another site: a Strict cookie would not come
with it) and Secure when the UI is served over https. Logging out (``/logout``) drops the session cookie.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from aiohttp import web

from helmop.api.jwts import TokenRefused
from helmop.api.signin import FLOW, MAX_SEALED, SESSION, ClaimMapping, Sealer, pkce
from helmop.infra.kube import Kube
from helmop.infra.oidc import IssuerUnavailable
from helmop.infra.signin import Client, Provider, SignInFailed

from .access import COOKIE, Viewer
from .guard import local_path
from .pages import Pages

START = "/login/sso"  # where the login page's button leads: off to the issuer
FLOW_COOKIE = "helmop-sign-in"
FLOW_LIFETIME = 600  # seconds between leaving for the issuer and coming back
IDLE = 600.0  # seconds a viewer's client is kept after their last request
MAX_VIEWERS = 1000  # clients kept at once
MAX_CODE = 2048  # characters of an authorization code

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OidcSettings:
    client: Client
    mapping: ClaimMapping
    session_key: bytes
    session_lifetime: float  # seconds

    @property
    def callback(self) -> str:
        return urlsplit(self.client.redirect_url).path


class OidcAccess:
    login = True

    def __init__(self, kube: Kube, settings: OidcSettings) -> None:
        self.kube = kube  # the UI's own account: it impersonates each viewer
        self.settings = settings
        self.sealer = Sealer(settings.session_key)
        self.provider = Provider(settings.client)
        self._seen: dict[tuple[str, tuple[str, ...]], float] = {}

    async def viewer(self, request: web.Request) -> Viewer | None:
        session = self.sealer.open(SESSION, request.cookies.get(COOKIE, ""), time.time())
        if session is None:
            return None
        user, groups = str(session["u"]), tuple(str(g) for g in session["g"])
        now = time.monotonic()
        await self._forget_idle(now)
        self._seen[(user, groups)] = now
        return Viewer(user, self.kube.acting_as(user, groups), str(session["s"]), ())

    async def of_token(self, token: str) -> Viewer | None:
        return None  # viewers sign in with the issuer: a pasted token is not taken

    def session(self, user: str, groups: tuple[str, ...]) -> str:
        """The session cookie's value (its own id: what the viewer's anti-forgery token derives from)."""
        sealed = self.sealer.seal(SESSION, {"u": user, "g": list(groups), "s": secrets.token_urlsafe(16)},
                                  time.time() + self.settings.session_lifetime)
        if len(sealed) > MAX_SEALED:
            raise TokenRefused(f"{len(groups)} groups do not fit in a session cookie: map fewer (a groups claim of "
                               "this application's groups only, or --oidc-groups-claim)")
        return sealed

    async def _forget_idle(self, now: float) -> None:
        idle = [k for k, at in self._seen.items() if now - at >= IDLE]
        if len(self._seen) >= MAX_VIEWERS:  # many viewers at once: the longest unseen go too
            idle += sorted(self._seen, key=self._seen.__getitem__)[:len(self._seen) // 2]
        for key in set(idle):
            del self._seen[key]
            await self.kube.forget(*key)

    async def close(self) -> None:
        await self.kube.close()


class SignIn:
    """The sign-in's two steps: off to the issuer (``START``), and back (the redirect URL's path)."""

    def __init__(self, access: OidcAccess, pages: Pages) -> None:
        self.access, self.pages = access, pages
        self.settings = access.settings

    def routes(self) -> list[web.RouteDef]:
        return [web.get(START, self.start), web.get(self.settings.callback, self.callback)]

    def _secure(self, request: web.Request) -> bool:
        return request.secure or self.settings.client.redirect_url.startswith("https://")

    async def start(self, request: web.Request) -> web.StreamResponse:
        state, nonce = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        verifier, challenge = pkce()
        try:
            url = await self.access.provider.authorization_url(state=state, nonce=nonce, challenge=challenge)
        except IssuerUnavailable as exc:
            return self._refused(request, 503, str(exc))
        flow = self.access.sealer.seal(FLOW, {"state": state, "nonce": nonce, "verifier": verifier,
                                              "next": local_path(request.query.get("next", "/"))},
                                       time.time() + FLOW_LIFETIME)
        response = web.HTTPFound(url)
        response.set_cookie(FLOW_COOKIE, flow, path=self.settings.callback, max_age=FLOW_LIFETIME, httponly=True,
                            samesite="Lax", secure=self._secure(request))
        raise response

    async def callback(self, request: web.Request) -> web.StreamResponse:
        flow = self.access.sealer.open(FLOW, request.cookies.get(FLOW_COOKIE, ""), time.time())
        try:
            user, groups, after = await self._identity(request, flow)
            session = self.access.session(user, groups)
        except (TokenRefused, SignInFailed, IssuerUnavailable) as exc:
            log.info("a sign-in is refused: %s", exc)
            return self._refused(request, 503 if isinstance(exc, IssuerUnavailable) else 401, str(exc))
        log.info("%s signed in (groups: %s)", user, ", ".join(groups) or "none")
        response = web.HTTPSeeOther(after)
        response.set_cookie(COOKIE, session, path="/", max_age=int(self.settings.session_lifetime), httponly=True,
                            samesite="Lax", secure=self._secure(request))
        response.del_cookie(FLOW_COOKIE, path=self.settings.callback)
        raise response

    async def _identity(self, request: web.Request, flow: dict[str, object] | None
                        ) -> tuple[str, tuple[str, ...], str]:
        """Whom the issuer's answer signs in (its code redeemed, the ID token checked, its claims mapped), and
        where they were going."""
        query = request.query
        if "error" in query:  # (the issuer's words, bounded: they are shown on the page)
            said = f"{query['error'][:100]} {query.get('error_description', '')[:300]}".strip()
            raise SignInFailed(f"the issuer did not sign you in: {said}")
        if flow is None:
            raise SignInFailed("no sign-in of this browser is under way here (or it took over ten minutes): "
                               "sign in again")
        if not hmac.compare_digest(query.get("state", "").encode(), str(flow["state"]).encode()):
            raise SignInFailed("the issuer's answer is not to this browser's sign-in (its state differs): "
                               "sign in again")
        code = query.get("code", "")
        if not code or len(code) > MAX_CODE:
            raise SignInFailed("the issuer's answer carries no authorization code")
        id_token = await self.access.provider.redeem(code, str(flow["verifier"]))
        claims = await self.access.provider.claims(id_token, str(flow["nonce"]))
        user, groups = self.settings.mapping.identity(claims)
        return user, groups, local_path(str(flow["next"]))

    def _refused(self, request: web.Request, status: int, reason: str) -> web.Response:
        response = self.pages.render(request, None, "login.html", status=status, title="Log in", next="/",
                                     failed=f"Not signed in: {reason}")
        response.del_cookie(FLOW_COOKIE, path=self.settings.callback)
        return response
