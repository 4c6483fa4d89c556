"""What a ConfigSync deletes: the objects it applied that left its source (prune), and all of them when it
is deleted itself; only the very objects it applied, never one that someone else re-created under the name.

An object recorded in a version the server no longer serves (a Flux version removed: ``--flux-api=current``, or
Flux's own CRDs back) is the same object in the version its group serves now; a kind the server does not serve
at all is no proof the object is gone (a CRD briefly missing would orphan it), so that fails the prune."""

from __future__ import annotations

import logging

from helmop.decisions.sync import Marks, ObjectId, owned
from helmop.infra.kube import Kube, KubeError

from .observe import path_of

log = logging.getLogger(__name__)

Served = dict[str, frozenset[str]]  # apiVersion -> the kinds discovery lists in it, asked once per prune
MAX_VERSIONS = 16  # versions of a group tried (kube-apiserver serves a handful)
PRUNE = "kustomize.toolkit.fluxcd.io/prune"  # on an object: "disabled" keeps it when it leaves git


async def prune(kube: Kube, gone: list[ObjectId], marks: Marks, uids: dict[ObjectId, str]) -> tuple[list[ObjectId],
                                                                                                     list[str]]:
    """Delete ``gone`` (in that order): what was pruned, and a message for each object that could not be."""
    pruned: list[ObjectId] = []
    failures: list[str] = []
    served: Served = {}
    for oid in gone:
        problem = await delete(kube, oid, marks, uids.get(oid, ""), served)
        if problem:
            failures.append(problem)
        else:
            pruned.append(oid)
    return pruned, failures


async def delete(kube: Kube, oid: ObjectId, marks: Marks, object_uid: str, served: Served) -> str:
    """Delete ``oid`` if it is the object this ConfigSync applied: it carries this ConfigSync's marks (or, for a
    Flux Kustomization, Flux's origin labels) and, when recorded, its own uid is the one applied. A message
    when that failed."""
    try:
        path = await served_path(kube, oid, served)
    except KubeError as exc:
        return f"{oid}: prune failed: {exc.message}"
    try:
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


async def served_path(kube: Kube, oid: ObjectId, served: Served) -> str:
    """The REST path of ``oid``, in the version its group serves it in when its own version is not served
    (discovery, asked afresh once per prune in ``served``: the client's cache would take the old version's 404
    for the object's; the preferred version first); KubeError 404 when no version of its group serves its kind."""
    if await _serves(kube, oid.api_version, oid.kind, served):
        return await path_of(kube, oid)
    group = (await kube.get(f"/apis/{oid.group}") if oid.group else None) or {}
    preferred = (group.get("preferredVersion") or {}).get("groupVersion")
    versions = [str(v.get("groupVersion")) for v in (group.get("versions") or [])[:MAX_VERSIONS] if isinstance(v, dict)]
    for api_version in dict.fromkeys([*([preferred] if preferred else []), *versions]):
        if api_version != oid.api_version and await _serves(kube, api_version, oid.kind, served):
            return await kube.path_of(api_version, oid.kind, oid.namespace, oid.name)
    raise KubeError(404, "NotFound", f"the server serves no {oid.kind} of {oid.group or 'the core group'} "
                                     f"(recorded as {oid.api_version}): not known to be gone")


async def _serves(kube: Kube, api_version: str, kind: str, served: Served) -> bool:
    if api_version not in served:
        listed = await kube.get(f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}") or {}
        served[api_version] = frozenset(str(r.get("kind")) for r in listed.get("resources") or []
                                        if isinstance(r, dict) and "/" not in str(r.get("name")))
    return kind in served[api_version]
