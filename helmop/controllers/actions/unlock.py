"""Unlock: a release stuck ``pending-*`` (helm was stopped mid-action) is marked failed in helm's own
record, as Flux does, so the next action can proceed. One API write, no helm process."""

from __future__ import annotations

from typing import Any

from helmop.helm import storage

from . import Job, Result, Step, begin


async def run(job: Job) -> Result:
    secrets = await job.ctx.kube.list(f"/api/v1/namespaces/{job.spec.storage_namespace}/secrets",
                                      storage.selector(job.spec.release_name))
    record = storage.latest(secrets)
    if record is None:
        return Result(True, "ReleaseUnlocked", "the release record is gone; nothing to unlock")
    secret = storage.unlocked(record.secret, "marked failed by helmop: the previous action never finished")
    meta = secret["metadata"]
    await job.ctx.kube.request("PUT", f"/api/v1/namespaces/{meta['namespace']}/secrets/{meta['name']}", secret)
    return Result(True, "ReleaseUnlocked", job.decision.message)


def settle(status: dict[str, Any], job: Job, result: Result) -> dict[str, Any]:
    return begin(status, job)


STEP = Step(run, settle)
