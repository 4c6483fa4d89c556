"""Which objects a Service's selector picks, and which Services pick an object, found through an index.

Scanning a namespace for every Service and every Pod is quadratic in one namespace of many releases (1000
Services, 2000 Deployments and ReplicaSets). The index follows the store's writes (a listener, called under its
lock, so it is never behind what a reader of the store sees): the selectable objects by each of their labels, the
Services by one pair of their selector (a Service picks an object only if the object has every pair of it, that one
too). A lookup narrows the candidates; the full selector is still matched against each one.
"""

from __future__ import annotations

from typing import TypeVar

from .store import Event, Key, Obj, Store

SERVICES: Key = ("", "services")
PODS: Key = ("", "pods")
# Pods by their labels; the workloads the sandbox reports Ready without Pods by their pod template's labels.
SELECTABLE: tuple[Key, ...] = (PODS, ("apps", "deployments"), ("apps", "replicasets"), ("apps", "daemonsets"))

Pair = tuple[str, str, str]  # namespace, label, value
Member = TypeVar("Member")


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and selector.items() <= labels.items()


def selectable_labels(key: Key, obj: Obj) -> dict[str, str]:
    """The labels a Service selector is matched against: a Pod's, or a workload's pod template's."""
    if key == PODS:
        return obj["metadata"].get("labels") or {}
    return (((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels") or {}


def selector_of(service: Obj) -> dict[str, str]:
    return (service.get("spec") or {}).get("selector") or {}


class Selection:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._objects: dict[Pair, set[tuple[Key, str]]] = {}
        self._services: dict[Pair, set[str]] = {}
        with store.lock:  # what is stored already (a restored state), then every write
            for key in (SERVICES, *SELECTABLE):
                for obj in store.items(key):
                    self._index(key, obj, add=True)
            store.listeners.append(self._on_event)

    def _on_event(self, key: Key, event: Event) -> None:
        if key != SERVICES and key not in SELECTABLE:
            return
        if event.old is not None:
            self._index(key, event.old, add=False)
        if event.type != "DELETED":
            self._index(key, event.obj, add=True)

    def _index(self, key: Key, obj: Obj, *, add: bool) -> None:
        meta = obj["metadata"]
        namespace, name = meta.get("namespace", ""), meta["name"]
        if key == SERVICES:
            selector = selector_of(obj)
            if selector:
                label, value = min(selector.items())
                _update(self._services, (namespace, label, value), name, add)
            return
        for label, value in selectable_labels(key, obj).items():
            _update(self._objects, (namespace, label, value), (key, name), add)

    def services_selecting(self, namespace: str, labels: dict[str, str]) -> list[str]:
        """Names of the Services of ``namespace`` whose selector picks an object with ``labels``, sorted."""
        with self.store.lock:
            names = {name for label, value in labels.items()
                     for name in self._services.get((namespace, label, value), ())}
        found = (self.store.get(SERVICES, namespace, name) for name in sorted(names))
        return [s["metadata"]["name"] for s in found if s is not None and selects(selector_of(s), labels)]

    def selected(self, namespace: str, selector: dict[str, str]) -> list[tuple[Key, Obj]]:
        """The selectable objects of ``namespace`` that ``selector`` picks, by kind (as SELECTABLE) and name."""
        if not selector:
            return []
        with self.store.lock:
            fewest = min((self._objects.get((namespace, label, value), set()) for label, value in selector.items()),
                         key=len)
            members = sorted(fewest, key=lambda member: (SELECTABLE.index(member[0]), member[1]))
        out = []
        for key, name in members:
            obj = self.store.get(key, namespace, name)
            if obj is not None and selects(selector, selectable_labels(key, obj)):
                out.append((key, obj))
        return out


def _update(index: dict[Pair, set[Member]], pair: Pair, member: Member, add: bool) -> None:
    if add:
        index.setdefault(pair, set()).add(member)
        return
    found = index.get(pair)
    if found is not None:
        found.discard(member)
        if not found:
            del index[pair]
