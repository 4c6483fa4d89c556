"""Collections watched once for every reader: a list then a watch per collection path (one kind in one
namespace, or cluster-wide), its objects kept in memory while someone reads them and for a short while
after, so releases deployed one after the other into a namespace share one watch of its Deployments
(helm's own ``--wait`` starts a set of informers per helm process instead).

Objects are kept packed (compact JSON: a namespace may hold 1000 Deployments while releases wait) without
``managedFields`` and kubectl's last-applied annotation (what a verdict never reads). A collection the
operator may not list or watch is ``refused``: its readers fetch objects one by one as they always could.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from helmop.api.objects import packed, unpacked

from .kube import Kube, KubeError

log = logging.getLogger(__name__)

PAGE = 250  # objects a list's page holds


class Collection:
    """One collection path's objects by name, kept current by a watch."""

    def __init__(self, kube: Kube, path: str) -> None:
        self.kube, self.path = kube, path
        self.objects: dict[str, bytes] = {}  # packed: read with get()
        self.synced = asyncio.Event()  # listed at least once (or refused)
        self.refused: KubeError | None = None  # not allowed or not served: read objects one by one
        self.readers = 0
        self._waits: dict[str, asyncio.Event] = {}  # by object name: set at its next change
        self._task: asyncio.Task[None] | None = None
        self._idle: asyncio.TimerHandle | None = None

    def get(self, name: str) -> dict[str, Any] | None:
        """Object ``name`` as last seen (a copy of its own), None when the collection has none."""
        data = self.objects.get(name)
        return unpacked(data) if data is not None else None

    def changed(self, name: str) -> asyncio.Event:
        """Set at the next change of object ``name`` (or of the whole collection: a new list, a refusal). One
        event per name, however many wait: a change wakes the readers of that object, not every reader."""
        return self._waits.setdefault(name, asyncio.Event())

    def _signal(self, name: str | None = None) -> None:
        if name is None:
            fired, self._waits = list(self._waits.values()), {}
        else:
            one = self._waits.pop(name, None)
            fired = [one] if one else []
        for event in fired:
            event.set()

    def start(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        if self._task is None:
            self._task = asyncio.create_task(self._follow())

    def stop_after(self, linger: float, forget: Callable[[Collection], None]) -> None:
        """Stop watching ``linger`` seconds from now unless a reader came back meanwhile."""
        self._idle = asyncio.get_running_loop().call_later(linger, self.stop, forget)

    def stop(self, forget: Callable[[Collection], None]) -> None:
        """Stop watching now, unless a reader came back."""
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        if self.readers == 0 and self._task is not None:
            self._task.cancel()
            forget(self)

    async def close(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _follow(self) -> None:
        version, pause = "", 0.5
        while True:
            try:
                if not version:
                    self.objects, version = await self._listed()
                    self.synced.set()
                    self._signal()
                params = {"resourceVersion": version, "allowWatchBookmarks": "true", "timeoutSeconds": "300"}
                async for event in self.kube.watch(self.path, params):
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        version = ""  # 410 Gone (or worse): list again
                        break
                    meta = obj.get("metadata") or {}
                    version = meta.get("resourceVersion") or version
                    if event.get("type") == "DELETED":
                        self.objects.pop(meta.get("name", ""), None)
                    elif event.get("type") in ("ADDED", "MODIFIED"):
                        self.objects[meta["name"]] = packed(obj)
                    else:
                        continue
                    self._signal(meta.get("name", ""))
                pause = 0.5
            except asyncio.CancelledError:
                raise
            except (KubeError, ValueError, KeyError) as exc:  # ValueError, KeyError: not a list or an event
                if isinstance(exc, KubeError) and exc.status in (401, 403, 404, 405):
                    log.info("not watching %s (%s): its objects are read one by one", self.path, exc)
                    self.refused = exc
                    self.synced.set()
                    self._signal()
                    return
                if isinstance(exc, KubeError) and exc.status == 410:
                    version = ""
                log.warning("watching %s failed (%s); again in %.1f s", self.path, exc, pause)
                await asyncio.sleep(pause)
                pause = min(pause * 2, 30.0)

    async def _listed(self) -> tuple[dict[str, bytes], str]:
        """The collection's objects, packed, and the version to watch from. Listed in pages, as client-go's
        informers list: a namespace's 1000 Deployments are 5 MB of JSON, whose parsing and packing in one
        callback held the event loop for 25-60 ms; a page's take a few. The first page's version: the server's
        pages are a snapshot at it (on a server whose later pages are newer, the objects converge once the watch
        has replayed what changed). A continue token that expired (410) is answered as client-go's pager answers
        it, by one list of everything; a token the server repeats ends the list as not one."""
        objects: dict[str, bytes] = {}
        version, token = "", ""
        while True:
            try:
                listed = await self.kube.request("GET", self.path,
                                                 params={"limit": str(PAGE), **({"continue": token} if token else {})})
            except KubeError as exc:
                if exc.status != 410 or not token:
                    raise
                whole = await self.kube.request("GET", self.path)
                return self._packed(whole), whole["metadata"]["resourceVersion"]
            objects.update(self._packed(listed))
            meta = listed["metadata"]
            following = meta.get("continue") or ""
            if following and following == token:
                raise ValueError(f"the server answered continue token {token[:40]!r} with itself")
            version, token = version or meta["resourceVersion"], following
            if not token:
                return objects, version

    @staticmethod
    def _packed(listed: dict[str, Any]) -> dict[str, bytes]:
        # a list's items carry no apiVersion and kind (watch events' objects do): the list says them
        typed = {"apiVersion": listed.get("apiVersion"), "kind": str(listed.get("kind")).removesuffix("List")}
        return {o["metadata"]["name"]: packed({**typed, **o}) for o in listed.get("items") or []}


class Collections:
    """The shared collections of an operator; ``linger``: how long one is kept watched after its last reader;
    ``idle``: how many are kept watched without a reader at most (the longest idle are stopped first). Releases
    installed over many namespaces within a linger would otherwise each keep a watch (a TLS connection) and
    their namespace's objects: ~80 at 1000 releases, 10 per namespace (peak RSS 110 MiB, 95 with the bound)."""

    def __init__(self, kube: Kube, linger: float = 60.0, idle: int = 16) -> None:
        self.kube, self.linger, self.idle = kube, linger, idle
        self.open: dict[str, Collection] = {}
        self._unread: dict[str, Collection] = {}  # the open ones without a reader, the longest idle first

    @contextlib.asynccontextmanager
    async def reading(self, paths: set[str]) -> AsyncIterator[dict[str, Collection]]:
        """The collections of ``paths``, each listed (or refused), watched while the block runs."""
        held = {path: self.open.setdefault(path, Collection(self.kube, path)) for path in paths}
        for collection in held.values():
            self._unread.pop(collection.path, None)
            collection.readers += 1
            collection.start()
        try:
            await asyncio.gather(*(c.synced.wait() for c in held.values()))
            yield held
        finally:
            for collection in held.values():
                collection.readers -= 1
                if collection.readers == 0:
                    collection.stop_after(self.linger, self._forget)
                    self._unread[collection.path] = collection
            while len(self._unread) > self.idle:
                self._unread.pop(next(iter(self._unread))).stop(self._forget)

    def _forget(self, collection: Collection) -> None:
        for table in (self.open, self._unread):
            if table.get(collection.path) is collection:
                del table[collection.path]

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.open.values()))
        self.open.clear()
        self._unread.clear()
