"""The address policy (:mod:`helmop.api.addresses`) where connections are made: every name is judged by what it
resolves to at the moment of connecting (a name that resolves to a public address when an object is written and
to an internal one later is still refused), every address literal before the request that names it, redirects
included, so no request a tenant points starts toward a refused address."""

from __future__ import annotations

import asyncio
import socket
from types import SimpleNamespace
from typing import Any
from urllib.parse import urljoin, urlsplit

import aiohttp
from aiohttp import ThreadedResolver
from aiohttp.abc import AbstractResolver, ResolveResult

from helmop.api.addresses import AddressRefused, Policy, literal


class Resolver(AbstractResolver):
    """aiohttp's resolver, refusing names that resolve to an address the policy refuses."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._inner = ThreadedResolver()

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
                      ) -> list[ResolveResult]:
        self.policy.check_host(host)
        found = await self._inner.resolve(host, port, family)
        for entry in found:
            ip = literal(entry["host"])
            problem = self.policy.problem(ip) if ip is not None else f"{entry['host']!r}, no address"
            if problem:
                raise AddressRefused(f"{host} resolves to {problem}")
        return found

    async def close(self) -> None:
        await self._inner.close()


def _guard(policy: Policy) -> aiohttp.TraceConfig:
    """Each request's host (the first, and each redirect's target) checked before it is connected to: aiohttp
    does not ask the resolver about an address literal, and refuses unusual spellings with a less useful
    message."""

    async def first(_session: aiohttp.ClientSession, _context: SimpleNamespace,
                    params: aiohttp.TraceRequestStartParams) -> None:
        policy.check_host(params.url.raw_host or "")

    async def redirected(_session: aiohttp.ClientSession, _context: SimpleNamespace,
                         params: aiohttp.TraceRequestRedirectParams) -> None:
        location = params.response.headers.get("Location") or params.response.headers.get("URI") or ""
        check_url(policy, urljoin(str(params.url), location))

    config = aiohttp.TraceConfig()
    config.on_request_start.append(first)
    config.on_request_redirect.append(redirected)
    return config


def session(policy: Policy, *, timeout: aiohttp.ClientTimeout | None = None,
            headers: dict[str, str] | None = None, **connector: Any) -> aiohttp.ClientSession:
    """An HTTP client whose every connection ``policy`` allows (``connector``: TCPConnector's options); no
    cookies kept and no proxy taken from the operator's environment."""
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(resolver=Resolver(policy), **connector),
                                 trace_configs=[_guard(policy)], cookie_jar=aiohttp.DummyCookieJar(),
                                 trust_env=False, timeout=timeout or aiohttp.ClientTimeout(total=300),
                                 headers=headers)


def check_url(policy: Policy, url: str) -> None:
    """AddressRefused when ``url``'s host is refused as written (names are judged as they resolve)."""
    policy.check_host(urlsplit(url).hostname or "")


async def resolved(policy: Policy, host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to now, each allowed by ``policy`` (AddressRefused otherwise): for a
    program that connects by itself (git), pinned to these."""
    if policy.check_host(host) is not None:
        return [host.strip("[]")]
    try:
        found = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return []  # the program says that it could not resolve the name
    addresses = sorted({str(info[4][0]) for info in found})
    for address in addresses:
        ip = literal(address)
        problem = policy.problem(ip) if ip is not None else "no address"
        if problem:
            raise AddressRefused(f"{host} resolves to {problem}")
    return addresses


def refused(exc: BaseException) -> AddressRefused | None:
    """The refusal behind an aiohttp connection error, if that is what it was."""
    seen: set[int] = set()
    current: Any = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, AddressRefused):
            return current
        seen.add(id(current))
        current = getattr(current, "os_error", None) or current.__cause__ or current.__context__
    return None
