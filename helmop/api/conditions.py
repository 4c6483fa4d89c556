"""Status conditions in Kubernetes convention (type, status, reason, message, lastTransitionTime,
observedGeneration), so `kubectl wait --for=condition=Ready` and kstatus-aware tools work: their names,
the Event type of an outcome, and reading one off any object. helmop's own statuses are typed
(:mod:`helmop.api.status`)."""

from __future__ import annotations

from typing import Any

READY = "Ready"
RECONCILING = "Reconciling"
STALLED = "Stalled"
RELEASED = "Released"
REMEDIATED = "Remediated"
TEST_SUCCESS = "TestSuccess"
DRIFTED = "Drifted"

# Not Ready because something it needs is not ready yet: a wait, not an error (a Normal Event, as Flux's
# DependencyNotReady is).
WAITING = frozenset({"DependencyNotReady", "SourceNotReady", "Pinned", "AwaitingApproval", "OutsideWindow"})


def event_type(ok: bool, reason: str) -> str:
    """The type of the Event that reports an outcome."""
    return "Normal" if ok or reason in WAITING else "Warning"


def condition_of(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    """The condition of type ``kind`` of any object as read from the API ({} when it has none): another
    controller's objects too, whose status is not one of helmop's types."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if isinstance(c, dict) and c.get("type") == kind), {})
