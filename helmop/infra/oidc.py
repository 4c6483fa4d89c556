"""The signing keys of OIDC issuers (those of generic-oidc Receivers, and Google's for gcr Receivers): found by OIDC
discovery (``<issuer>/.well-known/openid-configuration``, whose ``issuer`` must be the one asked for, as go-oidc
insists), the JWKS it names fetched through the address policy, each answer bounded in size and time. A set is kept
for a while, and fetched again sooner when a token names a key it does not have (a rotation), at most every
``REFRESH`` seconds per issuer."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

import aiohttp

from helmop.api.addresses import AddressRefused, Policy
from helmop.api.errors import describe
from helmop.api.jwts import algorithms

from . import addresses

KEEP = 600.0  # seconds a key set is used before it is fetched again
REFRESH = 30.0  # at most this often when a token names a key the set does not have
MAX_ANSWER = 256 << 10  # a discovery document or a JWKS
_TIMEOUT = aiohttp.ClientTimeout(total=10)


class IssuerUnavailable(Exception):
    """The issuer's keys could not be found (the message says where and why)."""


@dataclass(frozen=True)
class KeySet:
    keys: dict[str, Any]  # the JWKS
    algorithms: tuple[str, ...]  # what the issuer signs with (of those taken)
    fetched: float  # time.monotonic()


class Issuers:
    """The key sets of the issuers asked for, each fetched once at a time."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._sets: dict[str, KeySet] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def keys(self, issuer: str, *, rotated: bool = False) -> KeySet:
        """The key set of ``issuer``; with ``rotated`` (a token named a key it lacks), fetched again unless it was
        just now. IssuerUnavailable when it cannot be fetched."""
        async with self._locks.setdefault(issuer, asyncio.Lock()):
            kept = self._sets.get(issuer)
            age = time.monotonic() - kept.fetched if kept else KEEP
            if kept is not None and age < (REFRESH if rotated else KEEP):
                return kept
            fetched = await self._fetch(issuer)
            self._sets[issuer] = fetched
            return fetched

    async def _fetch(self, issuer: str) -> KeySet:
        try:
            async with addresses.session(self.policy, timeout=_TIMEOUT, headers={"Accept": "application/json"}) as http:
                found = await _json(http, issuer.rstrip("/") + "/.well-known/openid-configuration")
                if found.get("issuer") != issuer:
                    raise IssuerUnavailable(f"the discovery document of {issuer} names another issuer")
                jwks_uri = found.get("jwks_uri")
                if not isinstance(jwks_uri, str) or not jwks_uri.startswith(("https://", "http://")):
                    raise IssuerUnavailable(f"the discovery document of {issuer} names no jwks_uri")
                keys = await _json(http, jwks_uri)
        except (aiohttp.ClientError, TimeoutError, OSError, AddressRefused) as exc:
            raise IssuerUnavailable(f"the keys of {issuer} could not be fetched: {describe(exc)}") from None
        return KeySet(keys, algorithms(found.get("id_token_signing_alg_values_supported")), time.monotonic())


async def _json(http: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with http.get(url, max_redirects=3) as response:
        body = b""
        async for chunk in response.content.iter_chunked(64 << 10):
            body += chunk
            if len(body) > MAX_ANSWER:
                raise IssuerUnavailable(f"{url} answered with more than {MAX_ANSWER >> 10} KiB")
        if response.status != 200:
            raise IssuerUnavailable(f"{url} answered {response.status}")
    try:
        found = json.loads(body)
    except ValueError:
        found = None
    if not isinstance(found, dict):
        raise IssuerUnavailable(f"{url} did not answer with a JSON object")
    return found
