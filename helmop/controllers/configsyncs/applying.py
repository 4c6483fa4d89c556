"""What a ConfigSync writes and deletes: its marks on what it applies, server-side apply (a forced one
recreates an object whose immutable fields changed), waiting for CRDs it applied, and deleting only the very
objects it applied."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import time
from typing import Any

from helmop.api import conditions as cond
from helmop.api.status.configsync import AppliedObject
from helmop.infra.kube import Kube, KubeError
from helmop.reconcile.sync import ObjectId, owned

log = logging.getLogger(__name__)

MANAGER = "helmop-configsync"
FORCE = "kustomize.toolkit.fluxcd.io/force"  # on an object: recreate it when an immutable field changed
PRUNE = "kustomize.toolkit.fluxcd.io/prune"  # on an object: "disabled" keeps it when it leaves git


def owner_label(namespace: str, name: str) -> str:
    value = f"{namespace}.{name}"
    if len(value) <= 63 and re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", value):
        return value
    return hashlib.sha256(value.encode()).hexdigest()[:40]


async def object_path(kube: Kube, oid: ObjectId) -> str:
    return await kube.path_of(oid.api_version, oid.kind, oid.namespace, oid.name)


async def apply(kube: Kube, oid: ObjectId, obj: dict[str, Any], *, force: bool) -> dict[str, Any]:
    """Server-side apply; an object whose immutable fields changed is deleted and created again when spec.force
    (or its kustomize.toolkit.fluxcd.io/force: enabled mark) says so."""
    path = await object_path(kube, oid)
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
        path = await object_path(kube, oid)
        while time.monotonic() < deadline:
            live = await kube.get(path) or {}
            if cond.condition_of(live, "Established").get("status") == "True":
                break
            await asyncio.sleep(0.1)


def id_of(entry: AppliedObject) -> ObjectId:
    return ObjectId(entry.api_version, entry.kind, entry.namespace, entry.name)


def entry(oid: ObjectId, uids: dict[ObjectId, str]) -> AppliedObject:
    return AppliedObject(api_version=oid.api_version, kind=oid.kind, namespace=oid.namespace, name=oid.name,
                         uid=uids.get(oid, ""))


async def live(kube: Kube, oid: ObjectId) -> dict[str, Any] | None:
    """The object as it is now (None when absent, or not readable: then applying it fails anyway)."""
    try:
        return await kube.get(await object_path(kube, oid))
    except KubeError as exc:
        if exc.status in (403, 404):
            return None
        raise


async def delete(kube: Kube, oid: ObjectId, uid: str, label: str, object_uid: str,
                 origin: dict[str, str] | None = None) -> str:
    """Delete ``oid`` if it is the object this ConfigSync applied: it carries this ConfigSync's marks (or, for a
    Flux Kustomization, Flux's ``origin`` labels) and, when recorded, its own uid is the one applied. A message
    when that failed."""
    try:
        path = await object_path(kube, oid)
        live = await kube.get(path)
        if live is None:
            return ""
        meta = live.get("metadata") or {}
        replaced = bool(object_uid) and meta.get("uid") != object_uid
        if not owned(meta, uid, label, in_inventory=True, origin=origin) or replaced:
            log.info("not pruning %s: it is not the object this ConfigSync applied", oid)
            return ""
        marks = {**(meta.get("labels") or {}), **(meta.get("annotations") or {})}
        if str(marks.get(PRUNE, "")).lower() == "disabled":
            log.info("not pruning %s: it is marked %s: disabled", oid, PRUNE)
            return ""
        # the precondition makes sure the object deleted is the one just checked
        await kube.request("DELETE", path, {"propagationPolicy": "Background",
                                            "preconditions": {"uid": meta.get("uid")}})
    except KubeError as exc:
        if exc.status == 404:
            return ""
        return f"{oid}: prune failed: {exc.message}"
    return ""
