"""The status of helmop's kinds as typed values, parsed from and written to the API as the spec is.

One module per kind; :class:`Status` holds what every kind reports (Kubernetes conditions, the generation
described, the reconcile request handled). Values are frozen: a change is a new value, made by the pure
functions of ``helmop.decisions.settle`` and written by the one status writer. Field names are the CRDs'
(``rename="camel"``); empty and zero fields are left out, as Go's ``omitempty`` leaves them out.

msgspec rather than pydantic: parsing a status is on every reconcile's path, and msgspec's import and
conversion cost a fraction of pydantic's (the CLI starts without importing pydantic at all).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any, Self, TypeVar

import msgspec

from helmop.api.conditions import READY, RECONCILING, STALLED

log = logging.getLogger(__name__)
__all__ = ["READY", "RECONCILING", "STALLED", "Condition", "Controlled", "Handled", "Pin", "Status", "Struct",
           "merge_patch", "now", "parse", "to_json"]


def now() -> str:
    """A condition's or a status field's time, as Kubernetes writes it."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Struct(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, kw_only=True):
    """A part of a status: camelCase on the wire, defaults left out."""

    def but(self, **changes: Any) -> Self:
        """A copy with ``changes`` (field names in Python's spelling)."""
        return msgspec.structs.replace(self, **changes)


class Condition(Struct, frozen=True):
    type: str
    status: str  # "True", "False" or "Unknown"
    reason: str = ""
    message: str = ""
    last_transition_time: str = ""
    observed_generation: int = 0

    @property
    def true(self) -> bool:
        return self.status == "True"


class Handled(Struct, frozen=True):
    """A person's request the operator acted on (helmop.api.requests): what, who, when, why."""

    action: str
    by: str = ""
    at: str = ""
    reason: str = ""
    revision: str = ""  # a rollback's or pin's revision, an approval's digest


class Status(Struct, frozen=True):
    """What every kind's status has."""

    observed_generation: int = 0
    last_handled_reconcile_at: str = ""
    last_handled_request: Handled | None = None  # the newest person's request acted on, and who made it
    handled_requests: dict[str, str] = {}  # request annotation (short name) -> the ``at`` of the one last acted on
    conditions: tuple[Condition, ...] = ()

    def condition(self, kind: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == kind), None)

    def is_true(self, kind: str) -> bool:
        found = self.condition(kind)
        return found is not None and found.true

    def with_condition(self, kind: str, ok: bool, reason: str, message: str, generation: int,
                       at: str = "") -> Self:
        """``kind`` set (last of the list); its transition time moves only when its status flips."""
        text = "True" if ok else "False"
        previous = self.condition(kind)
        since = previous.last_transition_time if previous and previous.status == text else (at or now())
        updated = Condition(type=kind, status=text, reason=reason, message=message, last_transition_time=since,
                            observed_generation=generation)
        return self.but(conditions=(*(c for c in self.conditions if c.type != kind), updated))

    def without(self, *kinds: str) -> Self:
        return self.but(conditions=tuple(c for c in self.conditions if c.type not in kinds))


class Pin(Handled, frozen=True):
    """Where a person holds an object (``helmop rollback`` or ``pin``) until its desired state moves on."""

    digest: str = ""  # the desired state's digest when pinned: the pin ends when it changes


class Controlled(Status, frozen=True):
    """The status of a kind under change control (pins, approvals, deployment windows)."""

    pin: Pin | None = None
    approved: Handled | None = None  # the newest approval acted on (its revision: the digest let through)
    pending_revision: str = ""  # the desired digest waiting for an approval or a window (what approve approves)


S = TypeVar("S", bound=Status)


def parse(kind: type[S], data: Any) -> S:
    """The status as ``kind`` reads it; what does not fit the type (written by hand, or by anyone who may
    write the status subresource) is logged and read as an empty status, never a crash."""
    if not data:
        return kind()
    try:
        return msgspec.convert(data, kind, strict=False)
    except msgspec.ValidationError as exc:
        log.warning("a %s that does not fit its schema is read as empty: %s", kind.__name__, exc)
        return kind()


def to_json(status: Struct) -> dict[str, Any]:
    """The status as the API holds it (lists, not tuples: equal to what a read brings back)."""
    encoded: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(status))
    return encoded


def merge_patch(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The JSON merge patch (RFC 7386) that turns ``old`` into ``new``: a key ``new`` lacks is set to null,
    maps are patched key by key, anything else is replaced whole."""
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, dict) and isinstance(before, dict):
            inner = merge_patch(before, value)
            if inner:
                patch[key] = inner
        elif value != before:
            patch[key] = value
    return patch
