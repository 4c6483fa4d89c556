"""Waking resources when an object they read or deployed changes, without holding the objects.

Through kopf, every ConfigMap and Secret of the cluster would stream through the operator whole,
helm's release records (a Secret per revision of every release) included. Here every watch asks
for metadata only (``PartialObjectMetadata``: names and versions, never data), and helm's release
Secrets are left out by a field selector. An event wakes only the resources that said they read
that object (a change of a ConfigMap/Secret they read supersedes what they run: their inputs
changed) or that deployed it and check it for drift (a plain wake: helm itself changes those
objects during an action). Kinds of deployed objects are watched from the first release that has
one; for objects with a ``generation``, a change that did not bump it (a status update) wakes
nobody. Each watch starts from a list of one item, for its resourceVersion, so starting wakes
nothing; after 410 Gone it starts again that way.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from helmop.api.kinds import key_of
from helmop.api.objects import ObjectKey
from helmop.helm.releases import NOT_STORAGE
from helmop.infra.kube import KubeError

from .context import Context

log = logging.getLogger(__name__)
_ONE = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
INPUTS = (("v1", "ConfigMap", ""), ("v1", "Secret", NOT_STORAGE))  # helm's records are not inputs


@dataclass
class Watches:
    ctx: Context
    namespaces: list[str]  # where inputs are watched (empty: everywhere); deployed objects: everywhere
    tasks: dict[tuple[str, str, str], asyncio.Task[None]] = field(default_factory=dict)  # apiVersion, kind, ns
    generations: dict[tuple[str, str, str], int] = field(default_factory=dict)  # of observed objects only

    async def run(self) -> None:
        """Watch the inputs (and, as they are asked for, deployed kinds) until cancelled."""
        for api_version, kind, selector in INPUTS:
            for namespace in self.namespaces or [""]:
                self._spawn((api_version, kind, namespace), selector)
        memory = self.ctx.memory
        try:
            while True:  # every kind of object a release deployed, as the memory learns of them
                await memory.new_kinds.wait()
                memory.new_kinds.clear()
                for api_version, kind in sorted(memory.observed_kinds):
                    self._watch_kind(api_version, kind)
        finally:
            for task in self.tasks.values():
                task.cancel()
            await asyncio.gather(*self.tasks.values(), return_exceptions=True)

    def _watch_kind(self, api_version: str, kind: str) -> None:
        """Watch every object of this kind (idempotent), to wake the resources that deployed one."""
        if (api_version, kind, "") not in self.tasks and not any(
                (api_version, kind) == (v, k) for v, k, _ in INPUTS):
            self._spawn((api_version, kind, ""), "")

    def _spawn(self, what: tuple[str, str, str], selector: str) -> None:
        self.tasks[what] = asyncio.create_task(self._follow(*what, selector))

    async def _follow(self, api_version: str, kind: str, namespace: str, selector: str) -> None:
        kube = self.ctx.services.kube
        try:
            plural, namespaced = await kube.resource(api_version, kind)
        except KubeError as exc:
            log.info("not watching %s %s: %s", api_version, kind, exc)
            return
        prefix = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
        path = f"{prefix}/namespaces/{namespace}/{plural}" if namespace and namespaced else f"{prefix}/{plural}"
        params = {"fieldSelector": selector} if selector else {}
        version, pause, broken = "", 1.0, True
        drift = self.ctx.memory.drift
        try:
            while True:
                try:
                    if not version:
                        listed = await kube.request("GET", path, params={**params, "limit": "1"}, accept=_LIST)
                        version = listed["metadata"]["resourceVersion"]
                        # What changed before this (first, or after 410 Gone) list was not seen: a drift check of
                        # everything that deployed this kind covers it.
                        self.ctx.memory.wake_observers_of(kind)
                    if broken:  # a new start: objects found clean before it are compared again
                        drift.watching(kind, namespace)
                        broken = False
                    async for event in kube.watch(path, {**params, "resourceVersion": version,
                                                         "allowWatchBookmarks": "true", "timeoutSeconds": "300"},
                                                  accept=_ONE):
                        if event.get("type") == "ERROR":
                            version, broken = "", True  # 410 Gone (or worse): list again
                            drift.lost(kind, namespace)
                            break
                        meta = (event.get("object") or {}).get("metadata") or {}
                        version = meta.get("resourceVersion") or version
                        if event.get("type") != "BOOKMARK":
                            self._changed(api_version, kind, str(event.get("type")), meta)
                    pause = 1.0
                except (KubeError, ValueError, KeyError) as exc:  # ValueError, KeyError: a body that is not an event
                    broken = True  # until the watch runs again, changes are not seen as they happen
                    drift.lost(kind, namespace)
                    if isinstance(exc, KubeError) and exc.status in (401, 403):
                        log.warning("not allowed to watch %s (%s): drift is checked at each interval only", path,
                                    exc)
                        return
                    if isinstance(exc, KubeError) and exc.status == 410:
                        version = ""
                    log.warning("watching %s failed (%s); again in %.0f s", path, exc, pause)
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, 30.0)
        finally:
            drift.lost(kind, namespace)

    def _changed(self, api_version: str, kind: str, type_: str, meta: dict[str, object]) -> None:
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        if kind in ("ConfigMap", "Secret"):
            self.ctx.memory.wake_referrers(ObjectKey(kind, namespace, name))
        self.ctx.memory.wake_waiting(ObjectKey(key_of(api_version, kind), namespace, name))  # a dependency's change
        if not self.ctx.memory.observed_by(namespace, kind, name):
            return
        key = (namespace, kind, name)
        self.ctx.memory.drift.seen(key, None if type_ == "DELETED" else meta)
        if type_ == "DELETED":
            self.generations.pop(key, None)
        generation = meta.get("generation")
        if isinstance(generation, int) and type_ == "MODIFIED" and self.generations.get(key) == generation:
            return  # a status update: the spec (what drift is about) did not change
        if isinstance(generation, int) and type_ != "DELETED":
            self.generations[key] = generation
        self.ctx.memory.wake_observers(namespace, kind, name)
