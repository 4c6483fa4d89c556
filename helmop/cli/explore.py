"""``helmop tree``, ``helmop trace`` and ``helmop events``: how helmop's resources and the objects they
deploy hang together, read from the cluster (status inventories, helm's release annotations, the
ConfigSync owner mark, controller references).

* down (tree, events): what each resource manages, as ``views.tree`` finds it;
* up (trace): an object was deployed by the helm release its annotations name, which a HelmRelease
  makes; a HelmRelease may have been applied by a ConfigSync (its uid annotation) or made by an owner
  (Jenkins, app resource, Project), and a ConfigSync or git chart reads a GitRepository.

Both follow ``spec.kubeConfig`` into the remote cluster a HelmRelease or ConfigSync delivers to
(``views.remotes``: its kubeconfig Secret read with the user's own rights): ``tree`` reads the inventory's
objects there, ``trace --cluster NAME`` starts from an object there and climbs to the management cluster's
resources that delivered it. What cannot be followed is said in one line, and what the management cluster
knows (status, inventory) is shown all the same.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from helmop.api.conditions import condition_of
from helmop.api.dependencies import dependencies
from helmop.api.errors import SpecError
from helmop.api.helmrelease import parse_spec
from helmop.api.kinds import CONFIGSYNC, FLUX, GITREPOSITORY, HELMRELEASE, Kind, family_of
from helmop.api.objects import Resource
from helmop.api.status.configsync import ConfigSyncStatus
from helmop.api.status.helmrelease import HelmReleaseStatus
from helmop.decisions.sync import OWNER_UID
from helmop.helm.releases import release_of
from helmop.infra.kube import Kube, KubeError
from helmop.views.cells import LOCAL, cluster, is_remote, last_seen, since
from helmop.views.remotes import Reach
from helmop.views.statuses import artifact_of, status_of
from helmop.views.tree import MAX_DEPTH, Node, Ref, children, fetch, is_helmop, tree

from .errors import Failed
from .show import table

DELIVERERS = (HELMRELEASE, CONFIGSYNC, FLUX.helmrelease, FLUX.configsync)  # what may deliver to a remote


def show_tree(node: Node) -> str:
    return "\n".join([node.line, *node.lines()])


async def tree_of(kube: Kube, ref: Ref, reach: Reach) -> str:
    """``helmop tree``: the object and what it manages, followed into remote clusters."""
    try:
        node = await tree(kube, ref, reach=reach.client)
    finally:
        await reach.close()
    if node.obj is None:
        raise Failed(f"{node.title} not found")
    return show_tree(node)


# --- trace: up the chain --------------------------------------------------------------------------


async def _candidates(kube: Kube, kind: Kind, namespace: str) -> AsyncIterator[dict[str, Any]]:
    """Objects of ``kind`` in ``namespace`` first (where they usually are, and all a tenant may list), then in
    every namespace when allowed (a targetNamespace points elsewhere); none of a kind not served (Flux's)."""
    try:
        here = await kube.list(kind.path(namespace))
    except KubeError as exc:
        if exc.status not in (403, 404):
            raise
        return
    for obj in here:
        yield obj
    try:
        everywhere = await kube.list(kind.path())
    except KubeError as exc:
        if exc.status not in (403, 404):
            raise
        return
    for obj in everywhere:
        if Resource(obj).namespace != namespace:
            yield obj


async def _releasing(kube: Kube, release_namespace: str, release: str, on: str) -> dict[str, Any] | None:
    """The HelmRelease whose helm release this is, on cluster ``on``."""
    async for obj in _candidates(kube, HELMRELEASE, release_namespace):
        this = Resource(obj)
        try:
            spec = parse_spec(this.spec, this.name, this.namespace)
        except SpecError:
            continue
        if (spec.target_namespace, spec.release_name) == (release_namespace, release) and cluster(obj) == on:
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


async def up(kube: Kube, obj: dict[str, Any], on: str = LOCAL) -> dict[str, Any] | None:
    """The next helmop resource up the chain from ``obj``, an object of cluster ``on`` (helmop's resources are
    on ``kube``'s)."""
    this = Resource(obj)
    release = release_of(obj)
    if release is not None and not is_helmop(this.api_version):
        return await _releasing(kube, *release, on)
    # a remote object's owners are the remote cluster's own
    return await _applied_by(kube, obj) or (await _owner(kube, obj) if on == LOCAL else None)


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
    if is_remote(obj):
        out.append(("Cluster", cluster(obj)))
    if this.spec.get("dependsOn"):
        out.append(("Depends on", _dependencies(this)))
    if is_helmop(this.api_version):
        out.append(("Ready", _ready(obj)))
    return out


def _dependencies(this: Resource) -> str:
    """Its spec.dependsOn, each as Kind/namespace/name (of any kind: :mod:`helmop.api.dependencies`)."""
    try:
        entries = dependencies(this.spec.get("dependsOn"), this.name, this.namespace, this.kind)
    except SpecError as exc:
        return f"(invalid: {exc})"
    return ", ".join(f"{dep.kind or this.kind}/{dep.namespace + '/' if dep.namespace else ''}{dep.name}"
                     for dep in entries)


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


async def trace(kube: Kube, ref: Ref, on: str = LOCAL, reach: Reach | None = None) -> str:
    """``helmop trace``: the chain from the object (on cluster ``on``, reached with ``reach``) up to its source."""
    if on == LOCAL:
        return await _trace(kube, kube, ref, on, "")
    reach = reach or Reach()
    try:
        got = await _remote(kube, ref[2], on, reach)
        return await (_trace(kube, kube, ref, on, got) if isinstance(got, str) else _trace(kube, got, ref, on, ""))
    finally:
        await reach.close()


async def _trace(kube: Kube, there: Kube, ref: Ref, on: str, note: str) -> str:
    """The trace of ``ref`` read on ``there`` (unread when ``note`` says why it cannot be), its chain on ``kube``."""
    node = Node(ref, None, unread=True) if note else Node(ref, await fetch(there, ref))
    where = f" on cluster {on}" if on != LOCAL else ""
    if node.obj is None and not note:
        raise Failed(f"{ref[1]} {ref[2] + '/' if ref[2] else ''}{ref[3]} not found{where}")
    chain = await _chain(kube, node, on)
    if not chain and not is_helmop(ref[0]):
        raise Failed(f"{ref[1]} {ref[2]}/{ref[3]}{where} is not managed by helmop (no helm release, ConfigSync or "
                     "owner of helmop's)" + (f"; {note}" if note else ""))
    return (f"! {note}\n" if note else "") + _aligned(_blocks(node, chain, on))


async def _chain(kube: Kube, node: Node, on: str) -> list[dict[str, Any]]:
    """The helmop resources up from the object (unread: from the resource whose inventory lists it), then the
    source the top one reads."""
    parent = await up(kube, node.obj, on) if node.obj is not None else await _listed_in(kube, node.ref, on)
    chain = [] if parent is None else [parent]
    while chain and len(chain) < MAX_DEPTH and (parent := await up(kube, chain[-1])) is not None:
        chain.append(parent)
    for source in _sources(chain[-1] if chain else node.obj or {}):
        found = await fetch(kube, source)
        if found is not None:
            chain.append(found)
    return chain


def _blocks(node: Node, chain: list[dict[str, Any]], on: str) -> list[list[tuple[str, str]]]:
    """What trace says: of a helmop resource of this cluster, its description, of any other object its name,
    cluster and health; then of each resource up the chain."""
    if is_helmop(node.ref[0]) and node.obj is not None and on == LOCAL:
        first = describe(node.obj)
    else:
        first = [("Object", node.title), *([("Cluster", on)] if on != LOCAL else []), ("Health", node.health)]
    return [first, *(describe(o) for o in chain)]


def _aligned(blocks: list[list[tuple[str, str]]]) -> str:
    """The blocks' ``key: value`` lines, the values in one column, the blocks apart."""
    width = max(len(key) for block in blocks for key, _ in block) + 2
    return "\n---\n".join("\n".join(f"{key + ':':<{width}}{value}" for key, value in block) for block in blocks)


async def _remote(kube: Kube, namespace: str, on: str, reach: Reach) -> Kube | str:
    """The client for cluster ``on``: through the kubeconfig of a resource the user may read that delivers there
    (in ``namespace`` first), or why there is none."""
    why = ""
    for kind in DELIVERERS:
        async for obj in _candidates(kube, kind, namespace):
            if cluster(obj) == on:
                got = await reach.client(kube, obj)
                if not isinstance(got, str):
                    return got
                why = why or got
    return why or f"no HelmRelease, ConfigSync or Kustomization you may read delivers to cluster {on}"


async def _listed_in(kube: Kube, ref: Ref, on: str) -> dict[str, Any] | None:
    """The resource delivering to cluster ``on`` whose inventory lists ``ref`` (what the management cluster knows
    when the object itself cannot be read)."""
    group = ref[0].rpartition("/")[0]
    for kind in DELIVERERS:
        async for obj in _candidates(kube, kind, ref[2] or "default"):
            if cluster(obj) != on:
                continue
            listed = await children(kube, (Resource(obj).api_version, kind.kind, Resource(obj).namespace,
                                           Resource(obj).name), obj)
            if any(r[0].rpartition("/")[0] == group and r[1:] == ref[1:] for r in listed):
                return obj
    return None


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
