"""A Flux object of a version Flux has removed, read as the version Flux serves (``--flux-api`` serves both, as
one CRD: :mod:`.crds`). Pure.

Flux's own CRDs converted between versions with ``strategy: None``: the apiVersion rewritten, nothing else. What
the served version lost was deprecated for a release first, and each such field is read here as Flux's
deprecation notes said to write it instead, or dropped where the last Flux that served the version already did
nothing with it:

- a single ``valuesFile`` becomes the first of ``valuesFiles`` (Flux merged it before them);
- ``patchesStrategicMerge`` and ``patchesJson6902`` become ``patches``, in the order kustomize applied them
  (strategic merges, the ``patches`` written, JSON6902), each strategic merge targeting the object it names
  (kustomize's own reading of a patch without a target);
- a Kustomization's ``validation`` ("not used in v1beta2"), a GitRepository's ``gitImplementation`` (go-git
  only, since source-controller 0.33) and ``accessFrom`` on the sources that never implemented it are dropped.

So no field of a removed version is lost: each is said, with what to write instead (:func:`notes`). A field no
version of Flux had stays for the adapter (:mod:`.spec`) to refuse by name.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

from helmop.api.errors import SpecError

from .paths import FieldPath, dotted
from .versions import FluxKind, flux_kind

MAX_MANAGERS = 64  # managedFields entries looked at (a real object has a handful)

Reader = Callable[[dict[str, Any], FieldPath], list[str]]


def _values_file(node: dict[str, Any], at: FieldPath) -> list[str]:
    if "valuesFile" not in node:
        return []
    single, files = node.pop("valuesFile"), node.get("valuesFiles") or []
    if not isinstance(single, str) or not isinstance(files, list):
        raise SpecError("InvalidSpec", f"{dotted((*at, 'valuesFile'))} must be a path, and valuesFiles a list")
    if single:
        node["valuesFiles"] = [single, *files]
    return [f"{dotted((*at, 'valuesFile'))} read as {dotted((*at, 'valuesFiles', 0))}"]


def _patches(node: dict[str, Any], at: FieldPath) -> list[str]:
    strategic, json6902 = node.pop("patchesStrategicMerge", None), node.pop("patchesJson6902", None)
    if strategic is None and json6902 is None:
        return []
    written = node.get("patches") or []
    if not isinstance(written, list):
        raise SpecError("InvalidSpec", f"{dotted((*at, 'patches'))} must be a list")
    first = [_strategic(patch, (*at, "patchesStrategicMerge", i)) for i, patch in enumerate(_list(strategic, at))]
    last = [_json6902(patch, (*at, "patchesJson6902", i)) for i, patch in enumerate(_list(json6902, at, True))]
    node["patches"] = [*first, *written, *last]
    read = (("patchesStrategicMerge", strategic), ("patchesJson6902", json6902))
    return [f"{dotted((*at, name))} read as {dotted((*at, 'patches'))}" for name, value in read if value is not None]


def _list(value: Any, at: FieldPath, json6902: bool = False) -> list[dict[str, Any]]:
    name = "patchesJson6902" if json6902 else "patchesStrategicMerge"
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise SpecError("InvalidSpec", f"{dotted((*at, name))} must be a list of objects")
    return value


def _strategic(patch: dict[str, Any], at: FieldPath) -> dict[str, Any]:
    """A strategic-merge patch, targeting the object it names (kinds, names and namespaces are patterns to
    Flux's selectors: matched literally here)."""
    group, _, version = str(patch.get("apiVersion") or "").rpartition("/")
    meta = patch.get("metadata")
    if not version or not patch.get("kind") or not isinstance(meta, dict) or not meta.get("name"):
        raise SpecError("InvalidSpec", f"{dotted(at)} must name the object it patches (apiVersion, kind and "
                                       "metadata.name)")
    target = {"group": group, "version": version, "kind": patch["kind"], "name": meta["name"],
              "namespace": meta.get("namespace")}
    return {"patch": json.dumps(patch), "target": {k: re.escape(str(v)) for k, v in target.items() if v}}


def _json6902(patch: dict[str, Any], at: FieldPath) -> dict[str, Any]:
    target, operations = patch.get("target"), patch.get("patch")
    if not isinstance(target, dict) or not isinstance(operations, list):
        raise SpecError("InvalidSpec", f"{dotted(at)} must have a target (an object) and a patch (a list of "
                                       "operations)")
    return {"patch": json.dumps(operations), "target": target}


def _dropped(name: str) -> Reader:
    def read(node: dict[str, Any], at: FieldPath) -> list[str]:
        if name not in node:
            return []
        node.pop(name)
        return [f"{dotted((*at, name))} ignored, as the last Flux that served it did (remove it)"]
    return read


# Where each kind's removed fields stand ("[]": every item of a list), and how they are read.
READERS: dict[str, tuple[tuple[str, Reader], ...]] = {
    "HelmRelease": (("spec.chart.spec", _values_file), ("spec.postRenderers.[].kustomize", _patches)),
    "Kustomization": (("spec", _patches), ("spec", _dropped("validation"))),
    "GitRepository": (("spec", _dropped("gitImplementation")), ("spec", _dropped("accessFrom"))),
    "HelmChart": (("spec", _values_file), ("spec", _dropped("accessFrom"))),
    "Bucket": (("spec", _dropped("accessFrom")),),
}


def upgrade(kind: str, spec: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``spec`` (of a Flux ``kind``) with every field of a removed version read as the served version's, and
    what was read so (a copy: the object itself is not changed); SpecError ``InvalidSpec`` for such a field
    whose value is not of its version's shape."""
    out = copy.deepcopy(spec)
    said: list[str] = []
    for where, read in READERS.get(kind, ()):
        parts = where.split(".")
        for at, node in _nodes({"spec": out}, parts):
            said += read(node, at)
    return out, said


def _nodes(value: Any, parts: list[str], at: FieldPath = ()) -> Iterator[tuple[FieldPath, dict[str, Any]]]:
    """The maps in ``value`` that the pattern ``parts`` names ("[]": any item of a list)."""
    if not parts:
        if isinstance(value, dict):
            yield at, value
    elif parts[0] == "[]" and isinstance(value, list):
        for i, item in enumerate(value):
            yield from _nodes(item, parts[1:], (*at, i))
    elif isinstance(value, dict) and parts[0] in value:
        yield from _nodes(value[parts[0]], parts[1:], (*at, parts[0]))


def written_as(body: dict[str, Any]) -> list[str]:
    """The removed versions the object was written in, as its managedFields say (each manager's last write)."""
    kind = str(body.get("kind", ""))
    known = flux_kind(str(body.get("apiVersion", "")), kind)
    entries = (body.get("metadata") or {}).get("managedFields")
    if known is None or not isinstance(entries, list):
        return []
    removed = {f"{known.group}/{version}" for version, _ in known.removed}
    found = {str(e.get("apiVersion")) for e in entries[:MAX_MANAGERS] if isinstance(e, dict)
             and not e.get("subresource")}
    return sorted(found & removed)


def notes(known: FluxKind, written: list[str], read: list[str]) -> str:
    """The Warning for an object written in removed versions of ``known`` (``written``, apiVersions) whose fields
    ``read`` were read as the served version's: what it is served as, and what to write instead."""
    releases = dict(known.removed)
    lead = [f"written as {api_version} (removed in Flux {releases[api_version.rpartition('/')[2]]})"
            for api_version in written]
    return (f"{', '.join(lead)}, served as {known.served_api_version}"
            f"{': ' if read else ''}{'; '.join(read)}. Rewrite it as {known.served_api_version} "
            "(flux migrate -f does)" + (" with these fields as they are read" if read else ""))
