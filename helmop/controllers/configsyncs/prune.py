"""What a ConfigSync deletes: the objects it applied that left its source (prune), and all of them when it
is deleted itself; only the very objects it applied, never one that someone else re-created under the name."""

from __future__ import annotations

import logging

from helmop.infra.kube import Kube, KubeError
from helmop.reconcile.sync import Marks, ObjectId, owned

from .observe import path_of

log = logging.getLogger(__name__)

PRUNE = "kustomize.toolkit.fluxcd.io/prune"  # on an object: "disabled" keeps it when it leaves git


async def prune(kube: Kube, gone: list[ObjectId], marks: Marks, uids: dict[ObjectId, str]) -> tuple[list[ObjectId],
                                                                                                     list[str]]:
    """Delete ``gone`` (in that order): what was pruned, and a message for each object that could not be."""
    pruned: list[ObjectId] = []
    failures: list[str] = []
    for oid in gone:
        problem = await delete(kube, oid, marks, uids.get(oid, ""))
        if problem:
            failures.append(problem)
        else:
            pruned.append(oid)
    return pruned, failures


async def delete(kube: Kube, oid: ObjectId, marks: Marks, object_uid: str) -> str:
    """Delete ``oid`` if it is the object this ConfigSync applied: it carries this ConfigSync's marks (or, for a
    Flux Kustomization, Flux's origin labels) and, when recorded, its own uid is the one applied. A message
    when that failed."""
    try:
        path = await path_of(kube, oid)
        live = await kube.get(path)
        if live is None:
            return ""
        meta = live.get("metadata") or {}
        replaced = bool(object_uid) and meta.get("uid") != object_uid
        if not owned(meta, marks.uid, marks.label, in_inventory=True, origin=marks.origin) or replaced:
            log.info("not pruning %s: it is not the object this ConfigSync applied", oid)
            return ""
        kept = {**(meta.get("labels") or {}), **(meta.get("annotations") or {})}
        if str(kept.get(PRUNE, "")).lower() == "disabled":
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
