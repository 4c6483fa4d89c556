"""helm rollback: remediation of a failed upgrade (upgrade.remediation.strategy rollback) back to the
last successful revision, with spec.rollback's options. The release then runs the last good chart and
values; the failed configuration is retried while retries remain."""

from __future__ import annotations

from dataclasses import replace

from helmop.helm.request import rollback_request

from .job import Job, Result, major_notes, outcome


async def run(job: Job) -> Result:
    target = job.decision.target_revision
    request = replace(rollback_request(job.spec, target, job.acting_as), kubeconfig=job.cluster.kubeconfig)
    if request.server_side == "auto":  # as the revision rolled back to was applied
        request = replace(request, server_side=job.state.server_side(target))
    return await outcome(job, "rollback", job.ctx.services.engine.rollback(request), "RollbackSucceeded",
                         f"Helm rollback of release {job.release} to revision {target} succeeded (now "
                         "revision {revision}) after a failed upgrade" + major_notes(job))
