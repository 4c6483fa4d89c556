"""Drift: find what differs between the live objects and the release's manifest (read from helm's
record, no helm process; a server-side-apply dry run under helm's field manager says what the object
should be; objects unchanged since they were last found clean are not read at all), and correct it by
applying the release's objects again (deleted ones re-created) without a new helm revision.
spec.driftDetection: enabled corrects, warn reports (condition Drifted, Events)."""

from __future__ import annotations

from typing import Any

from helmop.api.objects import Resource
from helmop.decisions.drift import differences, excluded, ignored_paths, owned_by_others
from helmop.helm.releases import FIELD_MANAGER, FIELD_MANAGERS, as_helm_applies
from helmop.infra.kube import KubeError

from ..drift_memory import Clean, LiveKey, fingerprint
from .job import Job, Result, objects


def _as_helm_applies(job: Job, obj: dict[str, Any]) -> dict[str, Any]:
    return as_helm_applies(obj, job.spec.release_name, job.spec.target_namespace)


def _target(job: Job, obj: dict[str, Any]) -> LiveKey:
    meta = obj["metadata"]
    return (job.cluster.key, str(meta.get("namespace") or ""), obj["kind"], meta["name"])


async def _drift(job: Job, path: str, obj: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """What differs between the live object and the release's ("deleted", or JSON pointers; "" for nothing),
    and the live object."""
    kube = job.cluster.kube.acting_as(job.acting_as)
    if excluded(obj):
        return "", None
    live = await kube.get(path)
    if live is None:
        return "deleted", None
    if excluded(live):
        return "", live
    wanted = await kube.apply(path, obj, FIELD_MANAGER, dry_run=True)
    job.ctx.services.metrics.drift_checks.labels("compared").inc()
    return ", ".join(differences(wanted, live, ignored_paths(job.spec.drift_ignore, obj),
                                 owned_by_others(live["metadata"].get("managedFields") or [], FIELD_MANAGERS))), live


async def detect(job: Job) -> tuple[str, ...]:
    """"Kind/name: /path, ..." for every drifted object ("deleted" for a missing one). Objects found clean
    before and unchanged since (``DriftMemory``) are passed over: nothing is read for them."""
    memory, checks = job.ctx.memory.drift, job.ctx.services.metrics.drift_checks
    token = (job.state.version, Resource(job.body).generation)
    unchanged = memory.all_unchanged(job.key, token)
    if unchanged:
        checks.labels("skipped").inc(unchanged)
        return ()
    found, clean = [], {}
    located = await objects(job)
    for path, obj in located:
        obj = _as_helm_applies(job, obj)
        target = _target(job, obj)
        before = memory.clean(job.key, token, target)
        if before is not None:
            clean[target] = before
            checks.labels("skipped").inc()
            continue
        epoch = memory.epoch(target)  # before the read: a watch that breaks after it makes this moot
        diffs, live = await _drift(job, path, obj)
        if diffs:
            found.append(f"{obj['kind']}/{obj['metadata']['name']}: {diffs}")
        elif epoch is not None and live is not None and job.key in job.ctx.memory.observed_by(*target):
            # remembered only while the watches report its changes to this release (its inventory names it)
            clean[target] = Clean(fingerprint(live["metadata"]), epoch)
    memory.found(job.key, token, clean, everything=len(clean) == len(located))
    return tuple(found)


async def run(job: Job) -> Result:
    kube = job.cluster.kube.acting_as(job.acting_as)
    drifted = {entry.partition(":")[0] for entry in job.decision.drifted}
    try:
        for path, obj in await objects(job):
            obj = _as_helm_applies(job, obj)
            # looked at again: an object changed since the decision (an edit of an ignored field) is applied
            # whole only if it still differs
            if f"{obj['kind']}/{obj['metadata']['name']}" in drifted and (await _drift(job, path, obj))[0]:
                await kube.apply(path, obj, FIELD_MANAGER)
    except KubeError as exc:
        return Result(False, "DriftCorrectionFailed", f"correcting drift of {job.release} failed: {exc.message}",
                      transient=True)
    return Result(True, "DriftCorrected", f"release {job.release}: corrected {job.decision.message}")
