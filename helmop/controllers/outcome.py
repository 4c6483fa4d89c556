"""The one answer every kind's reconcile and clean-up gives the handlers, which turn it into a delay:
the same failure backoff for every kind, the object's interval after a success."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Outcome:
    """``DONE``: a reconcile comes back at the object's interval; a clean-up lets the finalizer go.
    ``FAILED``: come back after the failure backoff (failures in a row, every kind alike).
    ``after(s)``: waiting for something under way; come back after ``s`` seconds (or sooner, when woken)."""

    retry_after: float | None = None
    failed: bool = False


DONE = Outcome()
FAILED = Outcome(failed=True)


def after(seconds: float) -> Outcome:
    return Outcome(retry_after=seconds)
