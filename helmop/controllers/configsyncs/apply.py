"""A ConfigSync's apply: every object by server-side apply under its own field manager, in dependency order
(the CRDs it applies Established before any object of theirs); a forced apply recreates an object whose
immutable fields changed."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from helmop.api import conditions as cond
from helmop.infra.kube import Kube, KubeError
from helmop.reconcile.sync import Desired, ObjectId, apply_order

from .observe import path_of

log = logging.getLogger(__name__)

MANAGER = "helmop-configsync"
FORCE = "kustomize.toolkit.fluxcd.io/force"  # on an object: recreate it when an immutable field changed


@dataclass
class Applied:
    uids: dict[ObjectId, str] = field(default_factory=dict)  # of each object applied, as the API answered
    failures: list[str] = field(default_factory=list)  # "<id>: <why>"


async def apply_all(kube: Kube, want: Desired, *, force: bool, deadline: float) -> Applied:
    """Apply every object of ``want`` in order; one that fails does not stop the others. ``deadline``
    (monotonic): how long a CRD may take to be Established."""
    done = Applied()
    crds: list[ObjectId] = []
    for oid in apply_order(list(want.objects)):
        try:
            if crds and oid.kind not in ("CustomResourceDefinition", "Namespace"):
                await established(kube, crds, deadline)  # before any object of theirs
                crds = []
            live = await apply(kube, oid, want.objects[oid], force=force)
            done.uids[oid] = str((live.get("metadata") or {}).get("uid", ""))
            if oid.kind == "CustomResourceDefinition":
                crds.append(oid)
        except KubeError as exc:
            done.failures.append(f"{oid}: {exc.message}")
    return done


async def apply(kube: Kube, oid: ObjectId, obj: dict[str, Any], *, force: bool) -> dict[str, Any]:
    """Server-side apply; an object whose immutable fields changed is deleted and created again when spec.force
    (or its kustomize.toolkit.fluxcd.io/force: enabled mark) says so."""
    path = await path_of(kube, oid)
    try:
        return await kube.apply(path, obj, MANAGER)
    except KubeError as exc:
        marks = {**(obj["metadata"].get("labels") or {}), **(obj["metadata"].get("annotations") or {})}
        forced = force or str(marks.get(FORCE, "")).lower() == "enabled"
        if not (forced and exc.status == 422 and "immutable" in exc.message):
            raise
    log.info("recreating %s: an immutable field changed (force)", oid)
    await kube.request("DELETE", path, {"propagationPolicy": "Background"})  # its dependents go after it
    for _ in range(600):  # a finalizer may hold it a while; a minute at most
        if await kube.get(path) is None:
            break
        await asyncio.sleep(0.1)
    return await kube.apply(path, obj, MANAGER)


async def established(kube: Kube, crds: list[ObjectId], deadline: float) -> None:
    """Until every CRD in ``crds`` is Established (its kind is served), or the deadline."""
    for oid in crds:
        path = await path_of(kube, oid)
        while time.monotonic() < deadline:
            live = await kube.get(path) or {}
            if cond.condition_of(live, "Established").get("status") == "True":
                break
            await asyncio.sleep(0.1)
