"""What people's requests and the change-control settings say of one turn, before the kind decides: a pin
held or ended, a rollback or pin asked for, the desired revision approved or not, a deployment window open or
closed. Pure: the requests come parsed (helmop.api.requests), the window's verdict computed, and whether an
approval's author can be trusted is found out by the controller (the admission policy that attests it).

Rules (docs/guides/change-control.md, docs/guides/on-call.md):
- a pin holds while the desired state's digest is the one it was pinned at; a new digest (the fix landed in git
  or the spec) or ``helmop unpin`` ends it;
- an approval lets exactly one digest through; a newer one waits for its own;
- ``approve --now`` also lets that digest through a closed window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from helmop.api.requests import Asked, Request, handled_as
from helmop.api.status import Controlled, Handled, Pin, Status

C = TypeVar("C", bound=Controlled)
S = TypeVar("S", bound=Status)

@dataclass(frozen=True)
class Settings:
    """An object's change-control settings, and what the clock says of its windows."""

    approval: bool = False  # spec.approval.required (or Flux's kinds' helmop.dev/approval: required)
    closed: str = ""  # why changes may not go now (a deployment window), with the next opening ("": open)
    opens_in: float = 0.0  # seconds until a closed window opens (0: unknown, or open)


@dataclass(frozen=True)
class Asks:
    """The requests on the object (annotations), each None when absent."""

    rollback: Request | None = None
    pin: Request | None = None
    unpin: Request | None = None
    approve: Request | None = None
    approvals_trusted: bool = True  # the admission policy that attests an approval's author is in place


@dataclass(frozen=True)
class Control:
    """What the kind's decision reads of change control."""

    pin: Pin | None = None  # held (after the pin-end rule)
    rollback: Request | None = None  # a new rollback to carry out (then pinned)
    pin_request: Request | None = None  # a new pin to set where the object is
    approved: bool = True  # the desired digest may go (approved, or no approval required)
    window: str = ""  # closed: why changes wait ("" when they may go, or an approve --now lets this digest through)
    opens_in: float = 0.0


def new(request: Request | None, status: Status) -> Request | None:
    """The request if not acted on yet (its ``at`` differs from the one last handled from its annotation)."""
    if request is None:
        return None
    return None if status.handled_requests.get(handled_as(request.action)) == request.at else request


def handled(status: S, request: Request, *, revision: str = "") -> S:
    """``request`` recorded as acted on: its ``at`` per annotation, and who asked it as the last request handled."""
    family = handled_as(request.action)
    record = Handled(action=request.action.value, by=request.by, at=request.at, reason=request.reason,
                     revision=revision or request.revision)
    return status.but(handled_requests={**status.handled_requests, family: request.at}, last_handled_request=record)


def pinned(status: C, request: Request, revision: str, digest: str) -> C:
    """A pin set by ``request`` at ``revision`` (a helm revision, or a source revision)."""
    pin = Pin(action=request.action.value, by=request.by, at=request.at, reason=request.reason, revision=revision,
              digest=digest)
    return handled(status, request, revision=revision).but(pin=pin)


def settle(status: C, asks: Asks, digest: str) -> tuple[C, tuple[tuple[str, str, str], ...]]:
    """The requests that need no action acted on: a pin ended (by an unpin, or a new desired ``digest``), an
    approval recorded; and the Events that say so: (type, reason, message)."""
    said: list[tuple[str, str, str]] = []
    status = _unpinned(status, asks.unpin, digest, said)
    return _approved(status, asks, said), tuple(said)


def control(status: Controlled, asks: Asks, digest: str, settings: Settings) -> Control:
    """What the decision reads, of a status :func:`settle` has had its say on."""
    approved_now = status.approved is not None and status.approved.revision == digest
    override = approved_now and status.approved is not None and status.approved.action == Asked.APPROVE_NOW.value
    rollback, pin_request = new(asks.rollback, status), new(asks.pin, status)
    return Control(pin=status.pin if rollback is None else None,  # a rollback moves the pin to where it goes
                   rollback=rollback, pin_request=pin_request, approved=approved_now or not settings.approval,
                   window="" if override else settings.closed, opens_in=settings.opens_in)


def _unpinned(status: C, unpin: Request | None, digest: str, said: list[tuple[str, str, str]]) -> C:
    pin, unpin = status.pin, new(unpin, status)
    if unpin is not None:
        status = handled(status, unpin)
    if pin is None:
        return status
    if unpin is not None:
        why = f"unpinned {unpin.said()}"
    elif pin.digest != digest:
        why = "the desired state changed (the fix has landed): reconciling toward it"
    else:
        return status
    said.append(("Normal", "PinEnded", f"the pin at revision {pin.revision} ended: {why}"))
    return status.but(pin=None)


def _approved(status: C, asks: Asks, said: list[tuple[str, str, str]]) -> C:
    request = new(asks.approve, status)
    if request is None:
        return status
    if not asks.approvals_trusted:
        said.append(("Warning", "ApprovalRefused",
                     f"approval {request.said()} not acted on: the ValidatingAdmissionPolicy helmop-requests, which "
                     "lets only those with the approve verb write it and attests who did, is not installed"))
        return handled(status, request, revision="")
    status = handled(status, request)
    approval = Handled(action=request.action.value, by=request.by, at=request.at, reason=request.reason,
                       revision=request.revision)
    said.append(("Normal", "Approved", f"revision {request.revision} approved {request.said()}"))
    return status.but(approved=approval)
