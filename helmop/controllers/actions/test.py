"""helm test: runs the chart's test hooks after an install or upgrade (spec.test). A failure counts as
a failed release (remediation follows) unless the failures are ignored: then Ready stays True with
TestSuccess=False."""

from __future__ import annotations

from helmop.helm.request import helm_test_request

from .job import Job, Result, outcome


async def run(job: Job) -> Result:
    call = job.ctx.services.engine.test(helm_test_request(job.spec, job.acting_as))
    return await outcome(job, "test", call, "TestSucceeded",
                         f"Helm test succeeded for release {job.release}.v{{revision}}")
