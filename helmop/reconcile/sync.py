"""What a ConfigSync does with a set of manifests: the apply order and what to prune. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Applied first, in this order, so what later objects need exists (as kubectl and Flux order them).
FIRST = ("CustomResourceDefinition", "Namespace", "ServiceAccount", "Secret", "ConfigMap")


@dataclass(frozen=True, order=True)
class ObjectId:
    api_version: str
    kind: str
    namespace: str
    name: str

    def to_json(self) -> dict[str, str]:
        return {"apiVersion": self.api_version, "kind": self.kind, "namespace": self.namespace, "name": self.name}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> ObjectId:
        return cls(str(raw.get("apiVersion", "")), str(raw.get("kind", "")), str(raw.get("namespace", "")),
                   str(raw.get("name", "")))

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind}/{where}{self.name}"


def apply_order(ids: list[ObjectId]) -> list[ObjectId]:
    def rank(oid: ObjectId) -> tuple[int, ObjectId]:
        return (FIRST.index(oid.kind) if oid.kind in FIRST else len(FIRST), oid)

    return sorted(ids, key=rank)


def to_prune(previous: list[ObjectId], desired: list[ObjectId]) -> list[ObjectId]:
    """Objects the last sync applied that git no longer has; the reverse of apply order, so
    namespaces and CRDs go last. An object whose apiVersion changed is the same object."""
    wanted = {(o.group, o.kind, o.namespace, o.name) for o in desired}
    gone = [o for o in previous if (o.group, o.kind, o.namespace, o.name) not in wanted]
    return list(reversed(apply_order(gone)))
