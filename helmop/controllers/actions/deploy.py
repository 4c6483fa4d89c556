"""Install and upgrade: one ``helm upgrade --install`` with the options of the one or the other, the
chart's CRDs handled by the CRD policy, then the release's readiness (helm's wait, or helmop's)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

from helmop.api.actions import Action
from helmop.api.status.helmrelease import ReadinessCheck
from helmop.helm.crds import chart_crds
from helmop.helm.engine import UpgradeRequest
from helmop.helm.hooks import needs_helm_wait
from helmop.helm.request import resolved, upgrade_request

from ..readiness import Cancelled, unhealthy
from .job import Job, Result, cancelled, major_notes, outcome, read_release

MANAGER = "helmop-crds"


async def _crds(job: Job, policy: str, action: Action) -> bool:
    """Apply the chart's CRDs when the policy asks helmop to (Create on upgrade: only missing ones;
    CreateReplace: create or update); True when helm must skip its crds/ folder. Never deletes."""
    assert job.inputs is not None
    if policy == "Skip":
        return True
    if action is Action.INSTALL and policy == "Create":
        return False  # helm's own behaviour on install
    if action is Action.UPGRADE and policy not in ("Create", "CreateReplace"):
        return True
    kube = job.cluster.kube.acting_as(job.acting_as)
    for crd in chart_crds(job.inputs.chart_path):
        path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}"
        if policy == "CreateReplace" or await kube.get(path) is None:
            await kube.apply(path, crd, MANAGER)
    return True


async def _readiness(job: Job, disable_wait: bool) -> ReadinessCheck:
    """Who judges the release ready: helm's own wait with waitStrategy legacy, or where the chart has hooks
    helm runs after it; else helmop from its shared watches (waitStrategy poller; status.readinessCheck)."""
    assert job.inputs is not None
    if disable_wait:
        return ReadinessCheck(by="none")
    if job.spec.wait_strategy == "legacy":
        return ReadinessCheck(by="helm", reason="spec.waitStrategy.name is legacy")
    why = await asyncio.to_thread(needs_helm_wait, job.inputs.chart_path)
    return ReadinessCheck(by="helm", reason=why) if why else ReadinessCheck(by="helmop")



def deploy_request(job: Job, action: Action, *, skip_crds: bool, helm_waits: bool) -> UpgradeRequest:
    """The ``helm upgrade --install`` of ``job``'s desired configuration, as ``job``'s identity on its cluster."""
    assert job.inputs is not None
    request = upgrade_request(job.spec, job.namespace, job.name, chart=job.inputs.chart_path,
                              values=job.inputs.values, digest=job.inputs.digest, action=action,
                              tenancy=job.ctx.tenancy, helm_waits=helm_waits, kind=job.key[0])
    return resolved(replace(request, skip_crds=skip_crds, force=request.force or job.decision.force,
                            impersonate=job.acting_as, kubeconfig=job.cluster.kubeconfig), job.state)


async def install(job: Job) -> Result:
    return await _deploy(job, Action.INSTALL)


async def upgrade(job: Job) -> Result:
    return await _deploy(job, Action.UPGRADE)


async def _deploy(job: Job, action: Action) -> Result:
    assert job.inputs is not None
    started = time.monotonic()
    opts = job.spec.install if action is Action.INSTALL else job.spec.upgrade
    verb = action.value
    skip_crds = await _crds(job, opts.crds, action)
    readiness = await _readiness(job, opts.disable_wait)
    request = deploy_request(job, action, skip_crds=skip_crds, helm_waits=readiness.by == "helm")
    result = await outcome(job, verb, job.ctx.services.engine.upgrade(request, action),
                           f"{verb.capitalize()}Succeeded",
                           f"Helm {verb} succeeded for release {job.release}.v{{revision}} with chart {job.chart}"
                           + major_notes(job))
    result = replace(result, readiness=readiness)
    if not result.ok or opts.disable_wait or result.state is None:
        return result
    judged = [(path, obj) for path, obj in result.objects
              if not (opts.disable_wait_for_jobs and obj.get("kind") == "Job")]  # disableWaitForJobs
    try:
        reason, problem = await unhealthy(job.waiter, judged, request.timeout, started)
    except Cancelled:
        return cancelled(job, "health check")
    if not reason:
        return result
    await job.cluster.releases.unlock(result.state, f"health check failed: {problem}")  # helm's record says so too
    state = await read_release(job.cluster, job.spec)
    return Result(False, reason, f"Helm {verb} of release {job.release} with chart {job.chart}: {problem}",
                  history=await asyncio.to_thread(state.history), inventory=result.inventory, state=state,
                  readiness=readiness)
