"""``helmop tree``, ``helmop trace`` and ``helmop events``: how helmop's resources and the objects they
deploy hang together, read from the cluster (status inventories, helm's release annotations, the
ConfigSync owner mark, controller references).

* down (tree, events): what each resource manages, as ``views.tree`` finds it;
* up (trace): an object was deployed by the helm release its annotations name, which a HelmRelease
  makes; a HelmRelease may have been applied by a ConfigSync (its uid annotation) or made by an owner
  (Jenkins, app resource, Project), and a ConfigSync or git chart reads a GitRepository.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from helmop.api.conditions import condition_of
from helmop.api.errors import SpecError
from helmop.api.helmrelease import parse_spec
from helmop.api.kinds import CONFIGSYNC, GITREPOSITORY, HELMRELEASE, Kind, family_of
from helmop.api.objects import Resource
from helmop.api.status.configsync import ConfigSyncStatus
from helmop.api.status.helmrelease import HelmReleaseStatus
from helmop.helm.releases import release_of
from helmop.infra.kube import Kube, KubeError
from helmop.reconcile.sync import OWNER_UID
from helmop.views.cells import last_seen, since
from helmop.views.statuses import artifact_of, status_of
from helmop.views.tree import MAX_DEPTH, Node, Ref, fetch, is_helmop

from .errors import Failed
from .show import table


def show_tree(node: Node) -> str:
    return "\n".join([f"{node.title}  {node.health}", *node.lines()])


# --- trace: up the chain --------------------------------------------------------------------------


async def _candidates(kube: Kube, kind: Kind, namespace: str) -> AsyncIterator[dict[str, Any]]:
    """Objects of ``kind`` in ``namespace`` first (where they usually are, and all a tenant may list), then in
    every namespace when allowed (a targetNamespace points elsewhere)."""
    for obj in await kube.list(kind.path(namespace)):
        yield obj
    try:
        everywhere = await kube.list(kind.path())
    except KubeError as exc:
        if exc.status != 403:
            raise
        return
    for obj in everywhere:
        if Resource(obj).namespace != namespace:
            yield obj


async def _releasing(kube: Kube, release_namespace: str, release: str) -> dict[str, Any] | None:
    """The HelmRelease whose helm release this is."""
    async for obj in _candidates(kube, HELMRELEASE, release_namespace):
        this = Resource(obj)
        try:
            spec = parse_spec(this.spec, this.name, this.namespace)
        except SpecError:
            continue
        if (spec.target_namespace, spec.release_name) == (release_namespace, release):
            return obj
    return None


async def _applied_by(kube: Kube, obj: dict[str, Any]) -> dict[str, Any] | None:
    """The ConfigSync that applied the object (the uid it marks what it applies with)."""
    uid = Resource(obj).annotation(OWNER_UID)
    if not uid:
        return None
    async for sync in _candidates(kube, CONFIGSYNC, Resource(obj).namespace or "default"):
        if Resource(sync).uid == uid:
            return sync
    return None


async def _owner(kube: Kube, obj: dict[str, Any]) -> dict[str, Any] | None:
    """helmop's resource that made this one (a Jenkins its HelmRelease, a Project its parts)."""
    this = Resource(obj)
    for owner in this.metadata.get("ownerReferences") or []:
        if owner.get("controller") and is_helmop(str(owner.get("apiVersion", ""))):
            return await fetch(kube, (str(owner["apiVersion"]), str(owner["kind"]), this.namespace,
                                      str(owner["name"])))
    return None


async def up(kube: Kube, obj: dict[str, Any]) -> dict[str, Any] | None:
    """The next helmop resource up the chain from ``obj``."""
    this = Resource(obj)
    release = release_of(obj)
    if release is not None and not is_helmop(this.api_version):
        return await _releasing(kube, *release)
    return await _applied_by(kube, obj) or await _owner(kube, obj)


def _ready(obj: dict[str, Any]) -> str:
    ready = condition_of(obj, "Ready")
    return f"{ready.get('status', 'Unknown')} {ready.get('reason', '')}: {ready.get('message', '')}".rstrip(": ")


def describe(obj: dict[str, Any]) -> list[tuple[str, str]]:
    """What trace says of one resource on the chain."""
    this, status = Resource(obj), status_of(obj)
    out = [(this.kind, f"{this.namespace + '/' if this.namespace else ''}{this.name}")]
    artifact = artifact_of(status)
    if isinstance(status, HelmReleaseStatus):
        out += _release_lines(this, status)
    elif isinstance(status, ConfigSyncStatus):  # a ConfigSync, a Flux Kustomization
        out += [("Path", str(this.spec.get("path") or ".")), ("Revision", status.last_applied_revision or "-")]
    elif family_of(this.api_version.rpartition("/")[0]).source(this.kind) is not None:
        where = this.spec.get("url") or (f"{this.spec.get('endpoint')}/{this.spec.get('bucketName')}"
                                         if this.spec.get("bucketName") else "") or _producer(this.spec)
        out += [("URL" if this.spec.get("url") else "Source", str(where or "-")),
                ("Revision", artifact.revision if artifact else "-"),
                *([("Digest", artifact.digest)] if artifact and artifact.digest else [])]
    if is_helmop(this.api_version):
        out.append(("Ready", _ready(obj)))
    return out


