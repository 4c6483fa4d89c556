"""Object storage with one global resourceVersion counter and a bounded watch history.

Objects are kept per storage key (group, resource) and namespace, so a request touches only its own
resource and namespace, never the whole store. Stored objects are never mutated: every write stores
a new dict, which may share the parts it did not change with the version before (copied only along
what changed), so readers and watch events can share them without copying. Watchers get events through
their event loop (``call_soon_threadsafe``), so the store can be written from any thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .selectors import Matcher

Obj = dict[str, Any]
Key = tuple[str, str]  # (group, plural)

HISTORY = 20_000  # events kept per resource for watches that resume from a resourceVersion


def clone(value: Any) -> Any:
    """A copy of a JSON document (dicts, lists, scalars): what ``copy.deepcopy`` makes of one, three times
    faster (no memo: a JSON document has no cycles, and what two places of it share is copied twice)."""
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
    return value


class VersionCache:
    """Serialized forms of stored objects, by a key naming the form and (uid, resourceVersion): a stored
    version never changes, and lists and informers send the same ones again and again (kube-apiserver
    caches serializations for the same reason). Least recently used ones go first."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[tuple[Any, ...], bytes] = OrderedDict()

    def get(self, key: tuple[Any, ...], make: Callable[[], bytes]) -> bytes:
        found = self._entries.get(key)
        if found is None:
            found = self._entries[key] = make()
            if len(self._entries) > self.size:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(key)
        return found


@dataclass(frozen=True)
class Event:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    obj: Obj
    old: Obj | None = None


@dataclass(eq=False)
class Watcher:
    namespace: str | None
    labels: Matcher | None
    fields: Matcher | None
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[Event | None] = field(default_factory=asyncio.Queue)

    def matches(self, obj: Obj | None) -> bool:
        if obj is None:
            return False
        if self.namespace is not None and obj["metadata"].get("namespace") != self.namespace:
            return False
        if self.labels is not None and not self.labels(obj):
            return False
        return self.fields is None or self.fields(obj)

    def translate(self, event: Event) -> Event | None:
        """The event as this watcher sees it: an object leaving its selector is DELETED to it."""
        now, before = self.matches(event.obj), self.matches(event.old)
        if event.type == "MODIFIED" and now != before:
            return Event(event.rv, "ADDED" if now else "DELETED", event.obj)
        if now or (event.type == "DELETED" and before):
            return event
        return None

    def offer(self, event: Event) -> None:
        seen = self.translate(event)
        if seen is not None:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, seen)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, None)


@dataclass
class Bucket:
    objects: dict[str, dict[str, Obj]] = field(default_factory=dict)
    history: deque[Event] = field(default_factory=lambda: deque(maxlen=HISTORY))
    # Watches from a resourceVersion older than this cannot be served completely: 410 Gone.
    horizon: int = 0
    watchers: set[Watcher] = field(default_factory=set)
    # (label, value) -> (namespace, name) of the objects carrying it: a list by an equality selector reads only
    # those (helm lists its records by owner and name in namespaces of thousands of Secrets)
    labelled: dict[tuple[str, str], set[tuple[str, str]]] = field(default_factory=dict)

    def relabel(self, old: Obj | None, new: Obj | None) -> None:
        """The label index with ``old`` (a version leaving the store) replaced by ``new`` (one entering it)."""
        before = _labels(old)
        after = _labels(new)
        if before == after:
            return
        meta = (new or old or {})["metadata"]
        ident = (meta.get("namespace", ""), meta["name"])
        for pair in before.items() - after.items():
            holders = self.labelled.get(pair)
            if holders is not None:
                holders.discard(ident)
                if not holders:
                    del self.labelled[pair]
        for pair in after.items() - before.items():
            self.labelled.setdefault(pair, set()).add(ident)


def _labels(obj: Obj | None) -> dict[str, str]:
    found = obj["metadata"].get("labels") if obj is not None else None
    return {k: v for k, v in found.items() if isinstance(v, str)} if isinstance(found, dict) else {}


