"""helm test: runs the chart's test hooks after an install or upgrade (spec.test). A failure counts as
a failed release (remediation follows) unless the failures are ignored: then Ready stays True with
TestSuccess=False."""

from __future__ import annotations

from typing import Any

from helmop.api import conditions as cond
from helmop.api.actions import Action
from helmop.helm.request import helm_test_request

from . import Job, Result, Step, begin, condition, failures_key, observed, outcome


async def run(job: Job) -> Result:
    return await outcome(job, "test", job.ctx.engine.test(helm_test_request(job.spec, job.acting_as)), "TestSucceeded",
                         f"Helm test succeeded for release {job.release}.v{{revision}}")


def settle(status: dict[str, Any], job: Job, result: Result) -> dict[str, Any]:
    out = begin(status, job)
    observed(out, result)
    if result.cancelled:
        condition(out, job, cond.READY, False, result.reason, result.message)
        return out
    condition(out, job, cond.TEST_SUCCESS, result.ok, result.reason, result.message)
    action = Action.deploy(str(out.get("lastAttemptedReleaseAction") or ""))
    policy = (job.spec.install if action is Action.INSTALL else job.spec.upgrade).remediation
    if result.ok or policy.ignore_test_failures:
        message = result.message if result.ok else f"{result.message} (test failures are ignored)"
        condition(out, job, cond.READY, True, result.reason, message)
        return out
    if not result.transient:
        out[failures_key(action)] = int(out.get(failures_key(action), 0)) + 1
    condition(out, job, cond.READY, False, result.reason, result.message)
    # Whether retries are left is reconcile.decide's to say (Stalled RetriesExceeded), on the next round.
    return out


STEP = Step(run, settle)
