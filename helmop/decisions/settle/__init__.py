"""How each kind's status changes, as pure functions of the status before and what happened: one module
per kind. The controllers read a status once, act, settle, and hand the result to the one writer."""

from __future__ import annotations

from helmop.api.status import READY, RECONCILING, STALLED, S


def outcome(status: S, generation: int, ready: bool, reason: str, message: str, *, stalled: bool = False) -> S:
    """``status`` with an outcome for ``generation``: Ready (and Stalled) set or cleared, Reconciling gone."""
    out = status.with_condition(READY, ready, reason, message, generation).without(RECONCILING)
    out = out.with_condition(STALLED, True, reason, message, generation) if stalled else out.without(STALLED)
    return out.but(observed_generation=generation)


def progressing(status: S, generation: int, message: str) -> S:
    """Reconciling=True while an action runs (Ready too, False, where the object has no Ready yet)."""
    out = status.with_condition(RECONCILING, True, "Progressing", message, generation)
    return out if out.condition(READY) else out.with_condition(READY, False, "Progressing", message, generation)