class Store:
    def __init__(self, history: int = HISTORY) -> None:
        self.history = history
        self.lock = threading.RLock()
        self.rv = 1
        self._buckets: dict[Key, Bucket] = {}
        # owner uid -> dependents, for garbage collection without scanning everything
        self.dependents: dict[str, set[tuple[Key, str, str]]] = {}
        self.listeners: list[Callable[[Key, Event], None]] = []
        self._horizon = 0  # no history before this version (a compacted journal)

    def bucket(self, key: Key) -> Bucket:
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = Bucket(history=deque(maxlen=self.history), horizon=self._horizon)
        return bucket

    def get(self, key: Key, namespace: str, name: str) -> Obj | None:
        return self.bucket(key).objects.get(namespace, {}).get(name)

    def items(self, key: Key, namespace: str | None = None, labels: dict[str, str] | None = None) -> Iterator[Obj]:
        """The objects of a resource (of one namespace), by namespace and name; with ``labels``, only objects that
        carry every one of them may be among them (found through the index; the caller still matches)."""
        with self.lock:
            bucket = self.bucket(key)
            spaces = bucket.objects
            if labels:
                holders = min((bucket.labelled.get(pair, set()) for pair in labels.items()), key=len)
                chosen = sorted(i for i in holders if namespace is None or i[0] == namespace)
                snapshot = [spaces[ns][name] for ns, name in chosen]
            else:
                spaced = [spaces.get(namespace, {})] if namespace is not None else [spaces[ns] for ns in sorted(spaces)]
                snapshot = [obj for space in spaced for _, obj in sorted(space.items())]
        return iter(snapshot)

    def resource_keys(self) -> list[Key]:
        return list(self._buckets)

    def next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    def _index_owners(self, key: Key, obj: Obj, old: Obj | None) -> None:
        meta = obj["metadata"]
        ident = (key, meta.get("namespace", ""), meta["name"])
        if old is not None:
            for ref in old["metadata"].get("ownerReferences") or []:
                self.dependents.get(ref.get("uid", ""), set()).discard(ident)
        if obj is not old:
            for ref in meta.get("ownerReferences") or []:
                self.dependents.setdefault(ref.get("uid", ""), set()).add(ident)

    def put(self, key: Key, obj: Obj) -> Obj:
        """Store ``obj`` (new or replacing) with a fresh resourceVersion; returns the stored object."""
        with self.lock:
            meta = obj["metadata"]
            space = self.bucket(key).objects.setdefault(meta.get("namespace", ""), {})
            old = space.get(meta["name"])
            meta["resourceVersion"] = self.next_rv()
            space[meta["name"]] = obj
            self.bucket(key).relabel(old, obj)
            if old is not None:
                self._index_owners(key, old, old)
            self._index_owners(key, obj, None)
            self._emit(key, Event(self.rv, "MODIFIED" if old is not None else "ADDED", obj, old))
            return obj

    def remove(self, key: Key, obj: Obj) -> Obj:
        with self.lock:
            meta = obj["metadata"]
            space = self.bucket(key).objects.get(meta.get("namespace", ""), {})
            current = space.pop(meta["name"], None)
            if current is None:
                return obj
            gone = {**current, "metadata": {**current["metadata"], "resourceVersion": self.next_rv()}}
            self.bucket(key).relabel(current, None)
            self._index_owners(key, current, current)
            self._emit(key, Event(self.rv, "DELETED", gone, current))
            return gone

    @staticmethod
    def _remember(bucket: Bucket, event: Event) -> None:
        if len(bucket.history) == bucket.history.maxlen:
            bucket.horizon = bucket.history[0].rv
        bucket.history.append(event)

    def replay(self, key: Key, event: Event) -> None:
        """Put back one event of an earlier run (:mod:`.state`): objects, history and the version
        counter, telling no watcher or listener."""
        with self.lock:
            meta = event.obj["metadata"]
            bucket = self.bucket(key)
            space = bucket.objects.setdefault(meta.get("namespace", ""), {})
            old = space.get(meta["name"])
            if old is not None:
                self._index_owners(key, old, old)
            if event.type == "DELETED":
                space.pop(meta["name"], None)
                bucket.relabel(old, None)
            else:
                space[meta["name"]] = event.obj
                bucket.relabel(old, event.obj)
                self._index_owners(key, event.obj, None)
            if event.rv > bucket.horizon:
                self._remember(bucket, Event(event.rv, event.type, event.obj, old))
            self.rv = max(self.rv, event.rv)

    def compacted(self, rv: int) -> None:
        """History up to ``rv`` is gone (a compacted journal): older watches get 410 Gone."""
        with self.lock:
            self._horizon = max(self._horizon, rv)
            self.rv = max(self.rv, rv)

    def everything(self) -> Iterator[tuple[Key, Obj]]:
        with self.lock:
            found = [(key, obj) for key, bucket in self._buckets.items()
                     for space in bucket.objects.values() for obj in space.values()]
        return iter(sorted(found, key=lambda pair: int(pair[1]["metadata"]["resourceVersion"])))

    def _emit(self, key: Key, event: Event) -> None:
        bucket = self.bucket(key)
        self._remember(bucket, event)
        for watcher in list(bucket.watchers):
            watcher.offer(event)
        for listener in self.listeners:
            listener(key, event)

    def watch(self, key: Key, watcher: Watcher, since: int | None) -> bool:
        """Register ``watcher``; replay history after ``since``. False when ``since`` is too old."""
        with self.lock:
            bucket = self.bucket(key)
            if since is not None:
                if since < bucket.horizon:
                    return False
                for event in bucket.history:
                    if event.rv > since:
                        watcher.offer(event)
            bucket.watchers.add(watcher)
            return True

    def unwatch(self, key: Key, watcher: Watcher) -> None:
        with self.lock:
            self.bucket(key).watchers.discard(watcher)

    def close_watchers(self, key: Key | None = None) -> None:
        """End watches (of one resource, or all): clients see the stream close and re-list."""
        with self.lock:
            for bucket_key, bucket in self._buckets.items():
                if key is not None and bucket_key != key:
                    continue
                for watcher in bucket.watchers:
                    watcher.close()
                bucket.watchers.clear()
