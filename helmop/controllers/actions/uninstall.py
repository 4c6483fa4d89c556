"""helm uninstall: for a deleted HelmRelease (its finalizer), and as remediation of a failed install
(or of a failed upgrade with remediation.strategy uninstall), with spec.uninstall's options."""

from __future__ import annotations

from typing import Any

from helmop.api import conditions as cond
from helmop.helm.request import uninstall_request

from . import Job, Result, Step, begin, condition, observed, outcome


async def run(job: Job) -> Result:
    call = job.ctx.engine.uninstall(uninstall_request(job.spec, job.acting_as))
    why = " after a failed install or upgrade" if job.decision.remediation else ""
    return await outcome(job, "uninstall", call, "UninstallSucceeded",
                         f"Helm uninstall succeeded for release {job.release}{why}")


def settle(status: dict[str, Any], job: Job, result: Result) -> dict[str, Any]:
    out = begin(status, job)
    observed(out, result)
    condition(out, job, cond.READY, False, result.reason, result.message)
    if result.ok and job.decision.remediation:
        condition(out, job, cond.REMEDIATED, True, result.reason, result.message)
    return out


STEP = Step(run, settle)
