"""Kubernetes Events about helmop's resources: one per action or failure, never repeated.

An Event is skipped when the object's previous Event had the same type, reason and message, so a
periodic check that finds the same failure (or nothing to do) does not spam. Messages come from
callers that have already scrubbed secret values.
"""

from __future__ import annotations

import logging
import uuid
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from .kube import Kube, KubeError

log = logging.getLogger(__name__)
COMPONENT = "helmop"
REMEMBERED = 10000


class Recorder:
    def __init__(self, kube: Kube, instance: str = "") -> None:
        self.kube = kube
        self.instance = instance or f"helmop-{uuid.uuid4().hex[:8]}"
        # The last Event of each object, to post no repeats; the least recently used are forgotten past
        # REMEMBERED objects (a deleted object's entry ages out instead of staying for the process's life).
        self._last: OrderedDict[str, tuple[str, str, str]] = OrderedDict()
        # Called with each Event posted (the object, type, reason, message), before it is sent: notifications.
        # They must not block: the reconcile that posted the Event waits for them.
        self.listeners: list[Callable[[dict[str, Any], str, str, str], None]] = []

    async def normal(self, obj: dict[str, Any], reason: str, message: str) -> None:
        await self.post(obj, "Normal", reason, message)

    async def warning(self, obj: dict[str, Any], reason: str, message: str) -> None:
        await self.post(obj, "Warning", reason, message)

    async def post(self, obj: dict[str, Any], kind: str, reason: str, message: str) -> None:
        meta = obj["metadata"]
        uid = meta.get("uid", "")
        if self._last.get(uid) == (kind, reason, message):
            self._last.move_to_end(uid)
            return
        self._last[uid] = (kind, reason, message)
        self._last.move_to_end(uid)
        while len(self._last) > REMEMBERED:
            self._last.popitem(last=False)
        # A failure's message can carry what a chart printed, including what it read with `lookup` (with the
        # operator's rights, by default): it is for the object's readers (status, Event), not the operator's
        # log, which names only the reason.
        log.log(logging.WARNING if kind == "Warning" else logging.INFO, "%s/%s %s: %s",
                meta.get("namespace", ""), meta.get("name"), reason,
                "(message in the object's status and Events)" if kind == "Warning" else message,
                extra={"k8s_kind": obj.get("kind"), "k8s_namespace": meta.get("namespace"),
                       "k8s_name": meta.get("name")})
        for listener in self.listeners:
            try:
                listener(obj, kind, reason, message)
            except Exception as exc:  # a notification is never worth a reconcile (its text may quote the message)
                log.error("an Event listener failed on %s/%s %s: %s", meta.get("namespace", ""), meta.get("name"),
                          reason, type(exc).__name__)
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        namespace = meta.get("namespace") or "default"
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{meta.get('name')}.", "namespace": namespace},
            "involvedObject": {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
                               "name": meta.get("name"), "namespace": meta.get("namespace"), "uid": uid,
                               "resourceVersion": meta.get("resourceVersion")},
            "type": kind, "reason": reason, "message": message[:1024],
            "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
            "reportingInstance": self.instance, "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        }
        try:
            await self.kube.request("POST", f"/api/v1/namespaces/{namespace}/events", event)
        except KubeError as exc:  # Events are auxiliary: never fail a reconcile over one
            log.warning("could not post an Event for %s/%s: %s %s", namespace, meta.get("name"), exc.status,
                        exc.reason)
