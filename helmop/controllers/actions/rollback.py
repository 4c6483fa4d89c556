"""helm rollback, with spec.rollback's options: remediation of a failed upgrade (upgrade.remediation.strategy
rollback) back to the last successful revision, after which the failed configuration is retried while retries
remain; or a person's rollback (`helmop rollback`) to the revision they named, after which the release is
pinned there."""

from __future__ import annotations

from dataclasses import replace

from helmop.helm.request import rollback_request

from .job import Job, Result, major_notes, outcome


async def run(job: Job) -> Result:
    target = job.decision.target_revision
    request = replace(rollback_request(job.spec, target, job.acting_as), kubeconfig=job.cluster.kubeconfig)
    if request.server_side == "auto":  # as the revision rolled back to was applied
        request = replace(request, server_side=job.state.server_side(target))
    asked = job.decision.asked
    why = f"as asked {asked.said()}; pinned there" if asked is not None else "after a failed upgrade"
    why = why.replace("{", "{{").replace("}", "}}")  # formatted with the revision below: a reason keeps its braces
    return await outcome(job, "rollback", job.ctx.services.engine.rollback(request), "RollbackSucceeded",
                         f"Helm rollback of release {job.release} to revision {target} succeeded (now "
                         f"revision {{revision}}) {why}" + major_notes(job))
