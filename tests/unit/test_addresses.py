"""The address policy (helmop.api.addresses, helmop.infra.addresses): every form an IPv6 address can carry an
IPv4 one in, judged by where a translator or tunnel would deliver it; IPv4 spellings that resolvers read
differently refused at once, naming the address; names judged by what they resolve to."""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket

import pytest

from helmop.api.addresses import AddressRefused, Policy, classify, embedded, legacy_ipv4
from helmop.api.settings import Backoff
from helmop.infra.addresses import Resolver, resolved
from helmop.notifications.outbox import Connection, Sender, Undeliverable
from helmop.notifications.payloads.request import Request


def carried(v4: str) -> dict[str, str]:
    """``v4`` in every IPv6 form that carries an IPv4 address."""
    n = int(ipaddress.IPv4Address(v4))
    hi, lo = n >> 16, n & 0xFFFF
    return {
        "mapped": f"::ffff:{v4}", "compatible": f"::{v4}", "SIIT": f"::ffff:0:{v4}",
        "NAT64": f"64:ff9b::{v4}", "NAT64 local /96": f"64:ff9b:1::{v4}",
        "NAT64 local /48": str(ipaddress.IPv6Address(0x0064FF9B0001 << 80 | hi << 64 | lo << 40)),
        "6to4": str(ipaddress.IPv6Address(0x2002 << 112 | n << 80 | 1)),
        "Teredo": str(ipaddress.IPv6Address(0x20010000 << 96 | 0x08080808 << 64 | (~n & 0xFFFFFFFF))),
    }


INTERNAL = {"loopback": "127.0.0.1", "link-local": "169.254.10.1", "private": "10.1.2.3",
            "cloud metadata": "169.254.169.254"}


@pytest.mark.parametrize("kind", INTERNAL)
@pytest.mark.parametrize("form", list(carried("1.2.3.4")))
def test_every_ipv6_form_of_an_internal_address_is_judged_by_it(kind: str, form: str) -> None:
    ip = ipaddress.ip_address(carried(INTERNAL[kind])[form])
    assert str(ipaddress.IPv4Address(INTERNAL[kind])) in map(str, embedded(ip)), (form, ip)
    said = Policy.notifications().problem(ip)
    assert f"carries {INTERNAL[kind]}" in said and f" {kind} address" in said, said
    for_sources = Policy.sources().problem(ip)
    assert bool(for_sources) == (kind in ("link-local", "cloud metadata")), (form, for_sources)
    with pytest.raises(AddressRefused):
        Policy.notifications().check_host(f"[{ip}]")


@pytest.mark.parametrize("form", list(carried("1.2.3.4")))
def test_a_public_address_in_those_forms_is_public(form: str) -> None:
    ip = ipaddress.ip_address(carried("93.184.216.34")[form])
    assert Policy.notifications().problem(ip) == "" and Policy.sources().problem(ip) == ""


@pytest.mark.parametrize(("address", "kind"), [
    ("::1", "loopback"), ("fe80::1", "link-local"), ("fd00:ec2::254", "cloud metadata"), ("fc00::1", "private"),
    ("::", "unspecified"), ("0.0.0.0", "unspecified"), ("ff02::1", "multicast"), ("224.0.0.1", "multicast"),
    ("2001:db8::1", "reserved"), ("100.64.0.1", "shared"), ("100.100.100.200", "cloud metadata"),
    ("240.0.0.1", "reserved"), ("255.255.255.255", "reserved"), ("4000::1", "reserved"), ("8.8.8.8", ""),
    ("2606:4700::1111", ""),
])
def test_each_address_has_its_class(address: str, kind: str) -> None:
    assert classify(ipaddress.ip_address(address)) == kind