def _release_lines(this: Resource, status: HelmReleaseStatus) -> list[tuple[str, str]]:
    latest = status.history[0] if status.history else None
    chart = this.spec.get("chart") or {}
    repository = chart.get("repository") or {}
    origin = (f"{repository.get('url')} {repository.get('name', '')}" if repository else
              f"GitRepository/{(chart.get('sourceRef') or {}).get('name', '')} {chart.get('path', '')}")
    return [("Release", f"revision {latest.revision} ({latest.status or 'not installed'})" if latest
             else "revision - (not installed)"),
            ("Chart", f"{latest.chart_name} {latest.chart_version} from {origin}".strip() if latest
             else f"from {origin}".strip()),
            ("Values digest", status.last_attempted_config_digest or (latest.config_digest if latest else "")
             or "-")]


def _producer(spec: dict[str, Any]) -> str:
    """What a HelmChart's or an ExternalArtifact's artifact comes from."""
    ref = spec.get("sourceRef") or {}
    chart = f" {spec['chart']}" if spec.get("chart") else ""
    return f"{ref.get('kind', '')}/{ref.get('name', '')}{chart}" if ref else ""


async def trace(kube: Kube, ref: Ref) -> str:
    obj = await fetch(kube, ref)
    if obj is None:
        raise Failed(f"{ref[1]} {ref[2] + '/' if ref[2] else ''}{ref[3]} not found")
    chain = [obj]
    while len(chain) < MAX_DEPTH and (parent := await up(kube, chain[-1])) is not None:
        chain.append(parent)
    for source in _sources(chain[-1]):
        found = await fetch(kube, source)
        if found is not None:
            chain.append(found)
    if len(chain) == 1 and not is_helmop(ref[0]):
        raise Failed(f"{ref[1]} {ref[2]}/{ref[3]} is not managed by helmop (no helm release, ConfigSync or "
                     "owner of helmop's)")
    if is_helmop(ref[0]):
        blocks = [describe(o) for o in chain]
    else:
        node = Node(ref, obj)
        blocks = [[("Object", node.title), ("Health", node.health)], *(describe(o) for o in chain[1:])]
    width = max(len(key) for block in blocks for key, _ in block) + 2
    return "\n---\n".join("\n".join(f"{key + ':':<{width}}{value}" for key, value in block) for block in blocks)


def _sources(obj: dict[str, Any]) -> list[Ref]:
    """The source the top of the chain reads (a ConfigSync's or Kustomization's GitRepository, a chart's
    source), of the chain's own family of kinds."""
    this = Resource(obj)
    source = this.source_ref
    family = family_of(this.api_version.rpartition("/")[0])
    kind = family.source(str(source.get("kind") or GITREPOSITORY.kind))
    if not source.get("name") or kind is None or this.kind not in (HELMRELEASE.kind, family.configsync.kind):
        return []
    return [(kind.api_version, kind.kind, str(source.get("namespace") or this.namespace), str(source["name"]))]


# --- events ---------------------------------------------------------------------------------------


async def events(kube: Kube, namespaces: list[str | None], about: set[tuple[str, str, str]] | None) -> str:
    """Events in time order: of the objects ``about`` names ((kind, namespace, name)), or of every helmop
    resource in ``namespaces`` (None: every namespace)."""
    found: list[dict[str, Any]] = []
    for namespace in namespaces:
        path = f"/api/v1/namespaces/{namespace}/events" if namespace else "/api/v1/events"
        for event in await kube.list(path):
            involved = event.get("involvedObject") or {}
            key = (str(involved.get("kind")), str(involved.get("namespace") or ""), str(involved.get("name")))
            if (key in about) if about is not None else is_helmop(str(involved.get("apiVersion", ""))):
                found.append(event)
    found.sort(key=lambda e: (last_seen(e), int((e.get("metadata") or {}).get("resourceVersion") or 0)))
    if not found:
        return ""
    now = datetime.now(UTC)
    rows = [["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]]
    for event in found:
        involved = event.get("involvedObject") or {}
        where = f"{involved.get('namespace')}/" if involved.get("namespace") and namespaces == [None] else ""
        rows.append([since(last_seen(event), now), str(event.get("type", "")), str(event.get("reason", "")),
                     f"{str(involved.get('kind', '')).lower()}/{where}{involved.get('name', '')}",
                     str(event.get("message", "")).replace("\n", " ")])
    return table(rows)
