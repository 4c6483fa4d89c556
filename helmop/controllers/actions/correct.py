"""Drift: find what differs between the live objects and the release's manifest (read from helm's
record, no helm process; a server-side-apply dry run under helm's field manager says what the object
should be), and correct it by applying the release's objects again (deleted ones re-created) without a
new helm revision. spec.driftDetection: enabled corrects, warn reports (condition Drifted, Events)."""

from __future__ import annotations

from typing import Any

from helmop.api import conditions as cond
from helmop.helm import storage
from helmop.reconcile.drift import HELM_MANAGERS, differences, ignored_paths, owned_by_others

from ..kube import Kube, KubeError
from . import Job, Result, Step, begin, condition, latest_record

MANAGER = HELM_MANAGERS[0]  # re-applied as helm's own manager, so helm's next upgrade owns the fields again


async def _objects(job: Job, kube: Kube) -> list[tuple[str, dict[str, Any]]]:
    """(REST path, object) of the release's current manifest."""
    record = await latest_record(job)
    if record is None:
        return []
    out = []
    for obj in storage.manifest_objects(storage.decode(record.secret)):
        api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
        try:
            plural, namespaced = await kube.resource(api_version, kind)
        except KubeError:
            continue
        meta = obj.setdefault("metadata", {})
        # what helm itself adds to every object it applies (not part of the manifest it records)
        meta.setdefault("labels", {})["app.kubernetes.io/managed-by"] = "Helm"
        meta.setdefault("annotations", {}).update({"meta.helm.sh/release-name": job.spec.release_name,
                                                   "meta.helm.sh/release-namespace": job.spec.target_namespace})
        prefix = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
        if namespaced:
            meta.setdefault("namespace", job.spec.target_namespace)
            out.append((f"{prefix}/namespaces/{meta['namespace']}/{plural}/{meta['name']}", obj))
        else:
            out.append((f"{prefix}/{plural}/{meta['name']}", obj))
    return out


async def detect(job: Job) -> tuple[str, ...]:
    """"Kind/name: /path, ..." for every drifted object ("deleted" for a missing one)."""
    kube = job.ctx.kube.acting_as(job.acting_as)
    found = []
    for path, obj in await _objects(job, kube):
        what = f"{obj['kind']}/{obj['metadata']['name']}"
        live = await kube.get(path)
        if live is None:
            found.append(f"{what}: deleted")
            continue
        wanted = await kube.apply(path, obj, MANAGER, dry_run=True)
        diffs = differences(wanted, live, ignored_paths(job.spec.drift_ignore, live),
                            owned_by_others(live["metadata"].get("managedFields") or []))
        if diffs:
            found.append(f"{what}: {', '.join(diffs)}")
    return tuple(found)


async def run(job: Job) -> Result:
    kube = job.ctx.kube.acting_as(job.acting_as)
    drifted = {part.split(":")[0] for part in job.decision.message.removeprefix("drift: ").split("; ")}
    try:
        for path, obj in await _objects(job, kube):
            if f"{obj['kind']}/{obj['metadata']['name']}" in drifted:
                await kube.apply(path, obj, MANAGER)
    except KubeError as exc:
        return Result(False, "DriftCorrectionFailed", f"correcting drift of {job.release} failed: {exc.message}",
                      transient=True)
    return Result(True, "DriftCorrected", f"release {job.release}: corrected {job.decision.message}")


def settle(status: dict[str, Any], job: Job, result: Result) -> dict[str, Any]:
    out = begin(status, job)
    condition(out, job, cond.DRIFTED, not result.ok, result.reason, result.message)
    return out


STEP = Step(run, settle)
