"""The Receivers an operator serves, found by the path a request names: each Receiver kind's objects (in the
operator's namespaces, or in all) listed and watched, indexed by ``status.webhookPath`` as Flux's receiver server
indexes them. Every replica keeps it, a standby too: whichever one a webhook reaches finds its Receiver, and the
reconcile request it writes is acted on by the replica that owns the object."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from helmop.api.kinds import Kind
from helmop.api.objects import ObjectKey, packed, unpacked

from .kube import Kube, KubeError

log = logging.getLogger(__name__)
UNSERVED_PAUSE = 60.0  # a kind not served (yet) or not allowed: looked for again this often


class HookPaths:
    def __init__(self, kube: Kube, kinds: list[Kind], namespaces: list[str]) -> None:
        self.kube = kube
        self.collections = [(kind, kind.path(namespace or None)) for kind in kinds for namespace in namespaces or [""]]
        self.kinds = {kind.key: kind for kind in kinds}
        self.bodies: dict[ObjectKey, bytes] = {}  # every Receiver, as last seen
        self.paths: dict[ObjectKey, str] = {}
        self.by_path: dict[str, set[ObjectKey]] = {}  # two Receivers of one path: Flux's and helmop's of one name

    def find(self, path: str) -> tuple[Kind, dict[str, Any]] | None:
        """The Receiver whose status.webhookPath is ``path`` (the first by kind, namespace and name when two are),
        as last seen; None when none is."""
        keys = self.by_path.get(path)
        if not keys:
            return None
        key = min(keys)
        return self.kinds[key[0]], unpacked(self.bodies[key])

    async def run(self) -> None:
        """Follow every collection until cancelled."""
        await asyncio.gather(*(self._follow(kind, path) for kind, path in self.collections))

    def _seen(self, kind: Kind, obj: dict[str, Any]) -> ObjectKey:
        meta = obj.get("metadata") or {}
        key = ObjectKey(kind.key, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        self._forget(key)
        path = str((obj.get("status") or {}).get("webhookPath") or "")
        self.bodies[key] = packed({"apiVersion": kind.api_version, "kind": kind.kind, **obj})
        if path:
            self.paths[key] = path
            self.by_path.setdefault(path, set()).add(key)
        return key

    def _forget(self, key: ObjectKey) -> None:
        self.bodies.pop(key, None)
        path = self.paths.pop(key, None)
        if path is not None:
            self.by_path[path].discard(key)
            if not self.by_path[path]:
                del self.by_path[path]

    async def _follow(self, kind: Kind, path: str) -> None:
        version, pause, mine = "", 0.5, set[ObjectKey]()
        while True:
            try:
                if not version:
                    listed = await self.kube.request("GET", path)
                    listed_keys = {self._seen(kind, obj) for obj in listed.get("items") or []}
                    for gone in mine - listed_keys:
                        self._forget(gone)
                    mine, version = listed_keys, listed["metadata"]["resourceVersion"]
                params = {"resourceVersion": version, "allowWatchBookmarks": "true", "timeoutSeconds": "300"}
                async for event in self.kube.watch(path, params):
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        version = ""  # 410 Gone (or worse): list again
                        break
                    version = (obj.get("metadata") or {}).get("resourceVersion") or version
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        mine.add(self._seen(kind, obj))
                    elif event.get("type") == "DELETED":
                        gone = self._seen(kind, obj)
                        self._forget(gone)
                        mine.discard(gone)
                pause = 0.5
            except (KubeError, ValueError, KeyError) as exc:  # ValueError, KeyError: not a list or an event
                version = ""
                unserved = isinstance(exc, KubeError) and exc.status in (401, 403, 404)
                pause = UNSERVED_PAUSE if unserved else min(pause * 2, 30.0)
                log.log(logging.INFO if unserved else logging.WARNING, "watching %s for webhook paths failed (%s); "
                        "again in %.0f s", path, exc, pause)
                await asyncio.sleep(pause)
