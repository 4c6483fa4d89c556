"""helm uninstall: for a deleted HelmRelease (its finalizer), as remediation of a failed install (or of a
failed upgrade with remediation.strategy uninstall), and before a chart of another name is installed
(upgrade.chartNameChangeStrategy Reinstall), with spec.uninstall's options."""

from __future__ import annotations

from dataclasses import replace

from helmop.decisions import Reason
from helmop.helm.request import uninstall_request

from .job import Job, Result, outcome


async def run(job: Job) -> Result:
    request = replace(uninstall_request(job.spec, job.acting_as), kubeconfig=job.cluster.kubeconfig)
    call = job.ctx.services.engine.uninstall(request)
    why = " after a failed install or upgrade" if job.decision.remediation else \
        f" ({job.decision.message})" if job.decision.reason is Reason.CHART_RENAMED else ""
    return await outcome(job, "uninstall", call, "UninstallSucceeded",
                         f"Helm uninstall succeeded for release {job.release}{why}")
