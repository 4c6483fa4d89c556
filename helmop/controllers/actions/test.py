"""helm test: runs the chart's test hooks after an install or upgrade (spec.test). A failure counts as
a failed release (remediation follows) unless the failures are ignored: then Ready stays True with
TestSuccess=False."""

from __future__ import annotations

from dataclasses import replace

from helmop.helm.request import helm_test_request

from .job import Job, Result, outcome


async def run(job: Job) -> Result:
    request = replace(helm_test_request(job.spec, job.acting_as), kubeconfig=job.cluster.kubeconfig)
    call = job.ctx.services.engine.test(request)
    return await outcome(job, "test", call, "TestSucceeded",
                         f"Helm test succeeded for release {job.release}.v{{revision}}")
