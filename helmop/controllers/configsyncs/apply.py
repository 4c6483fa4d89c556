"""A ConfigSync's apply, as kustomize-controller's: server-side apply under its own field manager, in stages
(CustomResourceDefinitions, Namespaces and ClusterRoles; then the ``*Class`` kinds; then the rest), each
Established before the next. Every object of a stage is dry-run before any of them is applied: one the API server
refuses stops its stage and those after it, nothing of them applied, every refused object named. An object equal to
its dry run is left alone (no new resourceVersion); the ``ssa`` marks and spec.ignore say what else is
(:mod:`helmop.decisions.ssa`, :mod:`helmop.decisions.fieldowners`). A forced apply recreates an object whose
immutable fields changed. Each stage: its objects seen and dry-run (:mod:`.dryrun`), a plan
(:func:`helmop.decisions.syncplan.staged`), then its actions."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from helmop.api import conditions as cond
from helmop.decisions import ssa
from helmop.decisions.sync import ObjectId, Wanted
from helmop.decisions.syncplan import MANAGER, Act, Action, Rules, staged
from helmop.infra.kube import Kube, KubeError

from . import dryrun
from .observe import path_of

log = logging.getLogger(__name__)


@dataclass
class Applied:
    uids: dict[ObjectId, str] = field(default_factory=dict)  # of each object applied or unchanged, as the API said
    failures: list[str] = field(default_factory=list)  # "<id> ...: <why>"
    skipped: set[ObjectId] = field(default_factory=set)  # left alone on purpose (ssa marks)
    held: int = 0  # objects not applied because a stage had a refused one


async def apply_all(kube: Kube, want: Wanted, live: dict[ObjectId, dict[str, Any] | None], rules: Rules, *,
                    deadline: float) -> Applied:
    """Apply ``want`` (``live``: the objects as read before, None where there was none) stage by stage; after a
    refused dry run or a failed apply, no later stage. ``deadline`` (monotonic): how long a CRD may take to be
    Established."""
    done = Applied()
    stages = ssa.stages(list(want.objects))
    for i, stage in enumerate(stages):
        seen = {oid: await dryrun.seen(kube, oid, want.objects[oid], live.get(oid)) for oid in stage}
        plan = staged(want, stage, seen, rules)
        if plan.refused:
            done.failures += plan.refused
            done.held = sum(len(later) for later in stages[i:])
            break
        for action in plan.actions:
            await _act(kube, action, done)
        if done.failures:
            done.held = sum(len(later) for later in stages[i + 1:])
            break
        await established(kube, [a.oid for a in plan.actions if a.oid.kind == "CustomResourceDefinition"], deadline)
    return done


async def _act(kube: Kube, action: Action, done: Applied) -> None:
    """Phase two for one object."""
    oid = action.oid
    if action.act is Act.SKIP:
        log.debug("%s: not applied (%s)", oid, action.why)
        done.skipped.add(oid)
        return
    if action.act is Act.UNCHANGED:
        done.uids[oid] = action.uid
        return
    try:
        path = await path_of(kube, oid)
        if action.act is Act.RECREATE:
            await _delete(kube, oid, path, action.why)
        applied = await kube.apply(path, action.payload, MANAGER)
        done.uids[oid] = str((applied.get("metadata") or {}).get("uid", ""))
    except KubeError as exc:
        done.failures.append(f"{oid} apply failed ({exc.reason}): {exc.message}")


async def _delete(kube: Kube, oid: ObjectId, path: str, why: str) -> None:
    """Delete an object whose immutable fields changed (spec.force, or its force: enabled mark), until it is gone
    (a finalizer may hold it a while; a minute at most)."""
    log.info("recreating %s: %s", oid, why)
    await kube.request("DELETE", path, {"propagationPolicy": "Background"})  # its dependents go after it
    for _ in range(600):
        if await kube.get(path) is None:
            break
        await asyncio.sleep(0.1)


async def established(kube: Kube, crds: list[ObjectId], deadline: float) -> None:
    """Until every CRD in ``crds`` is Established (its kind is served), or the deadline."""
    for oid in crds:
        path = await path_of(kube, oid)
        while time.monotonic() < deadline:
            live = await kube.get(path) or {}
            if cond.condition_of(live, "Established").get("status") == "True":
                break
            await asyncio.sleep(0.1)
