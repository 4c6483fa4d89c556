"""Where an address a tenant names really leads, judged as the kernel will connect to it: one policy for every
outbound request a tenant can point (notifications, chart and OCI repositories, git remotes, a chart's
dependencies). Pure: the resolver's answers are judged by :mod:`helmop.infra.addresses`.

An IPv6 address that carries an IPv4 one (IPv4-mapped and -compatible, SIIT, NAT64's well-known and local-use
prefixes, 6to4, Teredo) is judged by the IPv4 address too: a NAT64 gateway or a tunnel delivers it there.
Host spellings that resolvers read differently are not guessed at: an IPv4 address written as one number,
in octal or hexadecimal or with parts left out (``2130706433``, ``127.1``, ``0x7f.1``) is refused at once,
saying which address it is; so is a name ending in a dot.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class AddressRefused(OSError):
    """The address, or the way it is written, is not one the policy lets a request reach."""


def _nets(*cidrs: str) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(c) for c in cidrs)


# The first class whose ranges hold an address names it ("" for a public one).
CLASSES: tuple[tuple[str, tuple[Network, ...]], ...] = (
    # instance metadata (AWS, GCP, Azure, Oracle; ECS's task endpoint; Alibaba; AWS over IPv6): credentials
    ("cloud metadata", _nets("169.254.169.254/32", "169.254.170.2/32", "169.254.170.23/32", "100.100.100.200/32",
                             "fd00:ec2::254/128", "fd00:ec2::23/128")),
    ("unspecified", _nets("0.0.0.0/8", "::/128")),  # 0.0.0.0 connects to the host itself
    ("loopback", _nets("127.0.0.0/8", "::1/128")),
    ("link-local", _nets("169.254.0.0/16", "fe80::/10")),
    ("private", _nets("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")),
    ("shared", _nets("100.64.0.0/10")),  # carrier-grade NAT
    ("multicast", _nets("224.0.0.0/4", "ff00::/8")),
    ("reserved", _nets("240.0.0.0/4", "192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15", "198.51.100.0/24",
                       "203.0.113.0/24", "192.88.99.0/24", "2001:db8::/32", "100::/64", "2001:2::/48",
                       "2001:10::/28", "2001:20::/28", "3fff::/20", "5f00::/16")),
)
ALL = frozenset(name for name, _ in CLASSES)
# IPv6 prefixes that carry an IPv4 address: judged by it (their own class is the IPv4 address's)
_MAPPED, _SIIT = ipaddress.ip_network("::ffff:0:0/96"), ipaddress.ip_network("::ffff:0:0:0/96")
_COMPATIBLE = ipaddress.ip_network("::/96")
_NAT64, _NAT64_LOCAL = ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48")
_6TO4, _TEREDO = ipaddress.ip_network("2002::/16"), ipaddress.ip_network("2001::/32")
_CARRIERS = (_MAPPED, _SIIT, _COMPATIBLE, _NAT64, _NAT64_LOCAL, _6TO4, _TEREDO)
_GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")


def embedded(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries (where a translator or tunnel would deliver it)."""
    value = int(ip)
    low = ipaddress.IPv4Address(value & 0xFFFFFFFF)
    if ip in _MAPPED or ip in _SIIT or ip in _NAT64 or (ip in _COMPATIBLE and value > 1):
        return [low]
    if ip in _NAT64_LOCAL:  # RFC 6052: a /48 prefix puts it in bits 48-63 and 72-87, a /96 in the last 32 bits;
        # the layout the other prefix length would read is all zeros (a prefix between the two: both are judged)
        split = ipaddress.IPv4Address(((value >> 64) & 0xFFFF) << 16 | (value >> 40) & 0xFFFF)
        return [v4 for v4 in (split, low) if int(v4)]
    if ip in _6TO4:
        return [ipaddress.IPv4Address((value >> 80) & 0xFFFFFFFF)]
    if ip in _TEREDO:
        return [ipaddress.IPv4Address((value >> 64) & 0xFFFFFFFF), ipaddress.IPv4Address(~value & 0xFFFFFFFF)]
    return []


