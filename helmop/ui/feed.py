"""What makes the pages live: one watch per kind shown (and one on Events about objects of those kinds), shared
by every viewer, each change a note of its kind and namespace only; the kinds follow the UI's registry (a kind
that appears is watched from then on, one that goes is let go). A viewer's page receives a note by server-sent
events when the viewer may list that kind there, and then reads the page again with the viewer's own rights:
nothing of an object ever reaches a viewer through the UI's own account.

The watches are the UI's account's (a ``list``/``watch`` ClusterRole in the chart; locally the kubeconfig's):
resumed from their resourceVersion, listed afresh after 410 Gone, retried with backoff while refused or
unreachable (the pages still work, they only stop updating by themselves; a refusal is logged once, not at each
retry: an app kind's group is not in the chart's role)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass

from aiohttp import web

from helmop.api.kinds import Kind
from helmop.infra.kube import Kube, KubeError

from .access import Viewer

log = logging.getLogger(__name__)

EVENTS = "events"
QUEUE = 256  # notes waiting for one slow viewer; past it, the viewer is told to read everything again
KEEPALIVE = 15.0  # seconds between comments on an idle stream (proxies close silent ones)
ALLOWED_FOR = 30.0  # seconds a viewer's "may list" answer is kept
RETRY = (1.0, 30.0)  # backoff of a failed watch: first, longest


@dataclass(frozen=True)
class Note:
    plural: str  # a kind's plural, or "events"
    group: str
    namespace: str  # "": cluster-scoped, or "everything may have changed" with plural ""


EVERYTHING = Note("", "", "")


class Feed:
    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self._queues: set[asyncio.Queue[Note]] = set()
        self._tasks: dict[tuple[str, str], asyncio.Task[None]] = {}  # (group, plural) -> its watch
        self._groups: frozenset[str] = frozenset()  # Events about objects of these groups are noted
        self._allowed: dict[tuple[str, Note], tuple[float, bool]] = {}

    def follow(self, kinds: Iterable[Kind]) -> None:
        """Watch each of ``kinds`` (and Events) from now on; a kind no longer among them is let go."""
        wanted = {(k.group, k.plural): k.path() for k in kinds}
        self._groups = frozenset(group for group, _ in wanted)
        wanted[("", EVENTS)] = "/api/v1/events"
        for key in self._tasks.keys() - wanted.keys():
            self._tasks.pop(key).cancel()
        for (group, plural), path in wanted.items():
            if (group, plural) not in self._tasks:
                self._tasks[(group, plural)] = asyncio.create_task(self._follow(plural, group, path),
                                                                   name=f"ui-feed-{plural}.{group}")

    async def close(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    def _publish(self, note: Note) -> None:
        for queue in self._queues:
            if queue.full():  # too slow to follow: everything is read again when it catches up
                while not queue.empty():
                    queue.get_nowait()
                queue.put_nowait(EVERYTHING)
            else:
                queue.put_nowait(note)

    async def _follow(self, plural: str, group: str, path: str) -> None:
        delay, version, failed = RETRY[0], "", ""
        while True:
            try:
                if not version:
                    listing = await self.kube.request("GET", path, params={"limit": "1"})
                    version = str((listing.get("metadata") or {}).get("resourceVersion") or "")
                    self._publish(EVERYTHING)
                async for event in self.kube.watch(path, {"resourceVersion": version, "allowWatchBookmarks": "true"}):
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        version = ""  # 410 Gone, most likely: list again
                        break
                    version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                    if event.get("type") != "BOOKMARK":
                        note = self._note(plural, group, obj)
                        if note is not None:
                            self._publish(note)
                delay, failed = RETRY[0], ""
            except KubeError as exc:
                if exc.message != failed:
                    log.warning("web UI: the watch of %s.%s failed (%s); retried until it works", plural, group,
                                exc.message)
                failed = exc.message
                await asyncio.sleep(delay)
                delay, version = min(delay * 2, RETRY[1]), ""

    def _note(self, plural: str, group: str, obj: dict[str, object]) -> Note | None:
        metadata = obj.get("metadata") or {}
        namespace = str(metadata.get("namespace") or "") if isinstance(metadata, dict) else ""
        if plural != EVENTS:
            return Note(plural, group, namespace)
        involved = obj.get("involvedObject") or {}
        api_version = str(involved.get("apiVersion") or "") if isinstance(involved, dict) else ""
        return Note(EVENTS, "", namespace) if api_version.rpartition("/")[0] in self._groups else None

    async def _may_list(self, viewer: Viewer, note: Note) -> bool:
        if note is EVERYTHING:
            return True
        key, now = (viewer.key, note), time.monotonic()
        kept = self._allowed.get(key)
        if kept is not None and now - kept[0] < ALLOWED_FOR:
            return kept[1]
        if len(self._allowed) > 10_000:
            self._allowed.clear()
        attributes = {"verb": "list", "group": note.group, "resource": note.plural,
                      **({"namespace": note.namespace} if note.namespace else {})}
        try:
            review = await viewer.kube.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {
                "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": attributes}}, attempts=1)
            allowed = bool((review.get("status") or {}).get("allowed"))
        except KubeError:
            allowed = False
        self._allowed[key] = (now, allowed)
        return allowed

    async def stream(self, request: web.Request, viewer: Viewer) -> web.StreamResponse:
        """Server-sent events for one page: ``data: {"kind": plural, "namespace": ns}`` per change it may see."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        queue: asyncio.Queue[Note] = asyncio.Queue(QUEUE)
        self._queues.add(queue)
        try:
            await response.write(b"retry: 2000\n\n")
            while True:
                try:
                    note = await asyncio.wait_for(queue.get(), KEEPALIVE)
                except TimeoutError:
                    await response.write(b": idle\n\n")
                    continue
                if await self._may_list(viewer, note):
                    data = json.dumps({"kind": note.plural, "namespace": note.namespace})
                    await response.write(f"data: {data}\n\n".encode())
        except ConnectionResetError:  # the viewer went away
            pass
        finally:
            self._queues.discard(queue)
        return response
