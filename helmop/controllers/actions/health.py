"""After helm reports success: every object of the release must become healthy by kstatus rules (or
spec.healthCheckExprs) within the action's timeout, whatever the helm version's --wait checked. An
unhealthy release is a failed one: the deploy action marks helm's record failed (unlock.mark_failed), so
remediation follows."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from helmop.helm.releases import inventory_objects
from helmop.infra.kube import KubeError
from helmop.infra.worker import WorkerTimeout
from helmop.reconcile.health import FAILED, IN_PROGRESS, by_expression, expression_for, judge

from . import Cancelled, Job

POLL = 1.0


async def _judge(job: Job, live: dict[str, Any]) -> tuple[str, str]:
    """kstatus' verdict, or that of the spec.healthCheckExprs entry for the object's kind (evaluated in the
    bounded CEL worker: an expression that runs away fails the check, not the operator)."""
    expr = expression_for(live, job.spec.health_check_exprs)
    if expr is None:
        return judge(live)
    try:
        failed, current = await job.ctx.cel.evaluate([expr.failed or "false", expr.current or "false"], live)
    except WorkerTimeout as exc:
        return FAILED, f"healthCheckExprs: the expressions {exc}"
    return by_expression(expr, failed, current)


async def unhealthy(job: Job, inventory: dict[str, Any], timeout: float) -> str:
    """"" once every object is Current; else, at the first Failed object or at the timeout, what is wrong."""
    kube = job.ctx.kube.acting_as(job.acting_as)
    superseded = job.ctx.superseded(("HelmRelease", job.namespace, job.name))
    deadline = time.monotonic() + timeout
    while True:
        waiting = []
        for api_version, namespace, kind, name in inventory_objects(inventory):
            try:
                live = await kube.get(await kube.path_of(api_version, kind, namespace, name))
            except KubeError as exc:
                waiting.append(f"{kind}/{name}: {exc.message}")
                continue
            state, why = (IN_PROGRESS, "not found") if live is None else await _judge(job, live)
            if state == FAILED:
                return f"{kind} {namespace}/{name} is not healthy: {why}"
            if state == IN_PROGRESS:
                waiting.append(f"{kind}/{name}: {why}")
        if not waiting:
            return ""
        if time.monotonic() > deadline:
            return f"not healthy within {timeout:.0f}s: " + "; ".join(waiting[:5])
        if superseded.is_set():
            raise Cancelled()
        await asyncio.sleep(POLL)
