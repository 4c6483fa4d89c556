"""Unlock: a release stuck ``pending-*`` (helm was stopped mid-action) is marked failed in helm's own
record, as Flux does, so the next action can proceed. One API write, no helm process."""

from __future__ import annotations

from .job import Job, Result


async def run(job: Job) -> Result:
    why = "marked failed by helmop: the previous action never finished"
    if not await job.cluster.releases.unlock(job.state, why):
        return Result(True, "ReleaseUnlocked", "the release record is gone; nothing to unlock")
    return Result(True, "ReleaseUnlocked", job.decision.message)
