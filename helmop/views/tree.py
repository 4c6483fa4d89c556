"""What helmop's resources manage, read from the cluster with the reader's own client: a HelmRelease its
release's objects (``status.inventory``), a ConfigSync (or Flux Kustomization) what it applied, a source the
ConfigSyncs, HelmReleases, HelmCharts and ArtifactGenerators of its family that read it, an ArtifactGenerator the
ExternalArtifacts it made, a Jenkins or app resource its HelmRelease, a Project its parts and environments (a
source's readers are looked for in its own namespace); each status read through its typed model
(``views.statuses``). Each object carries its health: Ready for
helmop's resources, ``decisions.health``'s verdict for the others. ``helmop tree`` prints it, the web UI
draws it.

What a HelmRelease or ConfigSync with ``spec.kubeConfig`` manages lives on the remote cluster it delivers to: it
is read there with the client a ``Reach`` gives (``views.remotes``: the reader's own way in), and never looked
for on the reader's cluster; without one, or when it cannot be had, the inventory is shown unread, with the one
line saying why."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from helmop.api.conditions import condition_of
from helmop.api.kinds import APPS_GROUP, GROUP, HELMRELEASE, Family, Kind, family_of
from helmop.api.objects import ObjectRef, Resource
from helmop.api.status.app import AppStatus
from helmop.api.status.configsync import ConfigSyncStatus
from helmop.api.status.helmrelease import HelmReleaseStatus
from helmop.api.status.project import ProjectStatus
from helmop.api.status.sources import ArtifactGeneratorStatus
from helmop.decisions.health import CURRENT, judge
from helmop.helm.releases import inventory_objects
from helmop.infra.kube import Kube, KubeError

from .cells import cluster, is_remote
from .statuses import status_of

MAX_DEPTH = 6  # Project > ConfigSync > HelmRelease > objects: a cycle of references cannot run away
Ref = tuple[str, str, str, str]  # apiVersion, kind, namespace, name
# The client for the remote cluster an object (read with the first client) delivers to, or why there is none.
Reach = Callable[[Kube, dict[str, Any]], Awaitable[Kube | str]]
NOT_READ = "NotRead"  # the health of an object on a remote cluster that was not read


def is_helmop(api_version: str) -> bool:
    return api_version.split("/")[0] in (GROUP, APPS_GROUP)


@dataclass
class Node:
    ref: Ref
    obj: dict[str, Any] | None
    children: list[Node] = field(default_factory=list)
    cluster: str = ""  # the remote cluster its children live on ("": the same as its own)
    note: str = ""  # why they were not read there
    unread: bool = False  # on a remote cluster that was not read

    @property
    def title(self) -> str:
        _, kind, namespace, name = self.ref
        return f"{kind}/{namespace + '/' if namespace else ''}{name}"

    @property
    def health(self) -> str:
        if self.unread:
            return NOT_READ
        if self.obj is None:
            return "NotFound"
        if is_helmop(self.ref[0]):
            ready = condition_of(self.obj, "Ready")
            status = {"True": "Ready", "False": "NotReady"}.get(ready.get("status", ""), "Unknown")
            return status + (f": {ready.get('reason')}: {ready.get('message', '')}" if status == "NotReady" else "")
        verdict, why = judge(self.obj)
        return verdict + (f": {why}" if why and verdict != CURRENT else "")

    @property
    def line(self) -> str:
        return f"{self.title}  {self.health}" + (f"  → cluster {self.cluster}" if self.cluster else "")

    def lines(self, prefix: str = "") -> list[str]:
        """The lines of what it manages (its own note first), drawn as a tree."""
        out = [f"{prefix}! {self.note}"] if self.note else []
        for i, child in enumerate(self.children):
            last = i == len(self.children) - 1
            out.append(f"{prefix}{'└── ' if last else '├── '}{child.line}")
            out += child.lines(prefix + ("    " if last else "│   "))
        return out

    def walk(self) -> list[Node]:
        return [self, *(n for child in self.children for n in child.walk())]


async def fetch(kube: Kube, ref: Ref) -> dict[str, Any] | None:
    api_version, kind, namespace, name = ref
    try:
        return await kube.get(await kube.path_of(api_version, kind, namespace, name))
    except KubeError as exc:
        if exc.status in (403, 404):
            return None
        raise


def _source_readers(kube_items: list[dict[str, Any]], kind: str, namespace: str, name: str) -> list[Ref]:
    out = []
    for obj in kube_items:
        this = Resource(obj)
        refs = [this.source_ref, *(this.spec.get("sources") or [])]  # an ArtifactGenerator reads several
        if any(isinstance(r, dict) and r.get("name") == name and (r.get("namespace") or this.namespace) == namespace
               and str(r.get("kind") or "GitRepository") == kind for r in refs):
            out.append((this.api_version, this.kind, this.namespace, this.name))
    return out


def _readers(family: Family) -> tuple[Kind, ...]:
    """What may read a source of ``family``."""
    return (family.configsync, family.helmrelease, family.helmchart, family.artifactgenerator)


def _refs(entries: tuple[ObjectRef, ...]) -> list[Ref]:
    """The (apiVersion, kind, namespace, name) entries of a Project's inventory."""
    return [(e.api_version, e.kind, e.namespace, e.name) for e in entries]


async def children(kube: Kube, ref: Ref, obj: dict[str, Any]) -> list[Ref]:
    """What the object manages (see the module's description)."""
    api_version, kind, namespace, name = ref
    status, family = status_of(obj), family_of(api_version.rpartition("/")[0])
    if isinstance(status, HelmReleaseStatus):
        return [(v, k, ns, n) for v, ns, k, n in inventory_objects(status.inventory)]
    if isinstance(status, ConfigSyncStatus):  # a ConfigSync's, a Flux Kustomization's
        return [(o.api_version, o.kind, o.namespace, o.name) for o in status.inventory]
    if any(k.api_version == api_version and k.kind == kind for k in family.sources):
        readers = [obj for kind_ in _readers(family) for obj in await kube.list(kind_.path(namespace))]
        return _source_readers(readers, kind, namespace, name)
    if isinstance(status, ArtifactGeneratorStatus):
        made = family.externalartifact
        return [(made.api_version, made.kind, e.namespace or namespace, e.name) for e in status.inventory]
    if isinstance(status, AppStatus) and status.helm_release:  # a Jenkins or an app resource (in any group)
        return [(HELMRELEASE.api_version, HELMRELEASE.kind, namespace, status.helm_release)]
    if isinstance(status, ProjectStatus):  # its parts, then its environments'
        return _refs(status.inventory) + [r for env in status.environments for r in _refs(env.inventory)]
    return []


async def tree(kube: Kube, ref: Ref, depth: int = 0, seen: set[Ref] | None = None, reach: Reach | None = None
               ) -> Node:
    """The object and, recursively, what it manages (each object once), followed into remote clusters with
    ``reach``."""
    seen = set() if seen is None else seen
    seen.add(ref)
    node = Node(ref, await fetch(kube, ref))
    if node.obj is None or depth >= MAX_DEPTH:
        return node
    below = [r for r in await children(kube, ref, node.obj) if r not in seen]
    seen.update(below)
    there: Kube | str = kube
    if is_remote(node.obj):
        node.cluster = cluster(node.obj)
        there = await reach(kube, node.obj) if reach else f"cluster {node.cluster} is not read here"
    if isinstance(there, str):
        node.note, node.children = there, [Node(r, None, unread=True) for r in below]
    else:
        node.children = list(await asyncio.gather(*(tree(there, r, depth + 1, seen, reach) for r in below)))
    return node
