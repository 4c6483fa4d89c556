"""One reconcile of a ConfigSync: apply the manifests under a path of a GitRepository, then prune.

Manifests are applied with server-side apply under a field manager of their own, in dependency
order (CRDs and Namespaces first), each labelled with the ConfigSync that applied it. A broken
file stops the whole sync before anything is applied or pruned; objects that git no longer has are
deleted only when they carry this ConfigSync's label (never someone else's object).
"""

from __future__ import annotations

import copy
import hashlib
import logging
import posixpath
import re
from typing import Any

from helmop.api import manifests
from helmop.api.helmrelease import SpecError
from helmop.api.kinds import CONFIGSYNC
from helmop.api.sources import parse_config_sync
from helmop.reconcile.sync import ObjectId, apply_order, to_prune
from helmop.sources.errors import SourceError

from .context import Context
from .inputs import InputError, source_revision
from .kube import KubeError
from .status import report

log = logging.getLogger(__name__)
MANAGER = "helmop-configsync"
LABEL = "helmop.dev/configsync"


def owner_label(namespace: str, name: str) -> str:
    value = f"{namespace}.{name}"
    if len(value) <= 63 and re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", value):
        return value
    return hashlib.sha256(value.encode()).hexdigest()[:40]


async def object_path(ctx: Context, oid: ObjectId) -> str:
    plural, namespaced = await ctx.kube.resource(oid.api_version, oid.kind)
    prefix = f"/apis/{oid.api_version}" if "/" in oid.api_version else f"/api/{oid.api_version}"
    if namespaced:
        return f"{prefix}/namespaces/{oid.namespace}/{plural}/{oid.name}"
    return f"{prefix}/{plural}/{oid.name}"


async def reconcile(ctx: Context, body: dict[str, Any]) -> float | None:
    meta = body["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    status = copy.deepcopy(body.get("status") or {})
    try:
        spec = parse_config_sync(body.get("spec") or {})
    except SpecError as exc:
        await report(ctx, CONFIGSYNC, body, status, False, exc.reason, str(exc), stalled=True)
        return None
    if spec.suspend:
        return None
    ctx.refer(("ConfigSync", namespace, name), [(namespace, "GitRepository", spec.source_name)])
    try:
        url, revision, sha, _repo = await source_revision(ctx, namespace, spec.source_name)
        files = await ctx.git.files(url, sha, spec.path)
    except (InputError, SourceError) as exc:
        transient = getattr(exc, "transient", False)
        await report(ctx, CONFIGSYNC, body, status, False, exc.reason, str(exc), stalled=not transient)
        return 15.0 if transient else None
    status["lastAttemptedRevision"] = revision
    # Repository-relative names, so messages point at the file as the user knows it.
    found, errors = manifests.parse({posixpath.join(spec.path, rel): data for rel, data in files.items()})
    if errors:
        message = f"revision {revision}: {len(errors)} broken manifest(s), nothing applied: " + "; ".join(errors[:5])
        await report(ctx, CONFIGSYNC, body, status, False, "ManifestInvalid", message, stalled=True)
        return None
    label = owner_label(namespace, name)
    objects: dict[ObjectId, dict[str, Any]] = {}
    failures: list[str] = []
    for item in found:
        obj = copy.deepcopy(item.obj)
        try:
            _plural, namespaced = await ctx.kube.resource(item.api_version, item.kind)
        except KubeError as exc:
            if item.kind == "CustomResourceDefinition" or exc.status != 404:
                raise
            namespaced = True  # its CRD comes in this same sync; checked again when applied
        obj_meta = obj.setdefault("metadata", {})
        if namespaced:
            obj_meta.setdefault("namespace", namespace)
        else:
            obj_meta.pop("namespace", None)
        obj_meta.setdefault("labels", {})[LABEL] = label
        oid = ObjectId(item.api_version, item.kind, obj_meta.get("namespace", ""), item.name)
        if oid in objects:
            failures.append(f"{oid}: defined twice ({item.origin})")
        objects[oid] = obj
    for oid in apply_order(list(objects)):
        try:
            await ctx.kube.apply(await object_path(ctx, oid), objects[oid], MANAGER)
        except KubeError as exc:
            failures.append(f"{oid}: {exc.message}")
    previous = [ObjectId.from_json(x) for x in status.get("inventory") or []]
    if spec.prune and not failures:
        for oid in to_prune(previous, list(objects)):
            problem = await _delete(ctx, oid, label)
            if problem:
                failures.append(problem)
    status["inventory"] = [oid.to_json() for oid in sorted(objects)]
    if failures:
        # keep what could not be pruned in the inventory, so the next sync tries again
        pending = [o for o in previous if any(f.startswith(str(o)) for f in failures) and o not in objects]
        status["inventory"] += [oid.to_json() for oid in pending]
        message = f"revision {revision}: " + "; ".join(failures[:10])
        await report(ctx, CONFIGSYNC, body, status, False, "ApplyFailed", message)
        return 30.0
    changed = status.get("lastAppliedRevision") != revision
    status["lastAppliedRevision"] = revision
    message = f"applied revision {revision}: {len(objects)} object(s)"
    await report(ctx, CONFIGSYNC, body, status, True, "ReconciliationSucceeded", message, event=changed)
    return None


async def _delete(ctx: Context, oid: ObjectId, label: str) -> str:
    """Delete ``oid`` if it is still ours; a message when that failed."""
    try:
        path = await object_path(ctx, oid)
        live = await ctx.kube.get(path)
        if live is None:
            return ""
        if (live.get("metadata", {}).get("labels") or {}).get(LABEL) != label:
            log.info("not pruning %s: it is no longer labelled as this ConfigSync's", oid)
            return ""
        await ctx.kube.request("DELETE", path, {"propagationPolicy": "Background"})
    except KubeError as exc:
        if exc.status == 404:
            return ""
        return f"{oid}: prune failed: {exc.message}"
    return ""


async def finalize(ctx: Context, body: dict[str, Any]) -> bool:
    """With prune, a deleted ConfigSync takes its objects with it (as Flux's Kustomization does)."""
    meta = body["metadata"]
    ctx.drop(("ConfigSync", meta["namespace"], meta["name"]))
    spec = body.get("spec") or {}
    if not spec.get("prune", True) or spec.get("suspend"):
        return True
    label = owner_label(meta["namespace"], meta["name"])
    inventory = [ObjectId.from_json(x) for x in (body.get("status") or {}).get("inventory") or []]
    problems = [p for oid in reversed(apply_order(inventory)) if (p := await _delete(ctx, oid, label))]
    return not problems
