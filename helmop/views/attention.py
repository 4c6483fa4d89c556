"""What needs a person, in the order a person wants to see it (the web UI's overview leads with it): what failed
or stalled, then what waits for an approval, what waits for a deployment window, what a person pinned, and what
a person suspended. A resource working its way (progressing, or waiting on a dependency or a source, which is
then listed itself when it is the one failing) needs no one, and is not among them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from helmop.api.conditions import READY, STALLED, WAITING, condition_of
from helmop.api.objects import Resource

from .cells import health, since

T = TypeVar("T")
# (need, label): the order they are shown in
NEEDS = (("failed", "failed"), ("approval", "awaiting approval"), ("window", "outside its window"),
         ("pinned", "pinned"), ("suspended", "suspended"))
RANK = {need: rank for rank, (need, _) in enumerate(NEEDS)}
LABELS = dict(NEEDS)
MESSAGE_SHOWN = 300  # characters of a message on the overview (the object's page has all of it)


@dataclass(frozen=True)
class Need:
    need: str  # one of NEEDS
    reason: str
    message: str
    since: str  # when it began (an RFC 3339 stamp, "" unknown)

    @property
    def label(self) -> str:
        return LABELS[self.need]

    @property
    def rank(self) -> int:
        return RANK[self.need]

    @property
    def age(self) -> str:
        try:  # a request's ``at`` is the asker's, as written: any text
            return since(self.since) if self.since else ""
        except (ValueError, TypeError):
            return ""


def _bounded(given: Any) -> str:
    text = str(given or "")
    return text if len(text) <= MESSAGE_SHOWN else text[:MESSAGE_SHOWN - 1] + "…"


def _said(handled: dict[str, Any]) -> str:
    """A person's request as the status records it: "by alice: the audit" (its time is the row's age)."""
    reason = str(handled.get("reason") or "")
    return f"by {handled.get('by') or 'someone unknown'}" + (f": {reason}" if reason else "")


def _suspended(status: dict[str, Any]) -> Need:
    handled = status.get("lastHandledRequest")
    if isinstance(handled, dict) and handled.get("action") == "suspend":
        return Need("suspended", "Suspended", _bounded(f"suspended {_said(handled)}"), str(handled.get("at") or ""))
    return Need("suspended", "Suspended", "spec.suspend is true: left alone", "")


def need_of(obj: dict[str, Any]) -> Need | None:
    """What ``obj`` needs of a person, or None. A suspended resource's conditions are its last before the suspend:
    the suspend is what is said of it."""
    given = obj.get("status")
    status: dict[str, Any] = given if isinstance(given, dict) else {}
    if Resource(obj).spec.get("suspend"):
        return _suspended(status)
    stalled, ready = condition_of(obj, STALLED), condition_of(obj, READY)
    if stalled.get("status") == "True":
        return Need("failed", str(stalled.get("reason") or "Stalled"), _bounded(
            stalled.get("message") or ready.get("message")), str(stalled.get("lastTransitionTime") or ""))
    reason, message, began = (str(ready.get("reason") or ""), _bounded(ready.get("message")),
                              str(ready.get("lastTransitionTime") or ""))
    if reason == "AwaitingApproval":
        return Need("approval", reason, message, began)
    if reason == "OutsideWindow":
        return Need("window", reason, message, began)
    if health(obj) == "failed" and reason not in WAITING:
        return Need("failed", reason, message, began)
    held = status.get("pin")
    pin: dict[str, Any] = held if isinstance(held, dict) else {}
    if reason == "Pinned" or pin:
        return Need("pinned", reason or "Pinned", message or _bounded(f"pinned {_said(pin)}"),
                    str(pin.get("at") or began))
    return None


def ordered(found: list[tuple[T, Need]]) -> list[tuple[T, Need]]:
    """By need (NEEDS' order), the newest first within each."""
    newest = sorted(found, key=lambda item: item[1].since, reverse=True)
    return sorted(newest, key=lambda item: item[1].rank)
