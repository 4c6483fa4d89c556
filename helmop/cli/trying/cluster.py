"""``helmop try`` against the sandbox, through the API client: the cluster folder's objects applied server-side
(their namespaces made when missing, as a cluster would already have them), then every object helmop reconciles
followed until all are Ready, or what is not can no longer become so (stuck) or has failed alike for its patience
(failing: :mod:`.states`; unless --wait-for-transient), or the time is up."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from helmop.api.kinds import FLUX, FLUX_IMAGES, HELMOP, IMAGES, JENKINS, Kind
from helmop.api.manifests import Manifest
from helmop.infra.kube import Kube, KubeError

from .states import PATIENCE, Tracked, applied_by, block, failing, observe, patience, verdict, waits_for

MANAGER = "helmop-try"
POLL = 0.5  # seconds between two looks at the sandbox (a local API server)
# Applied first, in this order: identities before the syncs that take them (a first reconcile is not Forbidden)
FIRST = {"Namespace": 0, "CustomResourceDefinition": 1, "ServiceAccount": 2, "ClusterRole": 2, "Role": 2,
         "ClusterRoleBinding": 3, "RoleBinding": 3}


def followed_kinds(flux: bool) -> list[Kind]:
    """The kinds helmop reconciles and reports Ready for (Flux's with --flux-api)."""
    return [*HELMOP.kinds, JENKINS, *IMAGES, *((*FLUX.kinds, *FLUX_IMAGES) if flux else ())]


async def apply(kube: Kube, objects: list[Manifest]) -> list[Tracked]:
    """Apply every object (Namespaces, then CRDs, then the rest); those the API refused, as Refused."""
    refused = []
    made: set[str] = set()
    for item in sorted(objects, key=lambda i: FIRST.get(i.kind, 4)):
        obj = item.obj
        meta = dict(obj.get("metadata") or {})
        try:
            _, namespaced = await _resource(kube, item)
            if namespaced:
                meta["namespace"] = meta.get("namespace") or "default"
                await _namespace(kube, str(meta["namespace"]), made)
            path = await kube.path_of(item.api_version, item.kind, str(meta.get("namespace") or ""), item.name)
            await kube.apply(path, {**obj, "metadata": meta}, MANAGER)
        except KubeError as exc:
            group = item.api_version.rpartition("/")[0]
            refused.append(Tracked(item.kind, group, str(meta.get("namespace") or ""), item.name, "Refused",
                                   exc.reason or "Refused", f"{item.origin}: {exc.message}"))
    return refused


async def _resource(kube: Kube, item: Manifest) -> tuple[str, bool]:
    """(plural, namespaced) of the object's kind: asked a few times, for a CRD applied just before."""
    for attempt in range(20):
        try:
            return await kube.resource(item.api_version, item.kind)
        except KubeError as exc:
            if exc.status != 404 or attempt == 19:
                raise
            await asyncio.sleep(0.25)
    raise AssertionError("the loop returns or raises")


async def _namespace(kube: Kube, name: str, made: set[str]) -> None:
    if name in made:
        return
    if await kube.get(f"/api/v1/namespaces/{name}") is None:
        await kube.apply(f"/api/v1/namespaces/{name}", {"apiVersion": "v1", "kind": "Namespace",
                                                         "metadata": {"name": name}}, MANAGER)
    made.add(name)


async def _listed(kube: Kube, kinds: list[Kind]) -> list[dict[str, Any]]:
    """Every object of ``kinds``, sources and syncs before releases (an object a sync applied before it said Ready
    is listed after it)."""
    out: list[dict[str, Any]] = []
    for kind in kinds:
        try:
            out += await kube.list(kind.path())
        except KubeError as exc:
            if exc.status != 404:  # a kind not served: none of it
                raise
    return out


def _update(table: dict[str, Tracked], objects: list[dict[str, Any]], elapsed: float, least: float) -> None:
    seen = set()
    for obj in objects:
        meta = obj.get("metadata") or {}
        item = Tracked(str(obj.get("kind")), str(obj.get("apiVersion", "")).rpartition("/")[0],
                       str(meta.get("namespace") or ""), str(meta.get("name")))
        before = table.get(item.key)
        item.state, item.reason, item.message = observe(obj)
        item.after, item.needs = waits_for(obj)
        item.parent = applied_by(obj)
        item.patience = patience(obj, least)
        item.seen, item.since = (meta.get("generation"), item.state, item.reason), elapsed
        if before is not None and before.seen[:1] == item.seen[:1] and \
                (item.state == "Progressing" or before.seen == item.seen):
            item.seen, item.since = before.seen, before.since  # a retry in progress does not reset the clock
        if item.ok:
            item.ready_after = before.ready_after if before is not None and before.ok else round(elapsed, 1)
        table[item.key] = item
        seen.add(item.key)
    for gone in [k for k, item in table.items() if k not in seen and item.state != "Refused"]:
        del table[gone]


async def follow(kube: Kube, kinds: list[Kind], refused: list[Tracked], started: float, timeout: float,
                 show: Callable[[dict[str, Tracked], float], None], patience: float | None = PATIENCE,
                 clock: Callable[[], float] = time.monotonic,
                 pause: Callable[[float], Awaitable[None]] = asyncio.sleep) -> tuple[dict[str, Tracked], str]:
    """Follow until a verdict ("converged", "stuck", "failing" unless ``patience`` is None: failures are waited
    out) holds for two looks in a row, or "timeout"; ``patience``: the least an unchanged failure is given
    (:func:`.states.patience`); ``started``: a time of ``clock``, ``pause`` waits between two looks."""
    table: dict[str, Tracked] = {item.key: item for item in refused}
    last: set[tuple[str, str]] | None = None
    while True:
        elapsed = clock() - started
        _update(table, await _listed(kube, kinds), elapsed, patience or PATIENCE)
        failed = set() if patience is None else failing(table, elapsed)
        block(table, failed)
        show(table, elapsed)
        found = verdict(table, failed) if table else "empty"  # none of what was applied is followed
        states = {(k, item.state) for k, item in table.items()}
        if found and states == last:
            for name in failed:
                item = table[name]
                item.message = f"the same for {elapsed - item.since:.0f}s ({item.state}: {item.reason or '-'}): " \
                               f"{item.message}"
            return table, found
        if elapsed > timeout:
            for item in table.values():
                if not item.ok and item.state not in ("Stalled", "Refused", "Blocked"):
                    item.message = f"not Ready after {timeout:.0f}s ({item.state}: {item.reason or '-'}): " \
                                   f"{item.message}"
                    item.state = "TimedOut"
            return table, "timeout"
        last = states if found else None
        await pause(POLL)
