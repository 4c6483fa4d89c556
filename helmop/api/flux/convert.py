"""Flux's kinds to helmop's and back (``helmop convert``): the same spec under the other group's kind, checked as
the operator would read it. Pure.

The one internal model uses Flux's field names, so converting is renaming the kind, once the spec holds only
what both sides mean the same way: a Flux field helmop does not implement, or a helmop form Flux has no word
for, is refused by name. A Kustomization becoming a ConfigSync changes who it may write as (a ConfigSync without
a ServiceAccount stays in its own namespace and adopts nothing unannotated): that is said as a note. A Flux
object of a version Flux has removed is refused as such (:mod:`.versions`), in either direction: no cluster's Flux
serves it any more.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from helmop.api.errors import SpecError
from helmop.api.kinds import Kind

from . import spec as flux_spec
from . import versions
from .crds import PAIRS
from .versions import Refusal

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
    obj: dict[str, Any] | None  # None: the document is kept as it is
    notes: list[str] = field(default_factory=list)


class Refused(Exception):
    """Everything that stops an object's conversion, each with where it is."""

    def __init__(self, refusals: list[Refusal]) -> None:
        super().__init__("; ".join(r.message for r in refusals))
        self.refusals = refusals


def counterpart(api_version: str, kind: str, to_flux: bool) -> tuple[Kind, Kind] | None:
    """(from, to) when an object of ``api_version``/``kind`` converts in that direction; None when it does not
    (any other object, or one already of the wanted group)."""
    for ours, theirs in PAIRS:
        source, target = (ours, theirs) if to_flux else (theirs, ours)
        if (source.api_version, source.kind) == (api_version, kind):
            return source, target
    return None


SpecReader = Callable[[Kind, dict[str, Any]], object]


def convert(obj: dict[str, Any], to_flux: bool, read: SpecReader) -> Converted:
    """``obj`` as the other group's kind (or kept, with what to know); Refused naming everything that cannot be,
    a Flux object of a removed or unknown version included, whichever the direction. ``read`` reads a spec as the
    operator does (:func:`helmop.decisions.specs.read_spec`: a layer above this one)."""
    api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
    refused = versions.refusals(obj)
    pair = counterpart(versions.served(api_version, kind), kind, to_flux)
    if pair is None:
        if refused:
            raise Refused(refused)
        note = "" if to_flux else versions.note(api_version, kind)  # of what helmop will not serve
        return Converted(None, [note] if note else [])
    source, target = pair
    spec = obj.get("spec") or {}
    if not isinstance(spec, dict):
        raise Refused([*refused, Refusal("InvalidSpec", "spec must be a map", ("spec",))])
    named = {r.field for r in refused}  # a field a removed version had is not named twice
    refused += [r for r in _field_refusals(source, spec, to_flux) if r.field not in named]
    if refused:
        raise Refused(refused)
    meta = dict(obj.get("metadata") or {})
    name, namespace = str(meta.get("name", "")), str(meta.get("namespace", "") or "default")
    try:
        read(source if to_flux else target, {"metadata": {"name": name, "namespace": namespace}, "spec": spec})
    except SpecError as exc:
        raise Refused([Refusal(exc.reason, str(exc))]) from None
    notes = []
    if target.kind == "ConfigSync" and not spec.get("serviceAccountName"):
        notes.append("without spec.serviceAccountName a ConfigSync writes only into its own namespace and adopts no "
                     "existing object unless annotated helmop.dev/adopt; a Flux Kustomization had the operator's "
                     "rights")
    for server_side in SERVER_FIELDS:  # of an object read from a cluster; the finalizer is the operator's to add
        meta.pop(server_side, None)
    return Converted({"apiVersion": target.api_version, "kind": target.kind, "metadata": meta, "spec": spec}, notes)


def _field_refusals(source: Kind, spec: dict[str, Any], to_flux: bool) -> list[Refusal]:
    """Every field of ``spec`` (a ``source``'s) the other side has no word for."""
    if to_flux:
        return [Refusal("NoFluxEquivalent", f"spec.{path} has no equivalent in Flux's API: {instead}",
                        ("spec", *path.split(".")))
                for path, instead in HELMOP_ONLY.get(source.kind, {}).items() if _has(spec, path.split("."))]
    return [Refusal("UnsupportedField", flux_spec.unsupported(source, path), path)
            for path in flux_spec.unknown_fields(source, spec)]


def _has(value: Any, path: list[str]) -> bool:
    for part in path:
        if not isinstance(value, dict) or part not in value:
            return False
        value = value[part]
    return True
