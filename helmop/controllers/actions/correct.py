"""Drift: find what differs between the live objects and the release's manifest (read from helm's
record, no helm process; a server-side-apply dry run under helm's field manager says what the object
should be), and correct it by applying the release's objects again (deleted ones re-created) without a
new helm revision. spec.driftDetection: enabled corrects, warn reports (condition Drifted, Events)."""

from __future__ import annotations

from typing import Any

from helmop.helm.releases import FIELD_MANAGER, FIELD_MANAGERS, as_helm_applies
from helmop.infra.kube import KubeError
from helmop.reconcile.drift import differences, ignored_paths, owned_by_others

from .job import Job, Result, objects


def _as_helm_applies(job: Job, obj: dict[str, Any]) -> dict[str, Any]:
    return as_helm_applies(obj, job.spec.release_name, job.spec.target_namespace)


async def _drift(job: Job, path: str, obj: dict[str, Any]) -> str:
    """What differs between the live object and the release's ("deleted", or JSON pointers; "" for nothing)."""
    kube = job.ctx.services.kube.acting_as(job.acting_as)
    live = await kube.get(path)
    if live is None:
        return "deleted"
    wanted = await kube.apply(path, obj, FIELD_MANAGER, dry_run=True)
    return ", ".join(differences(wanted, live, ignored_paths(job.spec.drift_ignore, live),
                                 owned_by_others(live["metadata"].get("managedFields") or [], FIELD_MANAGERS)))


async def detect(job: Job) -> tuple[str, ...]:
    """"Kind/name: /path, ..." for every drifted object ("deleted" for a missing one)."""
    found = []
    for path, obj in await objects(job):
        obj = _as_helm_applies(job, obj)
        diffs = await _drift(job, path, obj)
        if diffs:
            found.append(f"{obj['kind']}/{obj['metadata']['name']}: {diffs}")
    return tuple(found)


async def run(job: Job) -> Result:
    kube = job.ctx.services.kube.acting_as(job.acting_as)
    drifted = {entry.partition(":")[0] for entry in job.decision.drifted}
    try:
        for path, obj in await objects(job):
            obj = _as_helm_applies(job, obj)
            # looked at again: an object changed since the decision (an edit of an ignored field) is applied
            # whole only if it still differs
            if f"{obj['kind']}/{obj['metadata']['name']}" in drifted and await _drift(job, path, obj):
                await kube.apply(path, obj, FIELD_MANAGER)
    except KubeError as exc:
        return Result(False, "DriftCorrectionFailed", f"correcting drift of {job.release} failed: {exc.message}",
                      transient=True)
    return Result(True, "DriftCorrected", f"release {job.release}: corrected {job.decision.message}")
