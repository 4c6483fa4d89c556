"""How a Receiver's status changes, as Flux's notification-controller writes it: Ready with the webhook path once
its token is read, Ready=False without a path (Reconciling, retried) while the token cannot be, Stalled when the
spec cannot be acted on."""

from __future__ import annotations

from helmop.api.status import READY, RECONCILING, STALLED
from helmop.api.status.receiver import ReceiverStatus

from . import outcome


def initialized(status: ReceiverStatus, generation: int, path: str) -> ReceiverStatus:
    """The token read: the path a sender posts to, in the status and in Ready's message."""
    return outcome(status.but(webhook_path=path), generation, True, "Succeeded",
                   f"Receiver initialized for path: {path}")


def no_token(status: ReceiverStatus, generation: int, message: str) -> ReceiverStatus:
    """The token cannot be read (yet): no path is served, and the Receiver is retried (Flux's TokenNotFound, with
    Reconciling=ProgressingWithRetry); the generation it last succeeded for is kept."""
    out = status.but(webhook_path="").with_condition(READY, False, "TokenNotFound", message, generation)
    return out.with_condition(RECONCILING, True, "ProgressingWithRetry", "Reconciliation in progress",
                              generation).without(STALLED)
