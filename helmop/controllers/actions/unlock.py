"""Unlock: a release stuck ``pending-*`` (helm was stopped mid-action) is marked failed in helm's own
record, as Flux does, so the next action can proceed. One API write, no helm process."""

from __future__ import annotations

from typing import Any

from . import Job, Result, Step, begin


async def run(job: Job) -> Result:
    if not await job.ctx.releases.unlock(job.state, "marked failed by helmop: the previous action never finished"):
        return Result(True, "ReleaseUnlocked", "the release record is gone; nothing to unlock")
    return Result(True, "ReleaseUnlocked", job.decision.message)


def settle(status: dict[str, Any], job: Job, result: Result) -> dict[str, Any]:
    return begin(status, job)


STEP = Step(run, settle)
