"""helm rollback: remediation of a failed upgrade (upgrade.remediation.strategy rollback) back to the
last successful revision, with spec.rollback's options. The release then runs the last good chart and
values; the failed configuration is retried while retries remain."""

from __future__ import annotations

from typing import Any

from helmop.api import conditions as cond
from helmop.helm.request import rollback_request

from . import Job, Result, Step, begin, condition, observed, outcome


async def run(job: Job) -> Result:
    target = job.decision.target_revision
    request = rollback_request(job.spec, target, job.acting_as)
    return await outcome(job, "rollback", job.ctx.engine.rollback(request), "RollbackSucceeded",
                         f"Helm rollback of release {job.release} to revision {target} succeeded (now "
                         "revision {revision}) after a failed upgrade")


def settle(status: dict[str, Any], job: Job, result: Result) -> dict[str, Any]:
    out = begin(status, job)
    observed(out, result)
    condition(out, job, cond.READY, False, result.reason, result.message)
    if result.ok:
        condition(out, job, cond.REMEDIATED, True, result.reason, result.message)
    return out


STEP = Step(run, settle)
