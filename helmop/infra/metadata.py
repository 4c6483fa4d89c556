"""Metadata-only watches of one cluster (``PartialObjectMetadata``: names, versions, labels, never data), one per
(apiVersion, kind, namespace), each telling a :class:`Listener` what it sees. The operator's own cluster has one set
(the referrers' watches); each remote cluster another, made with that remote's client (its kubeconfig's identity)
and closed with it.

Each watch starts from a list of one item, for its resourceVersion (so starting delivers no event); after 410 Gone
it lists again. A watch the identity may not make (401, 403) or whose kind is not served stops for good: its
listener is told it is lost, and never that it runs.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from .kube import Kube, KubeError

log = logging.getLogger(__name__)
_ONE = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
Watched = tuple[str, str, str]  # apiVersion, kind, namespace ("" for every namespace)


class Listener(Protocol):
    def started(self, kind: str, namespace: str, *, listed: bool) -> None:
        """The watch runs unbroken from now; ``listed``: from a new list (what changed before it went unseen)."""

    def lost(self, kind: str, namespace: str) -> None:
        """The watch broke or stopped: changes go unseen until it starts again."""

    def changed(self, api_version: str, kind: str, type_: str, meta: dict[str, object]) -> None:
        """An event (ADDED, MODIFIED, DELETED) of one object: its metadata."""


class MetadataWatches:
    """The metadata watches of one cluster, by (apiVersion, kind, namespace)."""

    def __init__(self, kube: Kube, limit: int | None = None) -> None:
        self.kube = kube
        self.limit = limit  # watches at most (None: no limit); past it, what is not watched is not told of
        self.tasks: dict[Watched, asyncio.Task[None]] = {}
        self.full = False  # the limit was reached
        self.closed = False  # a turn that still holds a remote closed meanwhile starts nothing on it

    def follow(self, what: Watched, listener: Listener, selector: str = "") -> None:
        """Watch ``what`` (once: a watch that stopped for good is not made again)."""
        if what in self.tasks or self.closed:
            return
        if self.limit is not None and len(self.tasks) >= self.limit:
            if not self.full:  # said once: it is asked again at every look of what it would cover
                log.warning("not watching %s %s in %r (nor more): this cluster has %d watches already (its limit)",
                            *what, self.limit)
            self.full = True
            return
        self.tasks[what] = asyncio.create_task(self._follow(*what, selector, listener))

    async def close(self) -> None:
        self.closed = True
        for task in self.tasks.values():
            task.cancel()
        await asyncio.gather(*self.tasks.values(), return_exceptions=True)
        self.tasks.clear()

    async def _follow(self, api_version: str, kind: str, namespace: str, selector: str, listener: Listener) -> None:
        try:
            plural, namespaced = await self.kube.resource(api_version, kind)
        except KubeError as exc:
            log.info("not watching %s %s: %s", api_version, kind, exc)
            return
        prefix = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
        path = f"{prefix}/namespaces/{namespace}/{plural}" if namespace and namespaced else f"{prefix}/{plural}"
        params = {"fieldSelector": selector} if selector else {}
        version, pause, broken = "", 1.0, True
        try:
            while True:
                try:
                    listed = not version
                    if listed:
                        answer = await self.kube.request("GET", path, params={**params, "limit": "1"}, accept=_LIST)
                        version = answer["metadata"]["resourceVersion"]
                    if broken:  # a new start: objects found as they should be before it are looked at again
                        listener.started(kind, namespace, listed=listed)
                        broken = False
                    async for event in self.kube.watch(path, {**params, "resourceVersion": version,
                                                              "allowWatchBookmarks": "true", "timeoutSeconds": "300"},
                                                       accept=_ONE):
                        if event.get("type") == "ERROR":
                            version, broken = "", True  # 410 Gone (or worse): list again
                            listener.lost(kind, namespace)
                            break
                        meta = (event.get("object") or {}).get("metadata") or {}
                        version = meta.get("resourceVersion") or version
                        if event.get("type") != "BOOKMARK":
                            listener.changed(api_version, kind, str(event.get("type")), meta)
                    pause = 1.0
                except (KubeError, ValueError, KeyError) as exc:  # ValueError, KeyError: a body that is not an event
                    broken = True  # until the watch runs again, changes are not seen as they happen
                    listener.lost(kind, namespace)
                    if isinstance(exc, KubeError) and exc.status in (401, 403):
                        log.warning("not allowed to watch %s (%s): drift is checked at each interval only", path, exc)
                        return
                    if isinstance(exc, KubeError) and exc.status == 410:
                        version = ""
                    log.warning("watching %s failed (%s); again in %.0f s", path, exc, pause)
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, 30.0)
        finally:
            listener.lost(kind, namespace)
