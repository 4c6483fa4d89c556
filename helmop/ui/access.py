"""Who is looking, and the client that reads and acts with their rights, never the UI's own.

* ``LocalAccess`` (``helmop ui`` on a workstation): the viewer is the kubeconfig's user; the server listens on
  127.0.0.1 only and answers only requests addressed to it by that name (no DNS rebinding).
* ``TokenAccess`` (in a cluster): each request carries a bearer token, in ``Authorization`` (an OIDC proxy's)
  or in the cookie the login form sets. The UI's own account asks TokenReview whom it names, and every request
  of that viewer then impersonates that user and groups: RBAC judges the viewer, never the UI. Answers are
  kept a minute, by the token's digest (the token itself is kept nowhere but in the viewer's cookie).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Protocol

from aiohttp import web

from helmop.infra.kube import Kube, KubeError

COOKIE = "helmop-token"
REVIEWED_FOR = 60.0  # seconds a TokenReview's answer is trusted (a revoked token stops working within this)
MAX_TOKEN = 16 << 10  # a JWT from an OIDC provider is a few kilobytes
MAX_VIEWERS = 1000  # answers kept at once


@dataclass(frozen=True)
class Viewer:
    name: str  # shown in the page's header
    kube: Kube  # acting as the viewer
    key: str  # what this viewer's anti-forgery token is derived from (never the bearer token itself)
    namespaces: tuple[str, ...]  # where to look when the viewer may not list every namespace


class Access(Protocol):
    login: bool  # whether the viewer logs in with a token (the login page exists)

    async def viewer(self, request: web.Request) -> Viewer | None: ...

    async def of_token(self, token: str) -> Viewer | None: ...

    async def close(self) -> None: ...


class LocalAccess:
    login = False

    def __init__(self, kube: Kube, user: str, namespace: str) -> None:
        self._viewer = Viewer(user, kube, "kubeconfig", (namespace,))

    async def viewer(self, request: web.Request) -> Viewer | None:
        return self._viewer

    async def of_token(self, token: str) -> Viewer | None:
        return None  # the kubeconfig decides: no one logs in

    async def close(self) -> None:
        await self._viewer.kube.close()


def token_of(request: web.Request) -> str:
    header = request.headers.get("Authorization", "")
    return header[7:].strip() if header[:7].lower() == "bearer " else request.cookies.get(COOKIE, "")


class TokenAccess:
    login = True

    def __init__(self, kube: Kube) -> None:
        self.kube = kube  # the UI's own account: TokenReview only
        self._reviewed: dict[str, tuple[float, Viewer | None]] = {}

    async def viewer(self, request: web.Request) -> Viewer | None:
        return await self.of_token(token_of(request))

    async def of_token(self, token: str) -> Viewer | None:
        if not (0 < len(token) <= MAX_TOKEN and token.isascii() and token.isprintable()):
            return None
        digest = hashlib.sha256(token.encode()).hexdigest()
        now = time.monotonic()
        kept = self._reviewed.get(digest)
        if kept is not None and now - kept[0] < REVIEWED_FOR:
            return kept[1]
        viewer = await self._review(token, digest)
        await self._forget_expired(now)
        self._reviewed[digest] = (now, viewer)
        return viewer

    async def _review(self, token: str, digest: str) -> Viewer | None:
        try:
            review = await self.kube.request("POST", "/apis/authentication.k8s.io/v1/tokenreviews", {
                "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}},
                attempts=2)
        except KubeError as exc:
            raise web.HTTPServiceUnavailable(text=f"the token cannot be checked: {exc.message}") from None
        status = review.get("status") or {}
        user = status.get("user") or {}
        name = str(user.get("username") or "")
        if not status.get("authenticated") or not name:
            return None
        groups = tuple(str(g) for g in user.get("groups") or [])
        namespaces = (name.split(":")[2],) if name.startswith("system:serviceaccount:") else ()
        return Viewer(name, self.kube.acting_as(name, groups), digest, namespaces)

    async def _forget_expired(self, now: float) -> None:
        expired = [d for d, (at, _) in self._reviewed.items() if now - at >= REVIEWED_FOR]
        if len(self._reviewed) >= MAX_VIEWERS:  # a flood of distinct tokens: forget the oldest answers too
            expired += sorted(self._reviewed, key=lambda d: self._reviewed[d][0])[:len(self._reviewed) // 2]
        for digest in set(expired):
            _, viewer = self._reviewed.pop(digest)
            if viewer is not None and not any(v is not None and v.kube is viewer.kube
                                              for _, v in self._reviewed.values()):
                await self.kube.forget(viewer.kube.impersonate, viewer.kube.groups)

    async def close(self) -> None:
        await self.kube.close()
