"""Events posted by the sandbox's built-in controllers, as client-go's event recorder posts them.

core/v1 Events named ``<object>.<hex>``, with involvedObject, source component and first/last
timestamps; a repeat of the same reason and message for the same object raises ``count`` instead of
adding an Event (the recorder's aggregation), so ``kubectl events --for deploy/web`` and ``kubectl
describe`` show what upstream's controllers would.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from .errors import ApiError
from .store import Obj

if TYPE_CHECKING:
    from .apiserver import ApiServer, WriteOptions

EVENTS = ("", "events")
_REMEMBERED = 4096  # client-go's event correlator keeps as many


class Recorder:
    def __init__(self, api: ApiServer, manager: WriteOptions, now: Callable[[], str]) -> None:
        self.api = api
        self.manager = manager
        self.now = now  # the controllers' clock
        # (uid, reason, message) -> Event name, for aggregation; bounded like the recorder's LRU cache
        self._posted: OrderedDict[tuple[str, str, str], str] = OrderedDict()

    def emit(self, obj: Obj, reason: str, message: str, component: str, kind: str = "Normal") -> None:
        meta = obj["metadata"]
        namespace = meta.get("namespace") or "default"
        stamp = self.now()
        rt = self.api.type_of(EVENTS)
        key = (meta.get("uid", ""), reason, message)
        existing = self.api.store.get(EVENTS, namespace, self._posted.get(key, ""))
        try:
            if existing is not None:
                self._posted.move_to_end(key)
                repeated = {**existing, "count": int(existing.get("count", 1)) + 1, "lastTimestamp": stamp}
                self.api.update(rt, namespace, existing["metadata"]["name"], repeated, self.manager)
                return
            name = f"{meta['name']}.{secrets.token_hex(8)}"
            involved = {"kind": obj.get("kind", ""), "namespace": meta.get("namespace", ""), "name": meta["name"],
                        "uid": meta.get("uid", ""), "apiVersion": obj.get("apiVersion", ""),
                        "resourceVersion": meta.get("resourceVersion", "")}
            if not meta.get("namespace"):
                involved.pop("namespace")
            event = {"metadata": {"name": name, "namespace": namespace}, "involvedObject": involved,
                     "reason": reason, "message": message, "type": kind, "count": 1,
                     "source": {"component": component}, "firstTimestamp": stamp, "lastTimestamp": stamp,
                     "reportingComponent": component, "reportingInstance": ""}
            self.api.create(rt, namespace, event, self.manager)
            self._posted[key] = name
            if len(self._posted) > _REMEMBERED:
                self._posted.popitem(last=False)
        except ApiError:
            pass  # the namespace is going away: the recorder drops events it cannot post, too
