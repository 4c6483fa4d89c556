"""helm upgrade, with the spec's upgrade options (what install and upgrade share is in deploy.py)."""

from __future__ import annotations

from typing import Any

from helmop.api.actions import Action

from . import Job, Result, Step, deploy


async def run(job: Job) -> Result:
    return await deploy.run(job, Action.UPGRADE)


def settle(status: dict[str, Any], job: Job, result: Result) -> dict[str, Any]:
    return deploy.settle(status, job, result, Action.UPGRADE)


STEP = Step(run, settle)
