"""Writing a resource's status and reporting its Ready condition: the one writer every kind's controller
uses, so the rules (write only on change, Reconciling cleared by an outcome, Stalled set or cleared with
it, lastHandledReconcileAt echoed on outcomes) are the same everywhere."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from helmop.api import conditions as cond
from helmop.api.flux import status as flux_status
from helmop.api.kinds import REQUESTED_AT, Kind
from helmop.api.objects import ObjectKey, Resource
from helmop.api.status import S, Status, merge_patch, parse, to_json
from helmop.api.status.sources import (
    BucketStatus,
    GitRepositoryStatus,
    HelmChartStatus,
    HelmRepositoryStatus,
    OCIRepositoryStatus,
)
from helmop.decisions.settle import outcome
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


async def write_status(ctx: Context, kind: Kind, body: dict[str, Any], status: Status, *,
                       outcome: bool = True) -> bool:
    """Write ``status`` if it changed (True when written), as the merge patch from the status the object
    has; a resource deleted meanwhile is not an error. An ``outcome`` (not a progress mark) also records
    the pending reconcile request as handled: ``helmop reconcile`` waits for that, whatever the outcome.
    What reads this object's status (an app its HelmRelease's, a Project its Jenkins's) is woken."""
    if outcome and requested(body):
        status = status.but(last_handled_reconcile_at=requested(body))
    before, after = body.get("status") or {}, to_json(status)
    if kind.flux:
        after = flux_status.outward(kind.kind, after, body)
    if after == before:
        return False
    obj = Resource(body)
    version = ""
    try:
        written = await ctx.services.kube.merge_patch(kind.path(obj.namespace, obj.name) + "/status",
                                                      {"status": merge_patch(before, after)})
        version = str((written.get("metadata") or {}).get("resourceVersion") or "")
    except KubeError as exc:
        if exc.status != 404:
            raise
    body["status"] = after
    ctx.memory.status_written(ObjectKey(kind.key, obj.namespace, obj.name), after, obj.uid, version)
    ctx.memory.notify_referrers(ObjectKey(kind.key, obj.namespace, obj.name))
    return True


def read_status(kind: Kind, of: type[S], body: dict[str, Any]) -> S:
    """The status of ``body`` as ``of`` (written by helmop, or for Flux's kinds by Flux's controllers)."""
    raw = body.get("status")
    return parse(of, flux_status.inward(kind.kind, raw) if kind.flux else raw)


async def report(ctx: Context, kind: Kind, body: dict[str, Any], status: Status, ready: bool, reason: str,
                 message: str, *, stalled: bool = False, event: bool = True) -> None:
    """Write the outcome (see :func:`helmop.decisions.settle.outcome`) and post the matching Event."""
    generation = Resource(body).generation
    await write_status(ctx, kind, body, outcome(status, generation, ready, reason, message, stalled=stalled))
    if event:
        await ctx.services.events.post(body, cond.event_type(ready, reason), reason, message)


Source = GitRepositoryStatus | HelmRepositoryStatus | OCIRepositoryStatus | BucketStatus | HelmChartStatus


def _revision(status: Source) -> tuple[str, str]:
    """What readers read: the revision, and the digest of its content (an include or ignore rule changes it)."""
    return (status.artifact.revision, status.artifact.digest) if status.artifact is not None else ("", "")


async def published(ctx: Context, kind: Kind, body: dict[str, Any], before: Source, after: Source,
                    message: str, *, stops_readers: bool = True) -> None:
    """A source's status after a fetch: written; a new revision said in an Event and its readers woken: what they
    run for the old revision stopped (``stops_readers``), or only a look (a Helm index: its new revision
    seldom changes a given release's chart, which the look finds out). A first revision stops nothing: no
    reader can be running on an older one, and readers that retried as soon as the status was written are
    already acting on this one (stopping them would run each of their actions twice)."""
    await write_status(ctx, kind, body, after)
    if _revision(after) != _revision(before):
        await ctx.services.events.normal(body, "NewArtifact", message)
        obj = Resource(body)
        if stops_readers and _revision(before)[0]:
            ctx.memory.wake_referrers(ObjectKey(kind.key, obj.namespace, obj.name))
        else:
            ctx.memory.notify_referrers(ObjectKey(kind.key, obj.namespace, obj.name))
