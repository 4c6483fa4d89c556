"""Where a spec.dependsOn entry points: its object's API path (the kind's plural and scope from discovery), its
key in the operator's memory, and how messages name it. Below the operator and the views alike: the operator
waits on what it finds, ``helmop why`` and the web UI follow it."""

from __future__ import annotations

from dataclasses import dataclass

from helmop.api.dependencies import Dependency
from helmop.api.errors import SpecError
from helmop.api.kinds import Kind, key_of
from helmop.api.objects import ObjectKey

from .kube import Kube


@dataclass(frozen=True)
class Target:
    """Where a dependency is: its key in the operator's memory, its API path, and how messages name it."""

    key: ObjectKey
    path: str
    title: str
    api_version: str  # "" for the depending object's own kind (woken by the dispatcher, no watch needed)
    kind: str


async def target(kube: Kube, own: Kind, namespace: str, dep: Dependency) -> Target:
    """The object ``dep`` names (KubeError 404 when the API serves no such kind)."""
    if dep.same_kind or (dep.kind == own.kind and dep.api_version.rpartition("/")[0] == own.group):
        where = (dep.namespace or namespace) if own.namespaced else ""  # (a Project's)
        return Target(ObjectKey(own.key, where, dep.name), own.path(where, dep.name), f"{where}/{dep.name}", "",
                      own.kind)
    plural, namespaced = await kube.resource(dep.api_version, dep.kind)
    where = (dep.namespace or namespace) if namespaced else ""
    if namespaced and not where:  # what waits is cluster-scoped (a Project): nothing to default to
        raise SpecError("InvalidSpec", f"spec.dependsOn: {dep.kind} {dep.name} is namespaced: name its namespace")
    prefix = f"/apis/{dep.api_version}" if "/" in dep.api_version else f"/api/{dep.api_version}"
    path = f"{prefix}/namespaces/{where}/{plural}/{dep.name}" if namespaced else f"{prefix}/{plural}/{dep.name}"
    title = f"{dep.kind}/{where}/{dep.name}" if where else f"{dep.kind}/{dep.name}"
    return Target(ObjectKey(key_of(dep.api_version, dep.kind), where, dep.name), path, title, dep.api_version,
                  dep.kind)
