"""spec.dependsOn: a HelmRelease, a ConfigSync or a Project (and Flux's HelmRelease and Kustomization) acts only
when what it depends on is ready - an object of its kind, or of any kind (:mod:`helmop.api.dependencies`), judged
by :func:`helmop.decisions.readiness.readiness` or by the entry's readyExpr; read, under lockdown, with the object's
own identity; a chain that comes back to where it started, through any kinds, is a cycle, reported on each member;
and of HelmReleases deleted together, dependents are uninstalled before what they depend on.

A waiting object is woken when what it waits for (and is not ready) changes: helmop's kinds as their status is
written, every other kind by the referrer watches (:mod:`.referrers`), which start watching a kind the first time
a dependency names it."""

from __future__ import annotations

import time
from typing import Any

from helmop.api.dependencies import Dependency, of_object, waiting_kind
from helmop.api.errors import HelmopError, SpecError
from helmop.api.kinds import HELMRELEASE, Kind, family_of
from helmop.api.objects import ObjectKey, Resource
from helmop.decisions.readiness import readiness
from helmop.infra.dependencies import Target, target
from helmop.infra.kube import Kube, KubeError
from helmop.infra.worker import WorkerTimeout

from .context import Context


def reader(ctx: Context, namespace: str, service_account: str, remote: bool) -> str:
    """Who reads an object's dependencies ("": the operator, as Flux's controllers read them): under lockdown its
    ServiceAccount, or the default one when it names none or acts on a remote cluster (where the account it names
    is the remote's)."""
    if not ctx.tenancy.locked_down:
        return ""
    return ctx.tenancy.acting_as(namespace, "" if remote else service_account)


async def waiting_for(ctx: Context, own: Kind, this: dict[str, Any], deps: tuple[Dependency, ...],
                      identity: str = "") -> tuple[str, ...]:
    """What of ``deps`` is not ready yet (each named, with why for another kind's); read as ``identity`` (the
    object's ServiceAccount under lockdown: "" for the operator's own). SpecError DependencyCycle when the
    dependencies lead back to ``this``; HelmopError DependencyForbidden (transient: rights may be granted) when
    the identity may not read one. A change of one not ready wakes ``this``."""
    obj = Resource(this)
    kube = ctx.services.kube.acting_as(identity) if identity else ctx.services.kube
    waiting: list[str] = []
    targets = []  # what is not ready: what wakes this object when it changes (a ready one is not looked at again)
    for dep in deps:
        try:
            found = await target(ctx.services.kube, own, obj.namespace, dep)
        except KubeError as exc:
            if exc.status != 404:
                raise
            where = dep.namespace or obj.namespace
            waiting.append(f"{dep.kind}/{where + '/' if where else ''}{dep.name} (no such kind is served)")
            continue
        obj_of_dep = await _read(kube, found)
        why = await _not_ready(ctx, dep, obj_of_dep, this)
        if not why and not dep.ready_expr and dep.ready:
            why = await _stale(kube, found, obj_of_dep)
        if why:
            targets.append(found)
            waiting.append(found.title if why == "not ready" else f"{found.title} ({why})")
    ctx.memory.depend_on(ObjectKey(own.key, obj.namespace, obj.name), [t.key for t in targets],
                         {(t.api_version, t.kind) for t in targets if t.api_version})
    cycle = await _cycle(ctx, own, ObjectKey(own.key, obj.namespace, obj.name), deps)
    if cycle:
        raise SpecError("DependencyCycle", "spec.dependsOn makes a cycle: " + " -> ".join(cycle))
    return tuple(waiting)


async def _read(kube: Kube, found: Target) -> dict[str, Any] | None:
    try:
        return await kube.get(found.path)
    except KubeError as exc:
        if exc.status in (401, 403):
            raise HelmopError("DependencyForbidden", f"spec.dependsOn: {found.title} may not be read by this "
                                                     f"object's identity: {exc.message}", transient=True) from None
        raise


async def _not_ready(ctx: Context, dep: Dependency, obj: dict[str, Any] | None, this: dict[str, Any]) -> str:
    """Why ``obj`` does not count as ready for ``dep`` ("" when it does)."""
    if obj is None:
        return "not found"
    if not dep.ready:
        return ""  # being there is enough
    if dep.ready_expr:
        return "" if await _ready_by(ctx, dep.ready_expr, obj, this) else "readyExpr is not true"
    why = readiness(obj)
    return "not ready" if why and dep.same_kind else why


