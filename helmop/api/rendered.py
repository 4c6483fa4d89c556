"""What a preview compares: the objects one side renders (a revision of a config repository, or what the cluster
holds), each as YAML, grouped by the ConfigSync, Flux Kustomization or HelmRelease (helmop's or Flux's) they come
from. Secrets never enter in the clear: a Secret's values become a keyed digest (the same value gives the same marker
within one run, so a change shows, a value does not), and every secret string seen is kept to be masked wherever
else it appears.

A live object is shown as the diff should see it (:func:`live_view`): what the API server adds of its own
(status, managedFields, resourceVersion, uid, creationTimestamp, generation, ...) is left out, and so are the fields
nobody asked for (defaults, other managers' fields): only the fields the rendered object sets and those its applier
last applied (its field managers' entries in managedFields) are kept. Pure."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from . import k8syaml

# Set by the API server, never by what is applied: never part of a diff
SERVER_FIELDS = ("managedFields", "resourceVersion", "uid", "creationTimestamp", "generation", "selfLink",
                 "deletionTimestamp", "deletionGracePeriodSeconds")
# What appliers mark objects with (helm's release annotations, kubectl's last applied configuration, the marks of
# ConfigSyncs, of Flux's Kustomizations and of Flux's HelmReleases): not part of what a revision renders
MARK_PREFIXES = ("meta.helm.sh/", "kubectl.kubernetes.io/last-applied-configuration", "helmop.dev/",
                 "kustomize.toolkit.fluxcd.io/", "helm.toolkit.fluxcd.io/", "deployment.kubernetes.io/revision")

HELM_LABEL = ("app.kubernetes.io/managed-by", "Helm")  # what helm labels every object it installs with


@dataclass
class Rendering:
    """One side of a preview."""

    groups: dict[str, dict[str, str]] = field(default_factory=dict)  # group -> kind/namespace/name -> YAML
    releases: dict[str, tuple[str, str]] = field(default_factory=dict)  # group -> (chart digest, values digest)
    stored: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # group -> (release, storage, target ns)
    api_versions: dict[str, str] = field(default_factory=dict)  # group -> the apiVersion of what it is named after
    unrendered: dict[str, str] = field(default_factory=dict)  # group -> why its release could not be rendered
    secrets: list[str] = field(default_factory=list)  # every secret string seen: masked in any output


BUILDERS = ("ConfigSync", "Kustomization")  # the kinds whose groups are folders built ("Kustomization apps")


def built_folder(group: str) -> str | None:
    """The folder a group of built objects is of; None for a release's group."""
    kind, _, path = group.partition(" ")
    return path if kind in BUILDERS else None


def label(obj: Mapping[str, Any]) -> str:
    """kind/namespace/name (kind/name for an object without a namespace)."""
    meta = obj.get("metadata") or {}
    return "/".join(str(p) for p in (obj.get("kind", ""), meta.get("namespace"), meta.get("name", "")) if p)


def digest(data: bytes, salt: bytes) -> str:
    return "hmac-sha256:" + hmac.new(salt, data, hashlib.sha256).hexdigest()[:16]


def _decoded(text: str) -> str:
    try:
        return base64.b64decode(text).decode(errors="replace")
    except (binascii.Error, ValueError):
        return text


def masked(obj: dict[str, Any], found: list[str], salt: bytes) -> dict[str, Any]:
    """A Secret with its values as digests (``found`` gets the values, decoded too); any other object as it is."""
    if obj.get("kind") != "Secret" or obj.get("apiVersion") != "v1":
        return obj
    out = dict(obj)
    for key in ("data", "stringData"):
        if isinstance(obj.get(key), dict):
            found += [str(v) for v in obj[key].values()]
            if key == "data":
                found += [_decoded(str(v)) for v in obj[key].values()]
            out[key] = {k: f"<secret {digest(str(v).encode(), salt)}>" for k, v in obj[key].items()}
    return out


def as_yaml(obj: dict[str, Any], found: list[str], salt: bytes, *, canonical: bool = False) -> str:
    """An object as a side shows it: masked, as YAML (``canonical``: its keys sorted, for two sides whose keys
    come in different orders, the cluster's and a template's)."""
    return dumped(masked(obj, found, salt), canonical=canonical)


def dumped(obj: dict[str, Any], *, canonical: bool = False) -> str:
    return str(yaml.dump_all([obj], Dumper=k8syaml.Dumper, sort_keys=True)) if canonical else k8syaml.dump_all([obj])


def _projected(live: Any, shape: Any) -> Any:
    """``live`` cut to the fields ``shape`` has: a map's keys, a list's items one by one (an item beyond the
    shape's kept whole: it is one the other side lacks)."""
    if isinstance(live, dict) and isinstance(shape, dict):
        return {k: _projected(v, shape[k]) for k, v in live.items() if k in shape}
    if isinstance(live, list) and isinstance(shape, list):
        return [_projected(v, shape[i]) if i < len(shape) else v for i, v in enumerate(live)]
    return live


def _owned(live: Any, fields: Any) -> Any:
    """The part of ``live`` a managedFields entry's ``fieldsV1`` names (``f:`` keys of maps; a list whose items
    it names is taken whole)."""
    if not isinstance(live, dict) or not isinstance(fields, dict):
        return live
    out = {}
    for key, inner in fields.items():
        name = key[2:] if key.startswith("f:") else None
        if name is not None and name in live:
            out[name] = _owned(live[name], inner) if inner and inner != {".": {}} else live[name]
    return out


def _merged(projected: Any, owned: Any) -> Any:
    """What the rendered object's shape kept, with the owned fields it lacks (a list it has is kept as projected:
    its owned copy holds the defaults of every item)."""
    if isinstance(projected, dict) and isinstance(owned, dict):
        return {**owned, **{k: _merged(v, owned[k]) if k in owned else v for k, v in projected.items()}}
    return projected


def _unmarked(meta: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in meta.items() if k not in SERVER_FIELDS}
    for key in ("labels", "annotations"):
        kept = {k: v for k, v in (meta.get(key) or {}).items()
                if not k.startswith(MARK_PREFIXES) and (k, v) != HELM_LABEL}
        out.pop(key, None)
        if kept:
            out[key] = kept
    return out


def comparable(obj: dict[str, Any]) -> dict[str, Any]:
    """An object without what the server sets of its own, nor the marks of its applier."""
    out = {k: v for k, v in obj.items() if k != "status"}
    if isinstance(obj.get("metadata"), dict):
        out["metadata"] = _unmarked(obj["metadata"])
    return out


def live_view(live: dict[str, Any], rendered: dict[str, Any], managers: Iterable[str]) -> dict[str, Any]:
    """``live`` as a diff against ``rendered`` should see it: the fields ``rendered`` sets, and those ``managers``
    (its appliers' field managers) own, so a field the revision no longer sets shows as removed; defaults and other
    managers' fields left out."""
    wanted = set(managers)
    owned: Any = {}
    for entry in (live.get("metadata") or {}).get("managedFields") or []:
        if isinstance(entry, dict) and entry.get("manager") in wanted:
            owned = _merged(_owned(live, entry.get("fieldsV1") or {}), owned)
    view = _merged(_projected(live, rendered), owned)
    for key in ("apiVersion", "kind"):
        if key in live:
            view[key] = live[key]
    return comparable(view)


def server_view(dry_run: dict[str, Any], rendered: dict[str, Any]) -> dict[str, Any]:
    """What a server-side dry run of ``rendered`` answered, cut to the fields ``rendered`` sets: its values as the
    server keeps them (defaults within them, quantities and the like in the server's spelling)."""
    return comparable(_projected(dry_run, rendered))
