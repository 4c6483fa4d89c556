"""A typed view of a Kubernetes object's body: what controllers read of every object, by name rather than
by subscripts into ``dict[str, Any]`` (the body stays the one source of truth, and is what gets written)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, NamedTuple, TypeVar

import msgspec

from .kinds import key_of
from .status import Struct


class ObjectKey(NamedTuple):
    """One of helmop's objects in the operator's memory: its kind (qualified for Flux's kinds, :func:`key_of`), its
    namespace ("" for a cluster-scoped one) and its name."""

    kind: str
    namespace: str
    name: str


T = TypeVar("T")


def _as_map(value: Any = None) -> dict[str, Any]:
    """The body's own dict (not a copy: what controllers change of it is what gets written), {} when absent."""
    found: dict[str, Any] = {} if value is None else value
    return found


class _Read(Generic[T]):
    """An attribute of a :class:`Resource` read from its body: the value of ``key`` at the top of the body, or in its
    metadata, made a ``T`` by ``convert`` (which, called without a value, gives what an absent or empty one reads
    as: "", 0, False, {})."""

    def __init__(self, key: str, convert: Callable[..., T], *, metadata: bool = False) -> None:
        self.key, self.convert, self.metadata = key, convert, metadata

    def __get__(self, resource: Resource, owner: type[Resource] | None = None) -> T:
        where = resource.metadata if self.metadata else resource.body
        return self.convert(where.get(self.key) or self.convert())


class ObjectRef(Struct, frozen=True):
    """A reference from one object to another, by apiVersion, kind, name and namespace ("" for the referrer's, or
    for a cluster-scoped object): a ConfigSync's health checks, an ExternalArtifact's producer, a Project's
    inventory."""

    api_version: str
    kind: str
    name: str
    namespace: str = ""


@dataclass(frozen=True)
class Resource:
    body: dict[str, Any]

    metadata = _Read("metadata", _as_map)
    api_version = _Read("apiVersion", str)
    kind = _Read("kind", str)
    namespace = _Read("namespace", str, metadata=True)
    name = _Read("name", str, metadata=True)
    uid = _Read("uid", str, metadata=True)
    generation = _Read("generation", int, metadata=True)
    deleting = _Read("deletionTimestamp", bool, metadata=True)
    spec = _Read("spec", _as_map)
    status = _Read("status", _as_map)

    @property
    def key(self) -> ObjectKey:
        return ObjectKey(key_of(self.api_version, self.kind), self.namespace, self.name)

    @property
    def deleted_at(self) -> float | None:
        """When the deletion was requested (seconds since the epoch), None when it was not."""
        stamp = self.metadata.get("deletionTimestamp")
        return datetime.fromisoformat(str(stamp)).timestamp() if stamp else None

    @property
    def source_ref(self) -> dict[str, Any]:
        """The source object the resource reads: a HelmRelease's ``spec.chart.sourceRef`` (or Flux's forms,
        ``spec.chart.spec.sourceRef`` and ``spec.chartRef``), a ConfigSync's ``spec.sourceRef`` ({} when none)."""
        chart = self.spec.get("chart") or {}
        ref: dict[str, Any] = (chart.get("sourceRef") or (chart.get("spec") or {}).get("sourceRef")
                               or self.spec.get("chartRef") or self.spec.get("sourceRef") or {})
        return ref

    def annotation(self, name: str) -> str:
        """The value of an annotation ("" when absent)."""
        return str((self.metadata.get("annotations") or {}).get(name, ""))

    def owner_reference(self) -> dict[str, Any]:
        """A controller reference to this object (what the objects it creates carry)."""
        return {"apiVersion": self.api_version, "kind": self.kind, "name": self.name, "uid": self.uid,
                "controller": True, "blockOwnerDeletion": True}


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def slim(obj: dict[str, Any]) -> dict[str, Any]:
    """An object as kept in memory: without ``managedFields`` and kubectl's last-applied annotation, which
    together are often most of its size and which nothing that judges or reconciles it reads. A copy of
    the top and of its metadata; the rest is shared."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    if LAST_APPLIED in (meta.get("annotations") or {}):
        meta["annotations"] = {k: v for k, v in meta["annotations"].items() if k != LAST_APPLIED}
    return {**obj, "metadata": meta}


def packed(obj: dict[str, Any]) -> bytes:
    """An object as kept for long (every watched object, between turns): :func:`slim`, as compact JSON, a
    third of the memory its dicts take; :func:`unpacked` reads it back, a fresh copy each time."""
    return msgspec.json.encode(slim(obj))


def unpacked(data: bytes) -> dict[str, Any]:
    obj: dict[str, Any] = msgspec.json.decode(data)
    return obj


def flux_id(namespace: str, name: str, group: str, kind: str) -> str:
    """An object's id in an inventory, as Flux writes it: ``<namespace>_<name>_<group>_<kind>``."""
    return f"{namespace}_{name}_{group}_{kind}"


def from_flux_id(text: str) -> tuple[str, str, str, str] | None:
    """(namespace, name, group, kind) of an inventory id (none of its parts can contain an underscore);
    None when it is not one."""
    parts = text.split("_")
    return (parts[0], parts[1], parts[2], parts[3]) if len(parts) == 4 and parts[1] and parts[3] else None
