"""spec.dependsOn: a HelmRelease (or a ConfigSync) acts only when those of its kind it depends on are Ready
for their current generation (or, for a ConfigSync, when a dependency's readyExpr says so); a chain that
comes back to where it started is a cycle, reported on each member; and of HelmReleases deleted together,
dependents are uninstalled before what they depend on."""

from __future__ import annotations

import time
from typing import Any

from helmop.api import conditions as cond
from helmop.api.errors import SpecError
from helmop.api.helmrelease import depends_on
from helmop.api.kinds import HELMRELEASE, Kind
from helmop.api.objects import Resource
from helmop.infra.worker import WorkerTimeout

from .context import Context


def _ready(obj: dict[str, Any]) -> bool:
    ready = cond.condition_of(obj, cond.READY)
    return ready.get("status") == "True" and ready.get("observedGeneration") == Resource(obj).generation


def _depends_on(obj: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    this = Resource(obj)
    try:
        return depends_on(this.spec.get("dependsOn"), this.name, this.namespace)
    except SpecError:  # that release reports its own invalid spec; it depends on nothing here
        return ()


async def waiting_for(ctx: Context, namespace: str, name: str, depends_on: tuple[tuple[str, str], ...],
                      kind: Kind = HELMRELEASE, this: dict[str, Any] | None = None,
                      ready_exprs: dict[tuple[str, str], str] | None = None) -> tuple[str, ...]:
    """The dependencies (of ``kind``) that are not Ready yet ("namespace/name"); SpecError DependencyCycle when
    the dependencies lead back to this object (the message names the whole cycle). A dependency with a
    readyExpr is ready when that CEL expression is true of it (``dep``) and of ``this`` (``self``)."""
    waiting: list[str] = []
    for dep_namespace, dep_name in depends_on:
        dep = await ctx.services.kube.get(kind.path(dep_namespace, dep_name))
        expr = (ready_exprs or {}).get((dep_namespace, dep_name), "")
        if dep is None or not (await _ready_by(ctx, expr, dep, this or {}) if expr else _ready(dep)):
            waiting.append(f"{dep_namespace}/{dep_name}" + ("" if dep is not None else " (not found)"))
    cycle = await _cycle(ctx, kind, (namespace, name), depends_on)
    if cycle:
        raise SpecError("DependencyCycle", "spec.dependsOn makes a cycle: " + " -> ".join(cycle))
    return tuple(waiting)


async def _ready_by(ctx: Context, expr: str, dep: dict[str, Any], this: dict[str, Any]) -> bool:
    try:
        return (await ctx.services.cel.evaluate([expr], this, dep=dep))[0]
    except WorkerTimeout:  # an expression that runs away: not ready (its Stalled reason comes from the spec check)
        return False


async def _cycle(ctx: Context, kind: Kind, start: tuple[str, str],
                 depends_on: tuple[tuple[str, str], ...]) -> list[str]:
    """A path from ``start`` back to itself through dependsOn, or []."""
    paths: list[list[tuple[str, str]]] = [[start, dep] for dep in depends_on]
    seen = {start}
    while paths and len(seen) < ctx.settings.limits.dependency_chain:
        path = paths.pop(0)
        node = path[-1]
        if node == start:
            return [f"{ns}/{n}" for ns, n in path]
        if node in seen:
            continue
        seen.add(node)
        obj = await ctx.services.kube.get(kind.path(*node))
        if obj is not None:
            paths += [[*path, nxt] for nxt in _depends_on(obj)]
    return []


async def dependents_first(ctx: Context, deleted: Resource, kind: Kind = HELMRELEASE) -> list[str]:
    """The HelmReleases that depend on ``deleted`` and go before it: those being deleted too, and, while its
    own deletion is younger than ``deleted_together``, those whose deletion may still be on its way."""
    deleted_at = deleted.deleted_at
    together = deleted_at is not None and time.time() - deleted_at < ctx.settings.intervals.deleted_together
    out = []
    for obj in await ctx.services.kube.list(kind.path()):
        if (deleted.namespace, deleted.name) in _depends_on(obj) and (together or Resource(obj).deleting):
            out.append(f"{obj['metadata']['namespace']}/{obj['metadata']['name']}")
    return out
