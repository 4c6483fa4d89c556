"""The web UI's OIDC provider, as a relying party talks to it: its discovery document (where to send the browser,
where to redeem a code), the code redeemed for an ID token (with the PKCE verifier, and the client's secret when it
has one), and that token checked with the issuer's keys (:mod:`helmop.infra.oidc`, fetched again once when the token
names a key the set lacks: a rotation). The issuer is the administrator's choice, so any address is reached (a Dex
inside the cluster included)."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import aiohttp

from helmop.api.addresses import Policy
from helmop.api.errors import describe
from helmop.api.jwts import UnknownKey
from helmop.api.signin import id_token_claims

from .oidc import MAX_ANSWER, Issuers, IssuerUnavailable

_TIMEOUT = aiohttp.ClientTimeout(total=10)
ANYWHERE = Policy(refused=frozenset(), rule="")  # the administrator names the issuer, not a tenant


class SignInFailed(Exception):
    """The provider did not give an ID token for the code (the message says why, never a token)."""


@dataclass(frozen=True)
class Endpoints:
    authorization: str
    token: str
    secret_in_body: bool  # client_secret_post: the provider does not take client_secret_basic


@dataclass(frozen=True)
class Client:
    issuer: str
    client_id: str
    client_secret: str  # "" for a public client (PKCE alone)
    redirect_url: str
    scopes: tuple[str, ...]


class Provider:
    def __init__(self, client: Client) -> None:
        self.client = client
        self.issuers = Issuers(ANYWHERE)
        self._endpoints: Endpoints | None = None
        self._lock = asyncio.Lock()

    async def endpoints(self) -> Endpoints:
        """Read from the discovery document once (until it is read, each sign-in tries again)."""
        async with self._lock:
            if self._endpoints is None:
                self._endpoints = await self._discover()
            return self._endpoints

    async def _discover(self) -> Endpoints:
        issuer = self.client.issuer
        found = await _json("GET", issuer.rstrip("/") + "/.well-known/openid-configuration")
        if found.get("issuer") != issuer:
            raise IssuerUnavailable(f"the discovery document of {issuer} names another issuer")
        urls = [found.get("authorization_endpoint"), found.get("token_endpoint")]
        if not all(isinstance(u, str) and u.startswith(("https://", "http://")) for u in urls):
            raise IssuerUnavailable(f"the discovery document of {issuer} names no authorization or token endpoint")
        methods = found.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
        return Endpoints(str(urls[0]), str(urls[1]), "client_secret_basic" not in methods)

    async def authorization_url(self, *, state: str, nonce: str, challenge: str) -> str:
        endpoint = (await self.endpoints()).authorization
        query = urlencode({"response_type": "code", "client_id": self.client.client_id,
                           "redirect_uri": self.client.redirect_url, "scope": " ".join(self.client.scopes),
                           "state": state, "nonce": nonce, "code_challenge": challenge,
                           "code_challenge_method": "S256"})
        return f"{endpoint}{'&' if '?' in endpoint else '?'}{query}"

    async def redeem(self, code: str, verifier: str) -> str:
        """The ID token the token endpoint gives for ``code``."""
        endpoints, client = await self.endpoints(), self.client
        form = {"grant_type": "authorization_code", "code": code, "redirect_uri": client.redirect_url,
                "code_verifier": verifier, "client_id": client.client_id}
        auth = None
        if client.client_secret and endpoints.secret_in_body:
            form["client_secret"] = client.client_secret
        elif client.client_secret:  # RFC 6749 2.3.1: each part form-encoded first
            auth = aiohttp.BasicAuth(_form(client.client_id), _form(client.client_secret))
        answer = await _json("POST", endpoints.token, data=form, auth=auth, errors=True)
        if "error" in answer:
            said = " ".join(str(answer.get(k, ""))[:200] for k in ("error", "error_description")).strip()
            raise SignInFailed(f"the issuer did not redeem the sign-in's code: {said}")
        token = answer.get("id_token")
        if not isinstance(token, str) or not token:
            raise SignInFailed("the issuer's token endpoint gave no ID token (is the openid scope asked for?)")
        return token

    async def claims(self, id_token: str, nonce: str) -> dict[str, Any]:
        """The ID token's claims once checked (TokenRefused saying why otherwise)."""
        keys = await self.issuers.keys(self.client.issuer)
        try:
            return self._check(id_token, nonce, keys.keys, keys.algorithms)
        except UnknownKey:
            keys = await self.issuers.keys(self.client.issuer, rotated=True)
            return self._check(id_token, nonce, keys.keys, keys.algorithms)

    def _check(self, id_token: str, nonce: str, keys: dict[str, Any], allowed: tuple[str, ...]) -> dict[str, Any]:
        return id_token_claims(id_token, keys, issuer=self.client.issuer, client_id=self.client.client_id,
                               nonce=nonce, allowed=allowed, now=time.time())


def _form(text: str) -> str:
    return urlencode({"": text})[1:]


async def _json(method: str, url: str, *, data: dict[str, str] | None = None, auth: aiohttp.BasicAuth | None = None,
                errors: bool = False) -> dict[str, Any]:
    """The JSON object ``url`` answers (bounded); ``errors``: a 4xx answer's object too (an OAuth error)."""
    try:
        async with aiohttp.ClientSession(timeout=_TIMEOUT, cookie_jar=aiohttp.DummyCookieJar()) as http, \
                http.request(method, url, data=data, auth=auth, max_redirects=3,
                             headers={"Accept": "application/json"}) as response:
            body, status = b"", response.status
            async for chunk in response.content.iter_chunked(64 << 10):
                body += chunk
                if len(body) > MAX_ANSWER:
                    break
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise IssuerUnavailable(f"{url} could not be reached: {describe(exc)}") from None
    if len(body) > MAX_ANSWER:
        raise IssuerUnavailable(f"{url} answered with more than {MAX_ANSWER >> 10} KiB")
    try:
        found = json.loads(body)
    except ValueError:
        found = None
    if not (status == 200 or (errors and 400 <= status < 500)) or not isinstance(found, dict):
        raise IssuerUnavailable(f"{url} answered {status}" + ("" if isinstance(found, dict) else " without JSON"))
    return found
