"""``helmop get`` and ``helmop export``: helmop's resources as a table (kubectl's columns and ``-o`` forms)
or as clean, re-appliable YAML.

The CLUSTER column (where a HelmRelease, ConfigSync or Kustomization delivers: ``views.cells.cluster``) is in
``-o wide`` always, and in the default table only when a listed object delivers to a remote cluster: a
single-cluster listing reads as it always has."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, NamedTuple, TextIO

import yaml

from helmop.api.conditions import condition_of
from helmop.api.kinds import GROUP, Kind
from helmop.api.objects import LAST_APPLIED, Resource
from helmop.decisions.sync import OWNER_LABEL as CONFIGSYNC_LABEL
from helmop.infra.kube import Kube, KubeError
from helmop.views.cells import DELIVERING, cluster, is_remote, last_request, revision, since, source

from .errors import Failed
from .target import Target

OUTPUTS = ("wide", "json", "yaml", "name")
# Not part of what a user applies: kubectl's record, and helmop's own bookkeeping under its prefix (kopf's
# handler state, the one-off reconcile requests, the mark of the ConfigSync that applied the object).
_BOOKKEEPING = f"{GROUP}/"


def row(kind: Kind, obj: dict[str, Any], *, namespaced_listing: bool, wide: bool, clusters: bool = False
        ) -> list[str]:
    this, ready = Resource(obj), condition_of(obj, "Ready")
    cells = ([] if namespaced_listing else [this.namespace]) + [
        f"{kind.kind.lower()}/{this.name}", revision(obj), str(bool(this.spec.get("suspend"))),
        ready.get("status", "Unknown")]
    if wide:
        cells += [ready.get("reason", ""), since(this.metadata.get("creationTimestamp")), source(obj),
                  last_request(obj)]
    if wide or clusters:
        cells.append(cluster(obj))
    return [*cells, ready.get("message", "")]


def header(*, namespaced_listing: bool, wide: bool, clusters: bool = False) -> list[str]:
    return (([] if namespaced_listing else ["NAMESPACE"]) + ["NAME", "REVISION", "SUSPENDED", "READY"]
            + (["REASON", "AGE", "SOURCE", "LAST REQUEST"] if wide else []) + (["CLUSTER"] if wide or clusters else [])
            + ["MESSAGE"])


def on_cluster(found: list[tuple[Kind, dict[str, Any]]], name: str) -> list[tuple[Kind, dict[str, Any]]]:
    """The objects that deliver to cluster ``name`` (``local``: the operator's own); other kinds are left out."""
    return [(kind, obj) for kind, obj in found if kind.kind in DELIVERING and cluster(obj) == name]


def table(rows: list[list[str]]) -> str:
    """Columns padded to their widest cell; the last (the message) is not padded."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1]
                     for r in rows)


def name_of(kind: Kind, obj: dict[str, Any]) -> str:
    """kubectl's ``-o name`` for a custom resource: kind.group/name (lowercase kind)."""
    return f"{kind.kind.lower()}.{kind.group}/{Resource(obj).name}"


def render(found: list[tuple[Kind, dict[str, Any]]], output: str, scope: str | None, *, single: bool) -> str:
    """What ``get`` prints for these objects."""
    objects = [obj for _, obj in found]
    if output in ("json", "yaml"):
        document: Any = objects[0] if single and len(objects) == 1 else {"apiVersion": "v1", "kind": "List",
                                                                         "items": objects}
        return json.dumps(document, indent=2) if output == "json" else yaml.safe_dump(document, sort_keys=False)
    if output == "name":
        return "\n".join(name_of(kind, obj) for kind, obj in found)
    namespaced = scope is not None or all(not kind.namespaced for kind, _ in found)
    wide, clusters = output == "wide", any(is_remote(obj) for obj in objects)
    return table([header(namespaced_listing=namespaced, wide=wide, clusters=clusters)]
                 + [row(kind, obj, namespaced_listing=namespaced, wide=wide, clusters=clusters)
                    for kind, obj in found])


async def collect(kube: Kube, kinds: list[Kind], scope: str | None, names: list[str], selector: str,
                  err: TextIO | None = None) -> tuple[list[tuple[Kind, dict[str, Any]]], bool]:
    """The objects asked for, and whether every named one was found (those missing are said on ``err``,
    as kubectl says them)."""
    err = err or sys.stderr  # the stream of the moment (not of import time)
    found: list[tuple[Kind, dict[str, Any]]] = []
    complete = True
    if names and scope is None and any(kind.namespaced for kind in kinds):
        raise Failed("a resource cannot be retrieved by name across all namespaces")
    for kind in kinds:
        if names:
            for name in names:
                obj = await kube.get(kind.path(scope, name))
                if obj is None:
                    print(f'Error from server (NotFound): {kind.plural}.{kind.group} "{name}" not found', file=err)
                    complete = False
                else:
                    found.append((kind, obj))
            continue
        try:
            items = await kube.list(kind.path(scope if kind.namespaced else None), selector)
        except KubeError as exc:
            if exc.status == 404 and len(kinds) > 1:
                continue  # listing every kind: one whose CRD is not installed has nothing to show
            raise
        found += [(kind, obj) for obj in items]
    return found, complete


class Listed(NamedTuple):
    complete: bool  # every object named was found
    clusters: bool  # the table has the CLUSTER column (and so have the lines of a --watch after it)


async def get(target: Target, kinds: list[Kind], names: list[str], *, output: str, selector: str,
              cluster_name: str = "", out: TextIO | None = None) -> Listed:
    """Print the objects (``cluster_name``: only those delivering to that cluster)."""
    out = out or sys.stdout  # the stream of the moment (not of import time)
    scope = target.scope
    found, complete = await collect(target.kube, kinds, scope, names, selector)
    if cluster_name:
        found = on_cluster(found, cluster_name)
    if found or output in ("json", "yaml"):
        print(render(found, output, scope, single=bool(names) and len(names) == 1), file=out, flush=True)
    elif complete:
        where = "any namespace" if scope is None else f"the {scope} namespace"
        on = f" delivering to cluster {cluster_name}" if cluster_name else ""
        print(f"No resources found in {where}{on}.", file=sys.stderr)
    return Listed(complete, any(is_remote(obj) for _, obj in found))


async def version_now(target: Target, kind: Kind) -> str:
    """The collection's resourceVersion now: a watch from it misses no change made after this call."""
    listing = await target.kube.request("GET", kind.path(target.scope if kind.namespaced else None),
                                        params={"limit": "1"})
    return str((listing.get("metadata") or {}).get("resourceVersion", ""))


async def watch(target: Target, kind: Kind, names: list[str], version: str, *, output: str, selector: str,
                cluster_name: str = "", clusters: bool = False, out: TextIO | None = None) -> None:
    """One line (or document) per change after ``version`` (taken before the listing was printed), until
    interrupted (kubectl get --watch); with ``cluster_name``, of the objects delivering there only; ``clusters``:
    with the CLUSTER column, as the listing had it."""
    out = out or sys.stdout  # the stream of the moment (not of import time)
    scope = target.scope
    path = kind.path(scope if kind.namespaced else None)
    show: Callable[[dict[str, Any]], str] = _watch_line(kind, output, scope, clusters)
    while True:
        params = {"resourceVersion": version, "allowWatchBookmarks": "true",
                  **({"labelSelector": selector} if selector else {})}
        try:
            async for event in target.kube.watch(path, params):
                obj = event.get("object") or {}
                version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                if event.get("type") in ("BOOKMARK", "ERROR") or (names and Resource(obj).name not in names) \
                        or (cluster_name and not on_cluster([(kind, obj)], cluster_name)):
                    if event.get("type") == "ERROR":
                        raise KubeError(int(obj.get("code") or 500), str(obj.get("reason", "")),
                                        str(obj.get("message", "")))
                    continue
                print(show(obj), file=out, flush=True)
        except KubeError as exc:
            if exc.status != 410:  # Gone: the version is too old; watch from now
                raise
            version = await version_now(target, kind)


def _watch_line(kind: Kind, output: str, scope: str | None, clusters: bool) -> Callable[[dict[str, Any]], str]:
    if output == "json":
        return lambda obj: json.dumps(obj, indent=2)
    if output == "yaml":
        return lambda obj: "---\n" + yaml.safe_dump(obj, sort_keys=False).rstrip()
    if output == "name":
        return lambda obj: name_of(kind, obj)
    namespaced, wide = scope is not None or not kind.namespaced, output == "wide"
    return lambda obj: "  ".join(row(kind, obj, namespaced_listing=namespaced, wide=wide, clusters=clusters))


def clean(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as one would apply it: no status, no server-set metadata, no one-off request annotations."""
    this = Resource(obj)
    meta: dict[str, Any] = {"name": this.name, **({"namespace": this.namespace} if this.namespace else {})}
    labels = {k: v for k, v in (this.metadata.get("labels") or {}).items() if k != CONFIGSYNC_LABEL}
    annotations = {k: v for k, v in (this.metadata.get("annotations") or {}).items()
                   if k != LAST_APPLIED and not k.startswith(_BOOKKEEPING)}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": this.api_version, "kind": this.kind, "metadata": meta,
            **({"spec": obj["spec"]} if "spec" in obj else {})}


async def export(target: Target, kinds: list[Kind], names: list[str], selector: str,
                 out: TextIO | None = None) -> bool:
    out = out or sys.stdout  # the stream of the moment (not of import time)
    found, complete = await collect(target.kube, kinds, target.scope, names, selector)
    print("".join("---\n" + yaml.safe_dump(clean(obj), sort_keys=False) for _, obj in found), end="", file=out)
    return complete
