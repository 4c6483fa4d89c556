"""What a person asks of a resource, and who asked: the annotations ``helmop rollback|pin|unpin|approve`` and
``suspend|resume|reconcile`` (and the web UI's buttons) write, as plain data.

Each request is one annotation holding a small JSON object whose first member is ``by``, the asker as the API
server authenticated them (SelfSubjectReview, or the UI's signed-in user). That it is first is what lets the
ValidatingAdmissionPolicy ``helmop-requests`` (deploy/) attest it: CEL cannot parse JSON, but it can require a
changed request to start with ``{"by":"<request.userInfo.username>",``; the same policy lets only those with the
``approve`` verb on the object write an approval. Values are hostile like any input: bounded, and a value that
is not such an object is no request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

ROLLBACK = "helmop.dev/rollback"  # roll the release back (to a revision) and pin it
PIN = "helmop.dev/pin"  # hold the object where it is
UNPIN = "helmop.dev/unpin"  # end a pin before the desired state moves on
APPROVE = "helmop.dev/approve"  # let one revision of the desired state through (and, with now, a closed window)
ASKED = "helmop.dev/requestedBy"  # who asked for the suspend, resume or reconcile made with it
ANNOTATIONS = (ROLLBACK, PIN, UNPIN, APPROVE)  # requests the operator acts on (a new one wakes the object)
MAX_VALUE = 4096  # bytes of one request annotation
MAX_TEXT = 1024  # characters of a reason


class Asked(StrEnum):
    """What was asked: the action a status's ``lastHandledRequest`` and the Events name."""

    SUSPEND = "suspend"
    RESUME = "resume"
    RECONCILE = "reconcile"
    RESET = "reset"
    FORCE = "force"
    ROLLBACK = "rollback"
    PIN = "pin"
    UNPIN = "unpin"
    APPROVE = "approve"
    APPROVE_NOW = "approve-now"  # approve, and let it through a closed deployment window once


_KEYS = {ROLLBACK: Asked.ROLLBACK, PIN: Asked.PIN, UNPIN: Asked.UNPIN, APPROVE: Asked.APPROVE}


@dataclass(frozen=True)
class Request:
    """One person's request. ``at`` (RFC 3339, set by the asker) tells a new request from one already handled."""

    action: Asked
    by: str
    at: str
    reason: str = ""
    revision: str = ""  # rollback: the helm revision ("": the previous one); approve: the digest approved

    def said(self) -> str:
        """For people: "by alice at 2026-11-29T03:00:00Z: the new cache leaks"."""
        return f"by {self.by or 'someone unknown'} at {self.at}" + (f": {self.reason}" if self.reason else "")


def encode(request: Request) -> str:
    """The annotation's value; ``by`` first and the separators fixed (the admission policy matches the start)."""
    body: dict[str, Any] = {"by": request.by, "at": request.at}
    if request.action in (Asked.SUSPEND, Asked.RESUME, Asked.RECONCILE, Asked.RESET, Asked.FORCE):
        body["action"] = request.action.value
    if request.reason:
        body["reason"] = request.reason[:MAX_TEXT]
    if request.revision:
        body["revision"] = request.revision
    if request.action is Asked.APPROVE_NOW:
        body["now"] = True
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def handled_as(action: Asked) -> str:
    """The key a status's ``handledRequests`` records a request under: its annotation's short name."""
    return annotation_of(action).partition("/")[2]


def annotation_of(action: Asked) -> str:
    """The annotation a request for ``action`` is written to."""
    if action is Asked.APPROVE_NOW:
        return APPROVE
    return next((key for key, asked in _KEYS.items() if asked is action), ASKED)


def read(annotations: dict[str, Any], key: str) -> Request | None:
    """The request in annotation ``key`` (None: absent, or not a request helmop wrote)."""
    raw = annotations.get(key)
    if not isinstance(raw, str) or not raw or len(raw.encode()) > MAX_VALUE:
        return None
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(body, dict) or not all(isinstance(body.get(f, ""), str) for f in ("by", "at", "reason")):
        return None
    action = _KEYS.get(key) or _asked(body.get("action"))
    if action is Asked.APPROVE and body.get("now") is True:
        action = Asked.APPROVE_NOW
    revision = body.get("revision", "")
    if action is None or not body.get("at") or not isinstance(revision, str | int) or isinstance(revision, bool):
        return None
    return Request(action, body.get("by", "")[:256], body["at"][:64], body.get("reason", "")[:MAX_TEXT],
                   str(revision)[:128])


def _asked(value: Any) -> Asked | None:
    try:
        return Asked(value) if isinstance(value, str) else None
    except ValueError:
        return None
