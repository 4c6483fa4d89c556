"""Status conditions in Kubernetes convention (type, status, reason, message, lastTransitionTime,
observedGeneration), so `kubectl wait --for=condition=Ready` and kstatus-aware tools work."""

from __future__ import annotations

from datetime import UTC, datetime
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
WAITING = frozenset({"DependencyNotReady", "SourceNotReady"})


def event_type(ok: bool, reason: str) -> str:
    """The type of the Event that reports an outcome."""
    return "Normal" if ok or reason in WAITING else "Warning"


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_condition(conditions: list[dict[str, Any]], kind: str, status: bool, reason: str, message: str,
                  generation: int, at: str | None = None) -> list[dict[str, Any]]:
    """A copy of ``conditions`` with ``kind`` set; the transition time moves only when status flips."""
    text = "True" if status else "False"
    previous = next((c for c in conditions if c.get("type") == kind), None)
    since = previous["lastTransitionTime"] if previous and previous.get("status") == text else (at or now())
    updated = {"type": kind, "status": text, "reason": reason, "message": message,
               "lastTransitionTime": since, "observedGeneration": generation}
    others = [c for c in conditions if c.get("type") != kind]
    return [*others, updated]


def remove_condition(conditions: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [c for c in conditions if c.get("type") != kind]


def condition_of(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    """The object's condition of type ``kind`` ({} when it has none)."""
    return get_condition((obj.get("status") or {}).get("conditions") or [], kind) or {}


def get_condition(conditions: list[dict[str, Any]], kind: str) -> dict[str, Any] | None:
    return next((c for c in conditions if c.get("type") == kind), None)
