"""A ConfigSync's apply, as kustomize-controller's: server-side apply under its own field manager, in stages
(CustomResourceDefinitions, Namespaces and ClusterRoles; then the ``*Class`` kinds; then the rest), each
Established before the next. Every object of a stage is dry-run before any of them is applied: one the API server
refuses stops its stage and those after it, nothing of them applied, every refused object named. An object equal to
its dry run is left alone (no new resourceVersion); the ``ssa`` marks and spec.ignore say what else is
(:mod:`helmop.decisions.ssa`, :mod:`helmop.decisions.fieldowners`). A forced apply recreates an object whose
immutable fields changed."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from helmop.api import conditions as cond
from helmop.api.flux import versions
from helmop.api.ignorerules import IgnoreRule, ignored
from helmop.decisions import fieldowners, ssa
from helmop.decisions.sync import Desired, ObjectId
from helmop.infra.kube import Kube, KubeError

from .observe import path_of

log = logging.getLogger(__name__)

MANAGER = "helmop-configsync"
FORCE = "kustomize.toolkit.fluxcd.io/force"  # on an object: recreate it when an immutable field changed
JSON_PATCH = "application/json-patch+json"


@dataclass(frozen=True)
class Rules:
    """What the spec says of every apply: spec.force, spec.ignore."""

    force: bool = False
    ignore: tuple[IgnoreRule, ...] = ()


@dataclass(frozen=True)
class _Plan:
    """What phase two does with one object: create, configure, recreate, or nothing (unchanged, skipped)."""

    oid: ObjectId
    action: str
    payload: dict[str, Any]
    uid: str = ""  # of the live object left as it is


@dataclass
class Applied:
    uids: dict[ObjectId, str] = field(default_factory=dict)  # of each object applied or unchanged, as the API said
    failures: list[str] = field(default_factory=list)  # "<id> ...: <why>"
    skipped: set[ObjectId] = field(default_factory=set)  # left alone on purpose (ssa marks)
    held: int = 0  # objects not applied because a stage had a refused one


class _Refused(Exception):
    pass


async def apply_all(kube: Kube, want: Desired, live: dict[ObjectId, dict[str, Any] | None], rules: Rules, *,
                    deadline: float) -> Applied:
    """Apply ``want`` (``live``: the objects as read before, None where there was none) stage by stage; after a
    refused dry run or a failed apply, no later stage. ``deadline`` (monotonic): how long a CRD may take to be
    Established."""
    done = Applied()
    staged = ssa.stages(list(want.objects))
    for i, stage in enumerate(staged):
        plans, refused = [], []
        for oid in stage:
            try:
                plans.append(await _plan(kube, oid, want.objects[oid], live.get(oid), rules))
            except _Refused as exc:
                refused.append(f"{exc} (apiVersion {oid.api_version}, {want.origins[oid]})")
        if refused:
            done.failures += refused
            done.held = sum(len(later) for later in staged[i:])
            break
        for plan in plans:
            await _act(kube, plan, done)
        if done.failures:
            done.held = sum(len(later) for later in staged[i + 1:])
            break
        await established(kube, [p.oid for p in plans if p.oid.kind == "CustomResourceDefinition"], deadline)
    return done


async def _plan(kube: Kube, oid: ObjectId, obj: dict[str, Any], live: dict[str, Any] | None, rules: Rules) -> _Plan:
    """Phase one for one object: read it when it was not there before (an earlier stage's CRD serves it now), take
    over what kubectl wrote of it (unless ssa: Merge), dry-run its apply and judge the drift. _Refused when the API
    server refuses it."""
    try:
        path = await path_of(kube, oid)
        live = live if live is not None else await kube.get(path)
    except KubeError as exc:
        # a version of Flux's that Flux removed, where it is not served (--flux-api=current): what to write instead
        removed = [r.message for r in versions.refusals(obj) if r.reason == "RemovedAPIVersion"]
        raise _Refused(f"{oid} dry-run failed ({exc.reason}): {exc.message}"
                       + "".join(f": {message}" for message in removed if exc.status == 404)) from None
    why = ssa.skipped(obj, live)
    if why:
        log.debug("%s: not applied (%s)", oid, why)
        return _Plan(oid, "skipped", obj)
    if live is not None and not ssa.merges(obj, live):
        live = await _take_over(kube, oid, path, live)
    try:
        dry_run = await kube.apply(path, obj, MANAGER, dry_run=True)
    except KubeError as exc:
        if live is not None and exc.status == 422 and "immutable" in exc.message and _forced(obj, rules):
            return _Plan(oid, "recreate", obj)
        raise _Refused(f"{oid} dry-run failed ({exc.reason}): {exc.message}") from None
    if live is None:
        return _Plan(oid, "create", obj)
    paths = ignored(rules.ignore, dry_run)
    if not ssa.drifted(live, dry_run, paths):
        return _Plan(oid, "unchanged", obj, str(live["metadata"].get("uid", "")))
    return _Plan(oid, "configure", fieldowners.resolved(obj, live, dry_run, paths, MANAGER))


async def _take_over(kube: Kube, oid: ObjectId, path: str, live: dict[str, Any]) -> dict[str, Any]:
    """``live`` once this ConfigSync's manager owns what kubectl wrote of it (fieldowners.TAKEN_OVER)."""
    patch = fieldowners.taken_over(live, MANAGER)
    if not patch:
        return live
    try:
        return await kube.request("PATCH", path, patch, params={"fieldManager": MANAGER}, content_type=JSON_PATCH)
    except KubeError as exc:
        raise _Refused(f"{oid} metadata.managedFields cleanup failed ({exc.reason}): {exc.message}") from None


def _forced(obj: dict[str, Any], rules: Rules) -> bool:
    return rules.force or ssa.mark(obj, FORCE) == "enabled"


async def _act(kube: Kube, plan: _Plan, done: Applied) -> None:
    """Phase two for one object."""
    oid = plan.oid
    if plan.action == "skipped":
        done.skipped.add(oid)
        return
    if plan.action == "unchanged":
        done.uids[oid] = plan.uid
        return
    try:
        path = await path_of(kube, oid)
        if plan.action == "recreate":
            await _delete(kube, oid, path)
        applied = await kube.apply(path, plan.payload, MANAGER)
        done.uids[oid] = str((applied.get("metadata") or {}).get("uid", ""))
    except KubeError as exc:
        done.failures.append(f"{oid} apply failed ({exc.reason}): {exc.message}")


async def _delete(kube: Kube, oid: ObjectId, path: str) -> None:
    """Delete an object whose immutable fields changed (spec.force, or its force: enabled mark), until it is gone
    (a finalizer may hold it a while; a minute at most)."""
    log.info("recreating %s: an immutable field changed (force)", oid)
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