@pytest.mark.parametrize(("spelling", "address"), [
    ("2130706433", "127.0.0.1"), ("127.1", "127.0.0.1"), ("127.0.1", "127.0.0.1"), ("0x7f.0.0.1", "127.0.0.1"),
    ("0177.0.0.1", "127.0.0.1"), ("017700000001", "127.0.0.1"), ("0x7f000001", "127.0.0.1"),
    ("2852039166", "169.254.169.254"), ("169.254.43518", "169.254.169.254"), ("0xA9.0xFE.0xA9.0xFE", "169.254.169.254"),
    ("134744072", "8.8.8.8"),
])
def test_unusual_ipv4_spellings_are_refused_at_once_naming_the_address(spelling: str, address: str) -> None:
    assert str(legacy_ipv4(spelling)) == address
    for policy in (Policy.notifications(), Policy.sources(), Policy.notifications(["0.0.0.0/0"])):
        with pytest.raises(AddressRefused, match=f"{address} written unusually"):
            policy.check_host(spelling)


@pytest.mark.parametrize(("host", "said"), [
    ("localhost.", "ends in a dot"), ("metadata.google.internal.", "ends in a dot"),
    ("1.2.3.4.5", "neither an address nor a name"), ("08.0.0.1", "neither an address nor a name"),
    ("256.1.1.1", "neither an address nor a name"), ("", "no host"),
])
def test_hosts_resolvers_read_differently_are_refused(host: str, said: str) -> None:
    with pytest.raises(AddressRefused, match=said):
        Policy.sources().check_host(host)


def test_names_and_canonical_addresses_pass_as_written() -> None:
    assert Policy.notifications().check_host("hooks.slack.com") is None
    assert Policy.notifications().check_host("cafe.be") is None  # hexadecimal letters are a name
    assert str(Policy.sources().check_host("[::1]")) == "::1"
    assert str(Policy.notifications(["10.96.0.0/12"]).check_host("10.96.0.10")) == "10.96.0.10"


def test_an_allowed_range_admits_what_it_holds_in_any_form() -> None:
    policy = Policy.notifications(["10.96.0.0/12"])
    assert policy.problem(ipaddress.ip_address("::ffff:10.96.0.10")) == ""
    assert policy.problem(ipaddress.ip_address("64:ff9b::10.96.0.10")) == ""
    assert policy.problem(ipaddress.ip_address("64:ff9b::10.0.0.1"))


async def test_a_name_is_judged_by_what_it_resolves_to() -> None:
    with pytest.raises(AddressRefused, match=r"localhost resolves to 127\.0\.0\.1 is a loopback"):
        await Resolver(Policy.notifications()).resolve("localhost", 80, socket.AF_INET)
    assert await Resolver(Policy.sources()).resolve("localhost", 80, socket.AF_INET)
    assert "127.0.0.1" in await resolved(Policy.sources(), "localhost", 80)
    with pytest.raises(AddressRefused, match="resolves to"):
        await resolved(Policy.notifications(), "localhost", 80)
    assert await resolved(Policy.sources(), "[::1]", 80) == ["::1"]
    assert await resolved(Policy.sources(), "no-such-name.invalid", 80) == []


@pytest.mark.parametrize(("host", "said"), [
    ("2130706433", "127.0.0.1 written unusually"), ("127.1", "127.0.0.1 written unusually"),
    ("0x7f.0.0.1", "127.0.0.1 written unusually"), ("localhost.", "ends in a dot"),
    ("[::ffff:127.0.0.1]", "carries 127.0.0.1"), ("[::127.0.0.1]", "carries 127.0.0.1"),
    ("[64:ff9b::7f00:1]", "carries 127.0.0.1"), ("[2002:7f00:1::1]", "carries 127.0.0.1"),
    ("localhost", "localhost resolves to"), ("127.0.0.1", "127.0.0.1 is a loopback"),
])
async def test_a_notification_is_refused_before_any_connection(host: str, said: str) -> None:
    """Each refused at once, with its reason, on the first attempt (no retries for minutes), and nothing reaches
    the listener on the address it stands for."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.setblocking(False)
        sender = Sender(Policy.notifications(), Backoff(0.05, 0.1), retry_for=60.0)
        try:
            with pytest.raises(Undeliverable, match=re.escape(said)):
                await asyncio.wait_for(sender.send(Request(f"http://{host}:{server.getsockname()[1]}/hook", b"{}"),
                                                   Connection(timeout=5)), 5)
        finally:
            await sender.close()
        with pytest.raises(BlockingIOError):
            server.accept()
