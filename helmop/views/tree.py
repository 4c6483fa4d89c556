"""What helmop's resources manage, read from the cluster with the reader's own client: a HelmRelease its
release's objects (``status.inventory``), a ConfigSync what it applied, a source the ConfigSyncs, HelmReleases,
HelmCharts and ArtifactGenerators that read it, an ArtifactGenerator the ExternalArtifacts it made, a Jenkins or
app resource its HelmRelease, a Project its parts and environments (a source's readers are looked for in its own
namespace). Each object carries its health: Ready for
helmop's resources, ``reconcile.health``'s verdict for the others. ``helmop tree`` prints it, the web UI
draws it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from helmop.api.conditions import condition_of
from helmop.api.kinds import APPS_GROUP, ARTIFACTGENERATOR, CONFIGSYNC, GROUP, HELMCHART, HELMOP, HELMRELEASE
from helmop.api.objects import Resource
from helmop.api.status import parse
from helmop.api.status.helmrelease import HelmReleaseStatus
from helmop.helm.releases import inventory_objects
from helmop.infra.kube import Kube, KubeError
from helmop.reconcile.health import CURRENT, judge
from helmop.reconcile.sync import ObjectId

MAX_DEPTH = 6  # Project > ConfigSync > HelmRelease > objects: a cycle of references cannot run away
Ref = tuple[str, str, str, str]  # apiVersion, kind, namespace, name


def is_helmop(api_version: str) -> bool:
    return api_version.split("/")[0] in (GROUP, APPS_GROUP)


@dataclass
class Node:
    ref: Ref
    obj: dict[str, Any] | None
    children: list[Node] = field(default_factory=list)

    @property
    def title(self) -> str:
        _, kind, namespace, name = self.ref
        return f"{kind}/{namespace + '/' if namespace else ''}{name}"

    @property
    def health(self) -> str:
        if self.obj is None:
            return "NotFound"
        if is_helmop(self.ref[0]):
            ready = condition_of(self.obj, "Ready")
            status = {"True": "Ready", "False": "NotReady"}.get(ready.get("status", ""), "Unknown")
            return status + (f": {ready.get('reason')}: {ready.get('message', '')}" if status == "NotReady" else "")
        verdict, why = judge(self.obj)
        return verdict + (f": {why}" if why and verdict != CURRENT else "")

    def lines(self, prefix: str = "") -> list[str]:
        out = []
        for i, child in enumerate(self.children):
            last = i == len(self.children) - 1
            out.append(f"{prefix}{'└── ' if last else '├── '}{child.title}  {child.health}")
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


READERS = (CONFIGSYNC, HELMRELEASE, HELMCHART, ARTIFACTGENERATOR)  # what may read a source


def _refs(entries: Any) -> list[Ref]:
    """The (apiVersion, kind, namespace, name) entries of a Project's inventory."""
    return [(str(e.get("apiVersion", "")), str(e.get("kind", "")), str(e.get("namespace") or ""), str(e.get("name")))
            for e in entries or [] if isinstance(e, dict)]


async def children(kube: Kube, ref: Ref, obj: dict[str, Any]) -> list[Ref]:
    """What the object manages (see the module's description)."""
    api_version, kind, namespace, name = ref
    status = Resource(obj).status
    if (api_version, kind) == (HELMRELEASE.api_version, HELMRELEASE.kind):
        inventory = parse(HelmReleaseStatus, status).inventory
        return [(v, k, ns, n) for v, ns, k, n in inventory_objects(inventory)]
    if (api_version, kind) == (CONFIGSYNC.api_version, CONFIGSYNC.kind):
        ids = [ObjectId.from_json(entry) for entry in status.get("inventory") or []]
        return [(o.api_version, o.kind, o.namespace, o.name) for o in ids]
    if api_version == HELMOP.gitrepository.api_version and HELMOP.source(kind) is not None:
        readers = [obj for kind_ in READERS for obj in await kube.list(kind_.path(namespace))]
        return _source_readers(readers, kind, namespace, name)
    if (api_version, kind) == (ARTIFACTGENERATOR.api_version, ARTIFACTGENERATOR.kind):
        made = HELMOP.externalartifact
        return [(made.api_version, made.kind, str(e.get("namespace") or namespace), str(e.get("name")))
                for e in status.get("inventory") or [] if isinstance(e, dict)]
    if status.get("helmRelease"):  # a Jenkins or an app resource (an app kind is in any group)
        return [(HELMRELEASE.api_version, HELMRELEASE.kind, namespace, str(status["helmRelease"]))]
    if not is_helmop(api_version):  # another controller's status.inventory is not read as a Project's
        return []
    # a Project's parts, then its environments'
    return _refs(status.get("inventory")) + [ref for environment in status.get("environments") or []
                                             for ref in _refs(environment.get("inventory"))]


async def tree(kube: Kube, ref: Ref, depth: int = 0, seen: set[Ref] | None = None) -> Node:
    """The object and, recursively, what it manages (each object once)."""
    seen = set() if seen is None else seen
    seen.add(ref)
    node = Node(ref, await fetch(kube, ref))
    if node.obj is not None and depth < MAX_DEPTH:
        below = [r for r in await children(kube, ref, node.obj) if r not in seen]
        seen.update(below)
        node.children = list(await asyncio.gather(*(tree(kube, r, depth + 1, seen) for r in below)))
    return node
