"""How a ConfigSync's server-side apply treats each object, as kustomize-controller's does (``fluxcd/pkg/ssa``),
decided from the object as built, as it is live and as a dry run of its apply says it would become. Pure.

* Stages: CustomResourceDefinitions, Namespaces and ClusterRoles first, then the kinds named ``*Class``, then
  the rest; every object of a stage is dry-run before any of them is applied, and a stage with an object the
  API server refuses applies nothing (nor do the stages after it).
* Marks (a label or an annotation, any case): ``kustomize.toolkit.fluxcd.io/ssa`` ``IfNotPresent`` (created when
  missing, never changed afterwards), ``Ignore`` (never applied, said on the object in git or the live one),
  ``Merge`` (fields kubectl wrote and git does not hold are kept; otherwise they are taken over, and so
  removed: :mod:`.fieldowners`); ``kustomize.toolkit.fluxcd.io/reconcile: disabled`` as ``Ignore``.
* Drift: an existing object is applied only when the dry run differs from it (labels, annotations and all but
  metadata and status), the fields of spec.ignore left out of the comparison.
"""

from __future__ import annotations

import copy
from typing import Any

from helmop.api import pointers

from .sync import ObjectId, apply_order

SSA = "kustomize.toolkit.fluxcd.io/ssa"
RECONCILE = "kustomize.toolkit.fluxcd.io/reconcile"
Tokens = tuple[str, ...]


def mark(obj: dict[str, Any] | None, key: str) -> str:
    """The value of the label or annotation ``key`` of ``obj``, lower-cased ("" when it has none)."""
    meta = (obj or {}).get("metadata") or {}
    return next((str(value).lower() for part in ("annotations", "labels")
                 if (value := (meta.get(part) or {}).get(key)) is not None), "")


def skipped(desired: dict[str, Any], live: dict[str, Any] | None) -> str:
    """Why the object is left as it is, not applied ("" when it is applied)."""
    if "ignore" in (mark(desired, SSA), mark(live, SSA)):
        return f"{SSA}: Ignore"
    if "disabled" in (mark(desired, RECONCILE), mark(live, RECONCILE)):
        return f"{RECONCILE}: disabled"
    if live is not None and mark(desired, SSA) == "ifnotpresent":
        return f"{SSA}: IfNotPresent, and it exists"
    return ""


def merges(desired: dict[str, Any], live: dict[str, Any] | None) -> bool:
    """Whether fields other tools wrote are kept (``ssa: Merge`` on the object in git or the live one)."""
    return "merge" in (mark(desired, SSA), mark(live, SSA))


def _stage(oid: ObjectId) -> int:
    first = ((oid.kind == "CustomResourceDefinition" and oid.group == "apiextensions.k8s.io")
             or (oid.kind == "Namespace" and oid.api_version == "v1")
             or (oid.kind == "ClusterRole" and oid.group == "rbac.authorization.k8s.io"))
    return 0 if first else 1 if oid.kind.endswith("Class") else 2


def stages(ids: list[ObjectId]) -> list[list[ObjectId]]:
    """``ids`` in their apply stages (none empty), each in apply order."""
    grouped: list[list[ObjectId]] = [[], [], []]
    for oid in apply_order(ids):
        grouped[_stage(oid)].append(oid)
    return [stage for stage in grouped if stage]


def _compared(obj: dict[str, Any], ignored: tuple[Tokens, ...]) -> dict[str, Any]:
    """What a drift check compares of ``obj``: its labels, annotations and everything but metadata and status,
    without the ignored fields."""
    meta = obj.get("metadata") or {}
    out = {k: copy.deepcopy(v) for k, v in obj.items() if k not in ("metadata", "status")}
    out["metadata"] = {"labels": copy.deepcopy(meta.get("labels") or {}),
                       "annotations": copy.deepcopy(meta.get("annotations") or {})}
    for tokens in ignored:
        pointers.remove(out, tokens)
    return out


def drifted(live: dict[str, Any], dry_run: dict[str, Any], ignored: tuple[Tokens, ...] = ()) -> bool:
    """Whether applying would change ``live`` (``dry_run``: what the dry run of the apply made of it)."""
    return _compared(live, ignored) != _compared(dry_run, ignored)
