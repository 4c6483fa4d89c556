"""A Flux object of a version Flux has removed, read as the version Flux serves (``--flux-api`` serves both, as
one CRD: :mod:`.crds`). Pure.

Flux's own CRDs converted between versions with ``strategy: None``: the apiVersion rewritten, nothing else, so
once the served version was the storage version the API server pruned what only the old version had. helmop
keeps those fields (its schema leaves their places open) and reads each as Flux's deprecation notes said to write
it instead, restoring the meaning it had, or drops it where the last Flux that served the version already did
nothing with it:

- a single ``valuesFile`` becomes the first of ``valuesFiles`` (Flux merged it before them);
- ``patchesStrategicMerge`` and ``patchesJson6902`` become ``patches``, in the order kustomize applied them
  (strategic merges, the ``patches`` written, JSON6902); a strategic merge without a target, which kustomize (and
  helmop's post-renderer) applies to the one object it names, as the old field did;
- a Kustomization's ``validation`` ("not used in v1beta2"), a GitRepository's ``gitImplementation`` (go-git
  only, since source-controller 0.33) and ``accessFrom`` on the sources that never implemented it are dropped.

A field is read so only where the object's managedFields say it was written in a removed version (the entry
owning it is of one: :func:`written_as`): kube-apiserver keeps a manager's Update entry per apiVersion, so an
object once written in an old version says so for as long as that entry owns anything, and only the field's own
owner tells what it meant. A removed field written as the served version stays for the adapter (:mod:`.spec`)
to refuse by name, as does a field no version of Flux had. Each field read is said, with what to write instead
(:func:`notes`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from typing import Any

from helmop.api.errors import SpecError

from .paths import FieldPath, dotted
from .versions import FluxKind, flux_kind, present

MAX_MANAGERS = 64  # managedFields entries looked at (a real object has a handful)

Old = Callable[[FieldPath], bool]  # whether the field there was written in a removed version
Reader = Callable[[dict[str, Any], FieldPath, Old], list[str]]


def _values_file(node: dict[str, Any], at: FieldPath, old: Old) -> list[str]:
    if "valuesFile" not in node or not old((*at, "valuesFile")):
        return []
    single, files = node.pop("valuesFile"), node.get("valuesFiles") or []
    if not isinstance(single, str) or not isinstance(files, list):
        raise SpecError("InvalidSpec", f"{dotted((*at, 'valuesFile'))} must be a path, and valuesFiles a list")
    if single:
        node["valuesFiles"] = [single, *files]
    return [f"{dotted((*at, 'valuesFile'))} read as {dotted((*at, 'valuesFiles', 0))}"]


def _patches(node: dict[str, Any], at: FieldPath, old: Old) -> list[str]:
    strategic, json6902 = (node.pop(name, None) if name in node and old((*at, name)) else None
                           for name in ("patchesStrategicMerge", "patchesJson6902"))
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
    """A strategic-merge patch without a target: applied to the one object it names, as the old field was."""
    meta = patch.get("metadata")
    if not patch.get("apiVersion") or not patch.get("kind") or not isinstance(meta, dict) or not meta.get("name"):
        raise SpecError("InvalidSpec", f"{dotted(at)} must name the object it patches (apiVersion, kind and "
                                       "metadata.name)")
    return {"patch": json.dumps(patch)}


def _json6902(patch: dict[str, Any], at: FieldPath) -> dict[str, Any]:
    target, operations = patch.get("target"), patch.get("patch")
    if not isinstance(target, dict) or not isinstance(operations, list):
        raise SpecError("InvalidSpec", f"{dotted(at)} must have a target (an object) and a patch (a list of "
                                       "operations)")
    return {"patch": json.dumps(operations), "target": target}


def _dropped(name: str) -> Reader:
    def read(node: dict[str, Any], at: FieldPath, old: Old) -> list[str]:
        if name not in node or not old((*at, name)):
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


def upgrade(kind: str, spec: dict[str, Any], old: Old) -> tuple[dict[str, Any], list[str]]:
    """``spec`` (of a Flux ``kind``) with every field of a removed version that was written in one (``old``)
    read as the served version's, and what was read so (a copy: the object itself is not changed); SpecError
    ``InvalidSpec`` for such a field whose value is not of its version's shape."""
    out = copy.deepcopy(spec)
    said: list[str] = []
    for where, read in READERS.get(kind, ()):
        parts = where.split(".")
        for at, node in _nodes({"spec": out}, parts):
            said += read(node, at, old)
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


def written_as(body: dict[str, Any]) -> dict[str, str]:
    """Each field of a removed version in the object (dotted) that its managedFields say was written in one: the
    removed apiVersion of an entry owning it (the field itself, or an atomic value holding it)."""
    kind = str(body.get("kind", ""))
    known = flux_kind(str(body.get("apiVersion", "")), kind)
    entries = (body.get("metadata") or {}).get("managedFields")
    if known is None or not isinstance(entries, list):
        return {}
    removed = {f"{known.group}/{version}" for version, _ in known.removed}
    owners = [(str(e["apiVersion"]), e.get("fieldsV1")) for e in entries[:MAX_MANAGERS] if isinstance(e, dict)
              and e.get("apiVersion") in removed and not e.get("subresource")]
    found: dict[str, str] = {}
    for pattern, _ in known.gone:
        for path in present(body, pattern):
            owner = next((version for version, fields in owners if fields and _owns(fields, path)), None)
            if owner is not None:
                found[dotted(path)] = owner
    return found


def _owns(fields: Any, path: FieldPath) -> bool:
    """Whether the FieldsV1 set ``fields`` holds ``path``: the field, or an atomic value above it (``{}``, no
    children). A list's items are keyed there (``k:``, ``v:``), not indexed: any item holding the rest will do."""
    if not isinstance(fields, dict):
        return False
    if not path:
        return True
    if not fields:
        return True  # an atomic list or map holding the field (postRenderers: a list of no list-type)
    step, rest = path[0], path[1:]
    if isinstance(step, int):
        return any(_owns(item, rest) for key, item in fields.items() if key.startswith(("k:", "v:", "i:")))
    return f"f:{step}" in fields and _owns(fields[f"f:{step}"], rest)
def notes(known: FluxKind, written: list[str], read: list[str]) -> str:
    """The Warning for an object whose fields ``read``, written in removed versions of ``known`` (``written``,
    apiVersions), were read as the served version's: what it is served as, and what to write instead."""
    releases = dict(known.removed)
    lead = [f"written as {api_version} (removed in Flux {releases[api_version.rpartition('/')[2]]})"
            for api_version in written]
    return (f"{', '.join(lead)}, served as {known.served_api_version}: {'; '.join(read)}. Rewrite it as "
            f"{known.served_api_version} (flux migrate -f does) with these fields as they are read")
