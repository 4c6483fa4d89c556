"""spec.dependsOn: a HelmRelease acts only when the HelmReleases it depends on are Ready for their
current generation; a chain that comes back to where it started is a cycle, reported on each member;
and of HelmReleases deleted together, dependents are uninstalled before what they depend on."""

from __future__ import annotations

from typing import Any

from helmop.api import conditions as cond
from helmop.api.errors import SpecError
from helmop.api.helmrelease import depends_on
from helmop.api.kinds import HELMRELEASE
from helmop.api.objects import Resource

from .context import Context

MAX_CHAIN = 100  # HelmReleases followed when looking for a cycle


def _ready(obj: dict[str, Any]) -> bool:
    ready = cond.get_condition((obj.get("status") or {}).get("conditions") or [], cond.READY) or {}
    return ready.get("status") == "True" and ready.get("observedGeneration") == Resource(obj).generation


def _depends_on(obj: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    this = Resource(obj)
    try:
        return depends_on(this.spec.get("dependsOn"), this.name, this.namespace)
    except SpecError:  # that release reports its own invalid spec; it depends on nothing here
        return ()


async def waiting_for(ctx: Context, namespace: str, name: str,
                      depends_on: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    """The dependencies that are not Ready yet ("namespace/name"); SpecError DependencyCycle when the
    dependencies lead back to this HelmRelease (the message names the whole cycle)."""
    waiting: list[str] = []
    for dep_namespace, dep_name in depends_on:
        dep = await ctx.kube.get(HELMRELEASE.path(dep_namespace, dep_name))
        if dep is None or not _ready(dep):
            waiting.append(f"{dep_namespace}/{dep_name}" + ("" if dep is not None else " (not found)"))
    cycle = await _cycle(ctx, (namespace, name), depends_on)
    if cycle:
        raise SpecError("DependencyCycle", "spec.dependsOn makes a cycle: " + " -> ".join(cycle))
    return tuple(waiting)


async def _cycle(ctx: Context, start: tuple[str, str], depends_on: tuple[tuple[str, str], ...]) -> list[str]:
    """A path from ``start`` back to itself through dependsOn, or []."""
    paths: list[list[tuple[str, str]]] = [[start, dep] for dep in depends_on]
    seen = {start}
    while paths and len(seen) < MAX_CHAIN:
        path = paths.pop(0)
        node = path[-1]
        if node == start:
            return [f"{ns}/{n}" for ns, n in path]
        if node in seen:
            continue
        seen.add(node)
        obj = await ctx.kube.get(HELMRELEASE.path(*node))
        if obj is not None:
            paths += [[*path, nxt] for nxt in _depends_on(obj)]
    return []


async def dependents_being_deleted(ctx: Context, namespace: str, name: str) -> list[str]:
    """HelmReleases that depend on this one and are being deleted too: they go first."""
    out = []
    for obj in await ctx.kube.list(HELMRELEASE.path()):
        if (namespace, name) in _depends_on(obj) and Resource(obj).deleting:
            out.append(f"{obj['metadata']['namespace']}/{obj['metadata']['name']}")
    return out