def classify(ip: Address) -> str:
    """The class of ``ip`` itself ("" for a public address; an IPv6 carrier of an IPv4 address is the latter's)."""
    for name, networks in CLASSES:
        if any(ip in network for network in networks):
            return name
    if isinstance(ip, ipaddress.IPv6Address) and not any(ip in n for n in _CARRIERS) and ip not in _GLOBAL_UNICAST:
        return "reserved"
    return ""


def candidates(ip: Address) -> list[Address]:
    """``ip`` and what it carries: each is an address a connection to it may reach."""
    return [ip, *embedded(ip)] if isinstance(ip, ipaddress.IPv6Address) else [ip]


_PART = r"(0[xX][0-9a-fA-F]*|[0-9]+)"
_LEGACY_IPV4 = re.compile(rf"{_PART}(\.{_PART}){{0,3}}")


def legacy_ipv4(text: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address the C library's inet_aton reads ``text`` as (one to four parts, each decimal, octal with a
    leading 0 or hexadecimal with 0x); None when it is not such a spelling."""
    if not _LEGACY_IPV4.fullmatch(text):
        return None
    try:
        parts = [int(p, 16) if p[:2].lower() == "0x" else int(p, 8) if len(p) > 1 and p[0] == "0" else int(p)
                 for p in text.split(".")]
    except ValueError:  # "08": neither octal nor a name a resolver accepts
        return None
    *head, last = parts
    if any(p > 255 for p in head) or last >= 1 << (8 * (4 - len(head))):
        return None
    value = last
    for i, part in enumerate(head):
        value |= part << (24 - 8 * i)
    return ipaddress.IPv4Address(value)


def literal(host: str) -> Address | None:
    """The address ``host`` (a URL's host, IPv6 with or without brackets and zone) is written as, in the
    canonical form; None for a name."""
    text = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None


@dataclass(frozen=True)
class Policy:
    """Which classes of address a kind of request may not reach (``refused``), except in the ``allowed``
    ranges; ``rule`` says so in a refusal."""

    refused: frozenset[str] = ALL
    allowed: tuple[Network, ...] = ()
    rule: str = "notifications do not go there unless the operator allows its range (--allow-notify-cidr)"

    @classmethod
    def notifications(cls, cidrs: Iterable[str] = ()) -> Policy:
        """Nothing but public addresses, and the ranges the operator allows."""
        return cls(allowed=tuple(ipaddress.ip_network(c, strict=False) for c in cidrs))

    @classmethod
    def sources(cls) -> Policy:
        """Chart and OCI repositories, git remotes: anywhere a registry may run (a cluster's own services, a
        mirror on the node), but never a cloud's metadata endpoint or what the kernel would deliver elsewhere."""
        return cls(refused=frozenset({"cloud metadata", "unspecified", "link-local", "multicast", "reserved"}),
                   rule="helmop fetches no chart, artifact or repository from there")

    def problem(self, ip: Address) -> str:
        """Why ``ip`` may not be reached ("" when it may)."""
        for candidate in candidates(ip):
            kind = classify(candidate)
            if kind in self.refused and not any(candidate in network for network in self.allowed):
                carried = f" (it carries {candidate})" if candidate != ip else ""
                return f"{ip}{carried} is {'an' if kind[0] in 'aeiou' else 'a'} {kind} address: {self.rule}"
        return ""

    def check_host(self, host: str) -> Address | None:
        """AddressRefused when ``host`` is an address this policy refuses, or written in a way resolvers read
        differently; the address it is, or None for a name (judged as it resolves)."""
        if not host:
            raise AddressRefused("no host")
        ip = literal(host)
        if ip is not None:
            problem = self.problem(ip)
            if problem:
                raise AddressRefused(problem)
            return ip
        legacy = legacy_ipv4(host)
        if legacy is not None:
            kind = classify(legacy) or "public"
            raise AddressRefused(f"{host!r} is the {kind} address {legacy} written unusually: write it as {legacy}")
        if host.endswith("."):
            raise AddressRefused(f"{host!r} ends in a dot: write the name without it")
        if re.fullmatch(r"[0-9.]+", host):  # no top-level domain is all digits
            raise AddressRefused(f"{host!r} is neither an address nor a name")
        return None
