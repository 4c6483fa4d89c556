"""A request to a provider's service, and the provider as resolved for one delivery."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from helmop.api.kinds import family_of
from helmop.api.notifications import CHANGE_REQUEST, ERROR, Event

_WARNING, _INFORMATION = "\u26a0\ufe0f", "\u2139\ufe0f"  # the emoji Flux's Markdown posts begin with
PROGRESSING = "Progressing"  # the reason of an object starting to apply a new revision
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
    provider_uid: str = ""  # a pull request comment's key, an Opsgenie alias
    alert: tuple[str, str, str] = ("", "", "")  # the Alert's namespace, name and uid: an OpenTelemetry trace's


@dataclass(frozen=True)
class Request:
    url: str
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    method: str = "POST"
    reads: int = 0  # bytes of the answer its sender reads (a listing); 0: what an error says, no more


Send = Callable[[Request], Awaitable[str]]  # sends a request (retried as delivery is); its answer's text


def json_request(url: str, payload: Any, headers: Mapping[str, str] | None = None) -> Request:
    body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    if len(body) > MAX_BODY:
        raise PayloadError(f"the payload is {len(body)} bytes, over the {MAX_BODY} a notification may be")
    return Request(url, body, {"Content-Type": "application/json", **(headers or {})})


def form_request(url: str, fields: Mapping[str, str], headers: Mapping[str, str] | None = None) -> Request:
    body = urlencode(fields).encode()
    if len(body) > MAX_BODY:
        raise PayloadError(f"the payload is {len(body)} bytes, over the {MAX_BODY} a notification may be")
    return Request(url, body, {"Content-Type": "application/x-www-form-urlencoded", **(headers or {})})


def answer_json(text: str, what: str) -> Any:
    """A service's answer read as JSON; PayloadError when it is not."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise PayloadError(f"{what} answered what is not JSON") from None


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


def heading(event: Event) -> str:
    """How Flux's chat messages name the object: kind in lowercase/name.namespace."""
    return f"{event.kind.lower()}/{event.name}.{event.namespace}"


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def words(reason: str) -> str:
    """A CamelCase reason in lowercase words (UpgradeFailed: upgrade failed)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", reason).lower()


def markdown_post(event: Event) -> str:
    """Flux's Markdown post (Zulip, pull request comments): the severity, the object, the message, and the metadata
    sorted (a pull request's number left out). Flux's kinds are said as Flux says them."""
    owner = "Flux" if family_of(event.api_version.rpartition("/")[0]).flux else "helmop"
    lines = "".join(f"* `{k}`: {event.metadata[k]}\n" for k in sorted(event.metadata) if k != CHANGE_REQUEST)
    sign = _WARNING if event.severity == ERROR else _INFORMATION
    about = f"{event.kind}/{event.namespace}/{event.name}"
    return f"## {owner} Status\n\n{sign} {about}\n\n{event.message}\n\nMetadata:\n{lines}"
