"""Where a notification may be sent: a tenant names the address, so helmop must not become a request forwarder
into the cluster's network or to a cloud metadata endpoint. Loopback, link-local, private, shared (CGNAT),
multicast and reserved addresses are refused unless the operator allows their range (``--allow-notify-cidr``).

The check is made on the address actually connected to, at each connection (redirects included): a name is
checked as it resolves then (a name that resolves to a public address when the Provider is written and to a
private one later is still refused), an address literal before the request is made.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from aiohttp import ThreadedResolver
from aiohttp.abc import AbstractResolver, ResolveResult

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class AddressRefused(OSError):
    """The address is in a range notifications may not reach."""


@dataclass(frozen=True)
class Policy:
    allowed: tuple[Network, ...] = ()

    @classmethod
    def of(cls, cidrs: Iterable[str]) -> Policy:
        return cls(tuple(ipaddress.ip_network(c, strict=False) for c in cidrs))

    def problem(self, address: str) -> str:
        """Why ``address`` (an IP) may not be reached ("" when it may)."""
        ip = ipaddress.ip_address(address.split("%", 1)[0])
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if any(ip in network for network in self.allowed):
            return ""
        if ip.is_global and not ip.is_multicast:
            return ""
        return (f"{ip} is a loopback, link-local, private or reserved address: notifications do not go there unless "
                "the operator allows its range (--allow-notify-cidr)")

    def check_url(self, url: str) -> None:
        """AddressRefused when ``url``'s host is an address literal this policy refuses (names are checked as they
        resolve, by :class:`Resolver`)."""
        host = urlsplit(url).hostname or ""
        try:
            problem = self.problem(host)
        except ValueError:
            return  # a name
        if problem:
            raise AddressRefused(problem)


class Resolver(AbstractResolver):
    """aiohttp's resolver, refusing names that resolve to an address the policy refuses."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._inner = ThreadedResolver()

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
                      ) -> list[ResolveResult]:
        found = await self._inner.resolve(host, port, family)
        for entry in found:
            problem = self.policy.problem(entry["host"])
            if problem:
                raise AddressRefused(f"{host} resolves to {problem}")
        return found

    async def close(self) -> None:
        await self._inner.close()


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
