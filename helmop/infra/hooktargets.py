"""What an accepted Receiver request asks of the objects its spec lists: each one (by name, or every object of its
kind with the entry's labels), in the Receiver's namespace or the one the entry names (never another under
--no-cross-namespace-refs), kept by the filters (``resourceFilter`` and the entry's own ``filter``, CEL over
``res``, ``req`` and, for generic-oidc, ``claims``) and annotated with a reconcile request, as Flux's receiver
server does: the object's controller acts on it at once, whichever replica owns it."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from helmop.api.errors import SpecError
from helmop.api.kinds import Kind
from helmop.api.receivers import ReceiverSpec, Target, requested_annotation
from helmop.api.tenancy import Tenancy

from .kube import Kube, KubeError
from .worker import Worker, WorkerTimeout

log = logging.getLogger(__name__)
_PARTIAL = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
_PARTIAL_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"


async def request_reconciles(kube: Kube, cel: Worker, tenancy: Tenancy, namespace: str, spec: ReceiverSpec,
                             variables: dict[str, Any]) -> tuple[int, list[str]]:
    """Ask the objects ``spec`` lists (of a Receiver in ``namespace``) to reconcile; ``variables``: ``req`` (and
    ``claims``) for the filters. (How many were asked, what failed: one line per entry that did.)"""
    stamp = datetime.now(UTC).isoformat()
    asked, problems = 0, []
    for i, target in enumerate(spec.resources):
        filters = [f for f in (spec.resource_filter, target.filter) if f]
        try:
            tenancy.check_reference(namespace, target.namespace, f"spec.resources[{i}].namespace")
            kind = await _kind(kube, target)
            objects = await _objects(kube, kind, target, target.namespace or namespace, fetch=bool(filters))
            kept = await cel.each(filters, variables, "res", objects) if filters else [True] * len(objects)
            for obj in (obj for obj, keep in zip(objects, kept, strict=True) if keep):
                meta = obj["metadata"]
                await kube.merge_patch(kind.path(meta["namespace"], meta["name"]), {"metadata": {"annotations": {
                    requested_annotation(target.api_version): stamp}}})
                asked += 1
        except (KubeError, SpecError) as exc:
            problems.append(f"spec.resources[{i}] ({target.kind} {target.name}): {exc}")
        except WorkerTimeout as exc:
            problems.append(f"spec.resources[{i}] ({target.kind} {target.name}): the filters {exc}")
    return asked, problems


async def _kind(kube: Kube, target: Target) -> Kind:
    """The target's kind, its plural found by discovery (a kind of any group: Flux's image kinds, app kinds)."""
    group, _, version = target.api_version.rpartition("/")
    if not (group == "helmop.dev" or group.endswith((".helmop.dev", ".fluxcd.io"))):
        raise SpecError("ValidationFailed", f"{target.api_version} {target.kind}: a Receiver asks helmop's, its app "
                                            "kinds' and Flux's objects only")
    plural, namespaced = await kube.resource(target.api_version, target.kind)
    if not namespaced:
        raise SpecError("ValidationFailed", f"{target.kind} is not a namespaced kind")
    return Kind(target.kind, group, version, plural)


async def _objects(kube: Kube, kind: Kind, target: Target, namespace: str, *, fetch: bool) -> list[dict[str, Any]]:
    """The objects an entry names (``res`` for the filters: apiVersion, kind and metadata); one named is read only
    when a filter needs it, and its annotation otherwise fails if it is not there."""
    if target.name != "*":
        if not fetch:
            return [{"metadata": {"namespace": namespace, "name": target.name}}]
        found = await kube.request("GET", kind.path(namespace, target.name), accept=_PARTIAL)
        return [_res(target, found)]
    listed = await kube.request("GET", kind.path(namespace), params={"labelSelector": target.selector},
                                accept=_PARTIAL_LIST)
    items = [_res(target, item) for item in listed.get("items") or []]
    if not items:
        log.info("no %s in %s has the labels %s", target.kind, namespace, target.selector)
    return items


def _res(target: Target, obj: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": target.api_version, "kind": target.kind, "metadata": obj.get("metadata") or {}}
