"""Flux's kinds to helmop's and back (``helmop convert``): the same spec under the other group's kind, checked as
the operator would read it. Pure.

The one internal model uses Flux's field names, so converting is renaming the kind, once the spec holds only
what both sides mean the same way: a Flux field helmop does not implement, or a helmop form Flux has no word
for, is refused by name. A Kustomization becoming a ConfigSync changes who it may write as (a ConfigSync without
a ServiceAccount stays in its own namespace and adopts nothing unannotated): that is said as a note.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from helmop.api.errors import SpecError
from helmop.api.kinds import Kind
from helmop.api.specs import PARSERS

from . import spec as flux_spec
from .crds import PAIRS

# helmop's forms that Flux's API has no field for (its chart.spec/chartRef and a webhook Receiver do the same)
HELMOP_ONLY = {
    "HelmRelease": {"chart.repository": "declare a HelmRepository and use spec.chart.spec",
                    "chart.sourceRef": "use spec.chart.spec with the GitRepository as its sourceRef",
                    "chart.path": "use spec.chart.spec.chart", "chart.valuesFiles": "use spec.chart.spec.valuesFiles"},
    "GitRepository": {"webhook": "Flux receives pushes through a notification-controller Receiver"},
}

SERVER_FIELDS = ("finalizers", "uid", "resourceVersion", "generation", "creationTimestamp", "managedFields",
                 "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink")



@dataclass(frozen=True)
class Converted:
    obj: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def counterpart(api_version: str, kind: str, to_flux: bool) -> tuple[Kind, Kind] | None:
    """(from, to) when an object of ``api_version``/``kind`` converts in that direction; None when it does not
    (any other object, or one already of the wanted group)."""
    for ours, theirs in PAIRS:
        source, target = (ours, theirs) if to_flux else (theirs, ours)
        if (source.api_version, source.kind) == (api_version, kind):
            return source, target
    return None


def convert(obj: dict[str, Any], to_flux: bool) -> Converted | None:
    """``obj`` as the other group's kind (None: nothing to convert); SpecError naming what cannot be."""
    pair = counterpart(str(obj.get("apiVersion", "")), str(obj.get("kind", "")), to_flux)
    if pair is None:
        return None
    source, target = pair
    spec = obj.get("spec") or {}
    if not isinstance(spec, dict):
        raise SpecError("InvalidSpec", "spec must be a map")
    meta = dict(obj.get("metadata") or {})
    name, namespace = str(meta.get("name", "")), str(meta.get("namespace", "") or "default")
    ours = source if to_flux else target
    if to_flux:
        for path, instead in HELMOP_ONLY.get(source.kind, {}).items():
            if _has(spec, path.split(".")):
                raise SpecError("NoFluxEquivalent", f"spec.{path} has no equivalent in Flux's API: {instead}")
    else:
        flux_spec.check(source, spec)
    PARSERS[ours.kind](spec, name, namespace)  # as the operator reads it
    notes = []
    if target.kind == "ConfigSync" and not spec.get("serviceAccountName"):
        notes.append("without spec.serviceAccountName a ConfigSync writes only into its own namespace and adopts no "
                     "existing object unless annotated helmop.dev/adopt; a Flux Kustomization had the operator's "
                     "rights")
    for server_side in SERVER_FIELDS:  # of an object read from a cluster; the finalizer is the operator's to add
        meta.pop(server_side, None)
    return Converted({"apiVersion": target.api_version, "kind": target.kind, "metadata": meta, "spec": spec}, notes)


def _has(value: Any, path: list[str]) -> bool:
    for part in path:
        if not isinstance(value, dict) or part not in value:
            return False
        value = value[part]
    return True
