"""A request to a provider's service, and the provider as resolved for one delivery."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from helmop.api.notifications import Event

MAX_BODY = 256 << 10  # one request's body; an event's message and metadata are bounded long before this


class PayloadError(Exception):
    """The provider cannot be sent this event as configured (no address, no token, an address it cannot use):
    retrying does not help."""


@dataclass(frozen=True)
class Target:
    """A Provider as resolved for one delivery: its spec with what its Secret overrides and adds."""

    type: str
    address: str
    channel: str = ""
    username: str = ""
    password: str = ""
    token: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    status_id: str = ""  # commit-status types: the status's context (its name on the commit)


@dataclass(frozen=True)
class Request:
    url: str
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    method: str = "POST"


def json_request(url: str, payload: Any, headers: Mapping[str, str] | None = None) -> Request:
    body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    if len(body) > MAX_BODY:
        raise PayloadError(f"the payload is {len(body)} bytes, over the {MAX_BODY} a notification may be")
    return Request(url, body, {"Content-Type": "application/json", **(headers or {})})


def needs_address(target: Target) -> str:
    if not target.address:
        raise PayloadError(f"a {target.type} provider needs an address (spec.address, or address in its Secret)")
    return target.address


def needs_token(target: Target) -> str:
    if not target.token:
        raise PayloadError(f"a {target.type} provider needs a token (the token key of spec.secretRef's Secret)")
    return target.token


def title(event: Event) -> str:
    """How Flux names the object in a message: kind/name.namespace."""
    return f"{event.kind}/{event.name}.{event.namespace}"


def words(reason: str) -> str:
    """A CamelCase reason in lowercase words (UpgradeFailed: upgrade failed)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", reason).lower()