async def _stale(kube: Kube, found: Target, obj: dict[str, Any] | None) -> str:
    """A ConfigSync or Kustomization is ready only once it applied the revision its source holds now (as Flux
    checks): a commit that changes a dependency and its dependent rolls out in that order."""
    kind = waiting_kind(str((obj or {}).get("apiVersion") or ""), found.kind)
    if obj is None or kind is None or kind.kind == HELMRELEASE.kind or Resource(obj).spec.get("suspend"):
        return ""  # (a HelmRelease's new chart or values are a new generation; a suspended sync applies nothing new)
    revision = await _source_revision(kube, kind, Resource(obj).spec.get("sourceRef"), found.key.namespace)
    applied = str((obj.get("status") or {}).get("lastAppliedRevision") or "")
    if not revision or revision == applied:  # no artifact (yet): its own Ready condition says so
        return ""
    return f"revision {revision} not applied yet (applied: {applied or 'none'})"


async def _source_revision(kube: Kube, kind: Kind, ref: Any, namespace: str) -> str:
    """The revision of the artifact a sync's ``ref`` names holds now ("": none, or it cannot be read: the sync's own
    turn says what is wrong with its source)."""
    if not isinstance(ref, dict) or not ref.get("name"):
        return ""
    source = family_of(kind.group).source(str(ref.get("kind") or "GitRepository"))
    if source is None:
        return ""
    try:
        held = await kube.get(source.path(str(ref.get("namespace") or namespace), str(ref["name"])))
    except KubeError:
        return ""
    return str((((held or {}).get("status") or {}).get("artifact") or {}).get("revision") or "")


async def _ready_by(ctx: Context, expr: str, dep: dict[str, Any], this: dict[str, Any]) -> bool:
    try:
        return (await ctx.services.cel.evaluate([expr], this, dep=dep))[0]
    except WorkerTimeout:  # an expression that runs away: not ready (its Stalled reason comes from the spec check)
        return False


async def _cycle(ctx: Context, own: Kind, start: ObjectKey, deps: tuple[Dependency, ...]) -> list[str]:
    """A path from ``start`` back to itself through dependsOn (of any of the kinds that have one), or []."""
    paths = [[(own, start), step] for dep in deps if (step := _next(own, start.namespace, dep)) is not None]
    seen = {start}
    while paths and len(seen) < ctx.settings.limits.dependency_chain:
        path = paths.pop(0)
        kind, node = path[-1]
        if node == start:
            where = [f"{n.namespace}/{n.name}" if n.namespace else n.name for _, n in path]
            return [w if k.kind == own.kind else f"{k.kind}/{w}" for (k, _), w in zip(path, where, strict=True)]
        if node in seen:
            continue
        seen.add(node)
        obj = await ctx.services.kube.get(kind.path(node.namespace, node.name))
        if obj is not None:
            paths += [[*path, step] for dep in of_object(kind, obj)
                      if (step := _next(kind, node.namespace, dep)) is not None]
    return []


def _next(kind: Kind, namespace: str, dep: Dependency) -> tuple[Kind, ObjectKey] | None:
    """The next node of a path through ``dep`` (of an object of ``kind``): a kind with a dependsOn, or None (also
    for ``ready: false``: its being there is all that is waited for, and that cannot wait on a cycle)."""
    found = kind if dep.same_kind else waiting_kind(dep.api_version, dep.kind)
    if found is None or not dep.ready:
        return None
    where = (dep.namespace or namespace) if found.namespaced else ""  # (a Project's)
    return found, ObjectKey(found.key, where, dep.name)


async def dependents_first(ctx: Context, deleted: Resource, kind: Kind = HELMRELEASE) -> list[str]:
    """The HelmReleases that depend on ``deleted`` and go before it: those being deleted too, and, while its
    own deletion is younger than ``deleted_together``, those whose deletion may still be on its way."""
    deleted_at = deleted.deleted_at
    together = deleted_at is not None and time.time() - deleted_at < ctx.settings.intervals.deleted_together
    out = []
    for obj in await ctx.services.kube.list(kind.path()):
        named = {(d.namespace, d.name) for d in of_object(kind, obj) if d.same_kind}
        if (deleted.namespace, deleted.name) in named and (together or Resource(obj).deleting):
            out.append(f"{obj['metadata']['namespace']}/{obj['metadata']['name']}")
    return out
