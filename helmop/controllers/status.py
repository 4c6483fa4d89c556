"""Writing a resource's status and reporting its Ready condition: the one writer every kind's controller
uses, so the rules (write only on change, Reconciling cleared by an outcome, Stalled set or cleared with
it, lastHandledReconcileAt echoed on outcomes) are the same everywhere."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from helmop.api import conditions as cond
from helmop.api.kinds import REQUESTED_AT, Kind
from helmop.api.objects import Resource
from helmop.infra.kube import KubeError

from .context import Context


def annotation(body: dict[str, Any], name: str) -> str:
    """The value of an annotation of the object ("" when absent)."""
    return Resource(body).annotation(name)


def requested(body: dict[str, Any]) -> str:
    """The value of helmop.dev/requestedAt ("" when none)."""
    return annotation(body, REQUESTED_AT)


def pending_request(body: dict[str, Any]) -> float:
    """When a reconcile request not yet handled was made (epoch seconds; 0: none pending). A stamp that
    is not a time (Flux allows any string) counts as made now."""
    stamp = requested(body)
    if not stamp or stamp == (body.get("status") or {}).get("lastHandledReconcileAt"):
        return 0.0
    try:
        return datetime.fromisoformat(stamp).timestamp() if not stamp.isdigit() else float(stamp)
    except ValueError:
        return time.time()


async def write_status(ctx: Context, kind: Kind, body: dict[str, Any], status: dict[str, Any], *,
                       outcome: bool = True) -> bool:
    """Merge-patch ``status`` if it changed (True when written); a resource deleted meanwhile is not an
    error. An ``outcome`` (not a progress mark) also records the pending reconcile request as handled:
    ``helmop reconcile`` waits for that, whatever the outcome. What reads this object's status (an app its
    HelmRelease's, a Project its Jenkins's) is woken."""
    if outcome and requested(body):
        status = {**status, "lastHandledReconcileAt": requested(body)}
    if status == body.get("status"):
        return False
    obj = Resource(body)
    try:
        await ctx.kube.merge_patch(kind.path(obj.namespace, obj.name) + "/status", {"status": status})
    except KubeError as exc:
        if exc.status != 404:
            raise
    body["status"] = status
    ctx.status_written((kind.kind, obj.namespace, obj.name), status)
    ctx.notify_referrers(obj.namespace, kind.kind, obj.name)
    return True


def with_ready(body: dict[str, Any], status: dict[str, Any], ready: bool, reason: str, message: str,
               *, stalled: bool = False) -> dict[str, Any]:
    """``status`` with an outcome: Ready (and Stalled) set, Reconciling cleared."""
    generation = Resource(body).generation
    conditions = cond.set_condition(status.get("conditions") or [], cond.READY, ready, reason, message, generation)
    conditions = cond.remove_condition(conditions, cond.RECONCILING)
    if stalled:
        conditions = cond.set_condition(conditions, cond.STALLED, True, reason, message, generation)
    else:
        conditions = cond.remove_condition(conditions, cond.STALLED)
    return {**status, "conditions": conditions, "observedGeneration": generation}


async def report(ctx: Context, kind: Kind, body: dict[str, Any], status: dict[str, Any], ready: bool, reason: str,
                 message: str, *, stalled: bool = False, event: bool = True) -> None:
    """Write the outcome (see :func:`with_ready`) and post the matching Event."""
    await write_status(ctx, kind, body, with_ready(body, status, ready, reason, message, stalled=stalled))
    if event:
        await ctx.events.post(body, cond.event_type(ready, reason), reason, message)
