"""The CustomResourceDefinitions of Flux's kinds, as served by helmop with --flux-api.

Made from helmop's own CRDs of the same kinds (the one internal model uses Flux's field names) under Flux's
groups, versions and names. Their spec keeps unknown fields, so that a field of Flux's API helmop does not
implement reaches the adapter (:mod:`helmop.api.flux.spec`), which refuses it by name, rather than being
pruned by the API server unseen; their status is Flux's shape (:mod:`helmop.api.flux.status`).

The versions Flux has removed are served too (unless ``removed`` is False: ``--flux-api=current``), deprecated,
with the same schema and no conversion but the apiVersion's (``strategy: None``). Flux's own CRDs converted so
too, and the API server then pruned what the storage version's schema did not name: the fields only the old
version had were lost once the newer version was stored. helmop keeps them deliberately (each object of the
schema that held one keeps its unknown fields, whichever versions are served) so that the adapter reads them,
restoring the meaning they had (:mod:`helmop.api.flux.upgrade`), or, under ``=current``, refuses them by name
rather than have them vanish from objects written while the removed versions were served.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

from helmop.api import crds, kinds
from helmop.api.kinds import ALERT, FLUX, FLUX_ALERT, FLUX_PROVIDER, FLUX_RECEIVER, HELMOP, PROVIDER, RECEIVER, Kind

from . import versions

PAIRS = tuple(zip(
    (HELMOP.helmrelease, HELMOP.gitrepository, HELMOP.helmrepository, HELMOP.ocirepository, HELMOP.configsync,
     HELMOP.bucket, HELMOP.helmchart, HELMOP.externalartifact, HELMOP.artifactgenerator, PROVIDER, ALERT,
     RECEIVER),
    (FLUX.helmrelease, FLUX.gitrepository, FLUX.helmrepository, FLUX.ocirepository, FLUX.configsync,
     FLUX.bucket, FLUX.helmchart, FLUX.externalartifact, FLUX.artifactgenerator, FLUX_PROVIDER, FLUX_ALERT,
     FLUX_RECEIVER),
    strict=True))
PAIRS = (*PAIRS, *zip(kinds.IMAGES, kinds.FLUX_IMAGES, strict=True))  # image automation's kinds


@functools.cache  # read on every reconcile of a Flux object; the CRD files are read once
def spec_schema(kind: Kind) -> dict[str, Any]:
    """The spec schema of helmop's own ``kind``: what the adapter accepts of its Flux counterpart (not to be
    changed: it is shared)."""
    crd = next(c for c in crds.definitions() if c["spec"]["names"]["kind"] == kind.kind
               and c["spec"]["group"] == kind.group)
    return dict(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"])


def definitions(removed: bool = True) -> list[dict[str, Any]]:
    """The CRDs, each with the version Flux serves and (``removed``) those Flux has removed."""
    out = []
    for ours, theirs in PAIRS:
        crd = copy.deepcopy(next(c for c in crds.definitions() if c["spec"]["names"]["kind"] == ours.kind
                                 and c["spec"]["group"] == ours.group))
        crd["metadata"] = {"name": f"{theirs.plural}.{theirs.group}"}
        crd["spec"]["group"] = theirs.group
        crd["spec"]["names"] = {"plural": theirs.plural, "singular": theirs.kind.lower(), "kind": theirs.kind,
                                "shortNames": list(theirs.short_names), "categories": ["flux", "helmop"]}
        version = crd["spec"]["versions"][0]
        version["name"] = theirs.version
        schema = version["schema"]["openAPIV3Schema"]
        schema["description"] = f"Flux's {theirs.kind} ({theirs.api_version}), reconciled by helmop."
        schema["properties"]["spec"]["x-kubernetes-preserve-unknown-fields"] = True
        _open_kinds(schema["properties"]["spec"])
        _keep_removed_fields(theirs, schema["properties"]["spec"])
        schema["properties"]["status"] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                                          "description": f"Flux's {theirs.kind} status, as Flux writes it."}
        if removed:
            crd["spec"]["versions"] += _removed_versions(theirs, version)
            crd["spec"]["conversion"] = {"strategy": "None"}
        out.append(crd)
    return out


def _removed_versions(kind: Kind, served: dict[str, Any]) -> list[dict[str, Any]]:
    """The versions of ``kind`` Flux has removed, served as ``served`` is, deprecated, never stored."""
    known = versions.flux_kind(kind.api_version, kind.kind)
    if known is None:  # every kind of PAIRS is in the table (a unit test says so)
        return []
    return [{**copy.deepcopy(served), "name": version, "served": True, "storage": False, "deprecated": True,
             "deprecationWarning": versions.deprecation(known, version)} for version, _ in known.removed]


def _keep_removed_fields(kind: Kind, spec: dict[str, Any]) -> None:
    """Every object of ``spec``'s schema that held a field of a removed version keeps its unknown fields."""
    known = versions.flux_kind(kind.api_version, kind.kind)
    for pattern, _ in known.gone if known else ():
        node = spec
        for part in pattern.removeprefix("spec.").split(".")[:-1]:
            node = node.get("properties", {}).get(part.removesuffix("[]")) or {}
            node = (node.get("items") or {}) if part.endswith("[]") else node
        if "properties" in node:
            node["x-kubernetes-preserve-unknown-fields"] = True


def _open_kinds(node: dict[str, Any]) -> None:
    """No enum on a reference's kind or a provider: a kind helmop does not implement (a Bucket, a HelmChart)
    is refused by the adapter with its reason on the object, not by the API server."""
    for name, child in (node.get("properties") or {}).items():
        if name in ("kind", "provider"):
            child.pop("enum", None)
        _open_kinds(child)
    if isinstance(node.get("items"), dict):
        _open_kinds(node["items"])
