"""Unlock: a release stuck ``pending-*`` (helm was stopped mid-action) is marked failed in helm's own
record, as Flux does, so the next action can proceed. One API write, no helm process."""

from __future__ import annotations

from typing import Any

from helmop.helm import storage

from . import Job, Result, Step, begin, latest_record


async def mark_failed(job: Job, why: str) -> bool:
    """Record the release's newest revision as failed in helm's own storage; False when there is none."""
    record = await latest_record(job)
    if record is None:
        return False
    secret = storage.unlocked(record.secret, why)
    meta = secret["metadata"]
    await job.ctx.kube.request("PUT", f"/api/v1/namespaces/{meta['namespace']}/secrets/{meta['name']}", secret)
    return True


async def run(job: Job) -> Result:
    if not await mark_failed(job, "marked failed by helmop: the previous action never finished"):
        return Result(True, "ReleaseUnlocked", "the release record is gone; nothing to unlock")
    return Result(True, "ReleaseUnlocked", job.decision.message)


def settle(status: dict[str, Any], job: Job, result: Result) -> dict[str, Any]:
    return begin(status, job)


STEP = Step(run, settle)
