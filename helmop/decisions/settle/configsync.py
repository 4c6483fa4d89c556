"""How a ConfigSync's status changes, and what each outcome says: every condition and message of its turn, and the
Event that goes with it, as a :class:`Report` the controller writes as it is. Messages of outcomes are masked of
the Secret values the turn read (``Before.secrets``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from helmop.api import conditions as cond
from helmop.api.redaction import redact
from helmop.api.status import READY
from helmop.api.status.configsync import AppliedObject, ConfigSyncStatus
from helmop.decisions.changecontrol import Control, handled, pinned
from helmop.decisions.sync import ObjectId, Refusal

from . import outcome, progressing


@dataclass(frozen=True)
class Before:
    """What an outcome is settled from: the status as the turn has it, the generation handled, and the Secret values
    no message may quote."""

    status: ConfigSyncStatus
    generation: int
    secrets: Sequence[str] = ()


@dataclass(frozen=True)
class Event:
    """The Kubernetes Event that says an outcome on the ConfigSync."""

    type: str
    reason: str
    message: str


@dataclass(frozen=True)
class Report:
    """The status to write and the Event to post (None: none). ``outcome``: the turn ended (the pending reconcile
    request is handled), not a mark of progress; ``stalled``: a failure only a change of the spec or of what it
    reads mends (not retried)."""

    status: ConfigSyncStatus
    event: Event | None = None
    outcome: bool = True
    stalled: bool = False


def attempted(status: ConfigSyncStatus, revision: str) -> ConfigSyncStatus:
    return status.but(last_attempted_revision=revision)


def attempting(status: ConfigSyncStatus, generation: int, revision: str) -> Report | None:
    """A new ``revision`` tried (None: it is the one applied): Reconciling, and said in an Event (a commit status
    marks the commit pending)."""
    if revision == status.last_applied_revision:
        return None
    said = f"applying revision {revision}"
    return Report(progressing(status, generation, said), Event("Normal", "Progressing", said), outcome=False)


def held(before: Before, control: Control, revision: str) -> Report | None:
    """A person's hold on the ConfigSync, or a change of source ``revision`` that waits (None: it syncs). A pin
    holds what is live (a hand-made fix included): nothing is applied or pruned until the source moves past the
    revision it was pinned at, or `unpin`. A new revision waits for its approval, then for a deployment window;
    the revision applied is applied again (drift corrected) at any time. A rollback is a HelmRelease's: ignored."""
    status = before.status
    if control.pin_request is not None:
        status = pinned(status, control.pin_request, status.last_applied_revision, revision)
    elif control.rollback is not None:
        status = handled(status, control.rollback)
    pin = status.pin
    if pin is not None:
        said = (f"pinned at revision {pin.revision or '(none applied)'} by {pin.by or 'someone unknown'} at {pin.at}"
                + (f": {pin.reason}" if pin.reason else "") + "; nothing is applied or pruned until the source "
                "moves past it or `helmop unpin`")
        return _held(Before(status, before.generation, before.secrets), True, "Pinned", said)
    if revision == status.last_applied_revision:
        return None
    if not control.approved:
        return _held(Before(status.but(pending_revision=revision), before.generation, before.secrets), False,
                     "AwaitingApproval", f"revision {revision} awaits approval (`helmop approve`)")
    if control.window:
        return _held(Before(status.but(pending_revision=revision), before.generation, before.secrets), False,
                     "OutsideWindow", f"revision {revision}: {control.window}")
    return None


def _held(before: Before, ready: bool, reason: str, message: str) -> Report:
    """Said in an Event when Ready says something new."""
    was = before.status.condition(READY)
    return _outcome(before, ready, reason, message,
                    event=was is None or (was.reason, was.message) != (reason, message))


def inventoried(status: ConfigSyncStatus, inventory: list[AppliedObject]) -> ConfigSyncStatus:
    """What this ConfigSync applied (now or before): what it prunes from next time."""
    return status.but(inventory=tuple(inventory))


def applied(status: ConfigSyncStatus, revision: str, inventory: list[AppliedObject]) -> ConfigSyncStatus:
    """``revision`` applied in full (and what left git pruned)."""
    return inventoried(status, inventory).but(last_applied_revision=revision)


def failed(before: Before, reason: str, message: str, *, stalled: bool = False, event: bool = True) -> Report:
    """Not Ready, for ``reason``: ``stalled`` when only a change of the spec or its inputs helps."""
    return _outcome(before, False, reason, message, stalled=stalled, event=event)


def waiting(before: Before, dependencies: Sequence[str]) -> Report:
    """Waiting for dependencies (said in an Event when what it waits for changed)."""
    said = f"waiting for {', '.join(dependencies)} to be Ready (spec.dependsOn)"
    ready = before.status.condition(READY)
    return failed(before, "DependencyNotReady", said, event=(ready.message if ready else "") != said)


def unbuilt(before: Before, revision: str, reason: str, problem: str, *, stalled: bool) -> Report:
    """``revision`` could not be built (its variables substituted, its files decrypted or read)."""
    return failed(before, reason, f"revision {revision}: {problem}", stalled=stalled)


def refused(before: Before, revision: str, refusal: Refusal) -> Report:
    """Nothing of ``revision`` applied: its objects are not this ConfigSync's to write."""
    return failed(before, refusal.reason, f"revision {revision}: {refusal.message}", stalled=True)


def apply_failed(before: Before, revision: str, failures: Sequence[str], held: int) -> Report:
    """Objects of ``revision`` refused or failed (the first ten said), and how many were not tried."""
    later = f"; {held} object(s) not applied (that stage and those after it)" if held else ""
    return failed(before, "ApplyFailed", f"revision {revision}: " + "; ".join(failures[:10]) + later)


def unhealthy(before: Before, revision: str, reason: str, problem: str) -> Report:
    return failed(before, reason, f"revision {revision}: {problem}")


def unawaited(status: ConfigSyncStatus, generation: int, revision: str) -> Report:
    """Applied, and its health not awaited (the turn was cut short): recorded, so a later prune finds it."""
    return Report(progressing(status, generation, f"revision {revision} applied; its health was not awaited"),
                  outcome=False)


def synced(before: Before, revision: str, objects: int, pruned: Sequence[ObjectId]) -> Report:
    """``revision`` applied in full (``objects`` of it), ``pruned`` what left it (the first ten named) and healthy;
    said in an Event when the revision or the objects changed."""
    status = before.status
    changed = status.last_applied_revision != revision or bool(pruned)
    done = Before(applied(status, revision, list(status.inventory)), before.generation, before.secrets)
    listed = f" ({', '.join(map(str, pruned[:10]))}{', ...' if len(pruned) > 10 else ''})" if pruned else ""
    return _outcome(done, True, "ReconciliationSucceeded",
                    f"applied revision {revision}: {objects} object(s), pruned {len(pruned)}{listed}", event=changed)


def _outcome(before: Before, ready: bool, reason: str, message: str, *, stalled: bool = False,
             event: bool = True) -> Report:
    message = redact(message, list(before.secrets))
    status = outcome(before.status, before.generation, ready, reason, message, stalled=stalled)
    return Report(status, Event(cond.event_type(ready, reason), reason, message) if event else None,
                  stalled=stalled)
