"""After an apply: until what the ConfigSync applied is healthy, when it asks (spec.wait: every object; else
spec.healthChecks and spec.healthCheckExprs), within spec.timeout."""

from __future__ import annotations

from typing import Any

from helmop.api.objects import ObjectKey
from helmop.api.sources import ConfigSyncSpec
from helmop.decisions.sync import Wanted, apply_order

from ..clusters import Cluster
from ..context import Context
from ..readiness import Waiter, unhealthy


def checked(spec: ConfigSyncSpec, want: Wanted) -> list[dict[str, Any]]:
    """What must become healthy after the apply: every object with spec.wait, else spec.healthChecks."""
    if spec.wait:
        return [want.objects[oid] for oid in apply_order(list(want.objects))]
    return [{"apiVersion": ref.api_version, "kind": ref.kind,
             "metadata": {"name": ref.name, **({"namespace": ref.namespace} if ref.namespace else {})}}
            for ref in spec.health_checks]


async def wait(ctx: Context, cluster: Cluster, key: ObjectKey, spec: ConfigSyncSpec, want: Wanted,
               started: float) -> tuple[str, str]:
    """("", "") once healthy; else the reason and what is not. Raises readiness.Cancelled when a newer
    generation arrives."""
    objects = checked(spec, want)
    if not objects:
        return "", ""
    acting_as = cluster.acting_as(ctx.tenancy, key[1], spec.service_account_name)
    kube = cluster.kube.acting_as(acting_as)
    located = [(await kube.path_of(o["apiVersion"], o["kind"], o["metadata"].get("namespace", ""),
                                   o["metadata"]["name"]), o) for o in objects]
    waiter = Waiter(ctx, cluster, key, acting_as, spec.health_check_exprs)
    return await unhealthy(waiter, located, spec.deadline, started)
