"""The resource types the sandbox serves: built-ins from a table, custom ones from CRDs.

A :class:`ResourceType` is what discovery lists for one group/version/resource. Built-in types take
their kind and schema from the upstream definitions (:mod:`.schemas`) and the rest (plural, scope,
short names, categories, subresources) from ``data/builtin-resources.txt``. Custom types appear and
disappear with their CustomResourceDefinition, as on a real API server.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from .schemas import Schema, definition_for_kind

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    schema: Schema | None
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: frozenset[str] = frozenset()
    custom: bool = False
    printer_columns: tuple[dict[str, Any], ...] = ()
    storage: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        return self.api_version

    @property
    def storage_key(self) -> tuple[str, str]:
        """Objects of every version of one group/resource share one storage, as in etcd."""
        return (self.group, self.plural)

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def singular_name(self) -> str:
        return self.singular or self.kind.lower()

    def discovery(self) -> list[dict[str, Any]]:
        """APIResource entries for this type and its subresources."""
        main: dict[str, Any] = {
            "name": self.plural,
            "singularName": self.singular_name,
            "namespaced": self.namespaced,
            "kind": self.kind,
            # Namespaces are the one kind without deletecollection upstream.
            "verbs": [v for v in ALL_VERBS if not (v == "deletecollection" and self.kind == "Namespace"
                                                    and not self.group)],
        }
        if self.short_names:
            main["shortNames"] = list(self.short_names)
        if self.categories:
            main["categories"] = list(self.categories)
        out = [main]
        for sub in sorted(self.subresources):
            entry = {"name": f"{self.plural}/{sub}", "singularName": "", "namespaced": self.namespaced,
                     "kind": self.kind, "verbs": ["get", "patch", "update"]}
            if sub == "scale":
                entry.update(group="autoscaling", version="v1", kind="Scale")
            elif sub == "token":
                entry.update(group="authentication.k8s.io", version="v1", kind="TokenRequest", verbs=["create"])
            out.append(entry)
        return out


def _split(field_text: str) -> tuple[str, ...]:
    return () if field_text == "-" else tuple(field_text.split(","))


def builtin_types() -> list[ResourceType]:
    text = resources.files("helmop_sandbox").joinpath("data/builtin-resources.txt").read_text()
    defs = definition_for_kind()
    out = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        gv, plural, kind, scope, short, categories, subresources = line.split()
        group, _, version = gv.rpartition("/")
        out.append(
            ResourceType(
                group=group,
                version=version,
                plural=plural,
                kind=kind,
                namespaced=scope == "ns",
                schema={"$ref": defs[(group, version, kind)]},
                short_names=_split(short),
                categories=_split(categories),
                subresources=frozenset(_split(subresources)),
            )
        )
    return out


def types_of_crd(crd: dict[str, Any]) -> list[ResourceType]:
    spec = crd.get("spec", {})
    names = spec.get("names", {})
    out = []
    for version in spec.get("versions", []):
        if not version.get("served", True):
            continue
        schema = (version.get("schema") or {}).get("openAPIV3Schema") or {
            "type": "object", "x-kubernetes-preserve-unknown-fields": True}
        out.append(
            ResourceType(
                group=spec["group"],
                version=version["name"],
                plural=names["plural"],
                kind=names["kind"],
                singular=names.get("singular", ""),
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                schema=schema,
                short_names=tuple(names.get("shortNames", [])),
                categories=tuple(names.get("categories", [])),
                subresources=frozenset((version.get("subresources") or {}).keys()),
                custom=True,
                printer_columns=tuple(version.get("additionalPrinterColumns", [])),
                storage=bool(version.get("storage", False)),
            )
        )
    return out


@dataclass
class Registry:
    """Lookup of resource types; thread-safe, with a revision that changes whenever types change."""

    _types: dict[tuple[str, str, str], ResourceType] = field(default_factory=dict)
    _by_crd: dict[str, list[ResourceType]] = field(default_factory=dict)
    revision: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def with_builtins(cls) -> Registry:
        reg = cls()
        for rt in builtin_types():
            reg._types[(rt.group, rt.version, rt.plural)] = rt
        return reg

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._types.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        group, _, version = api_version.rpartition("/")
        for rt in list(self._types.values()):
            if rt.group == group and rt.version == version and rt.kind == kind:
                return rt
        return None

    def all(self) -> list[ResourceType]:
        return list(self._types.values())

    def versions_of(self, group: str, plural: str) -> list[ResourceType]:
        return [rt for rt in self.all() if rt.group == group and rt.plural == plural]

    def set_crd(self, name: str, types: list[ResourceType]) -> None:
        with self._lock:
            for old in self._by_crd.pop(name, []):
                self._types.pop((old.group, old.version, old.plural), None)
            for rt in types:
                self._types[(rt.group, rt.version, rt.plural)] = rt
            if types:
                self._by_crd[name] = types
            self.revision += 1

    def group_versions(self) -> dict[str, list[str]]:
        """group -> served versions, the preferred (first) version first, as discovery orders them."""
        out: dict[str, list[str]] = {}
        for rt in self.all():
            versions = out.setdefault(rt.group, [])
            if rt.version not in versions:
                versions.append(rt.version)
        for group, versions in out.items():
            versions.sort(key=version_priority)
            out[group] = versions
        # kube-apiserver lists groups in its APIServices' order: priority first (every built-in group's is above
        # the 1000 each CRD group gets), then the APIService's name, "<version>.<group>". So kubectl resolves a
        # short name two CRDs share (hr) to the group that sorts first, not to the one created first.
        custom = {rt.group for rt in self.all() if rt.custom}
        builtin = {g: v for g, v in out.items() if g not in custom}
        ranked = sorted(custom, key=lambda g: min(f"{v}.{g}" for v in out[g]))
        return builtin | {g: out[g] for g in ranked}


def version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes version ordering: GA before beta before alpha, higher numbers first."""
    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not m:
        return (3, 0, 0)
    stage = {"": 0, "beta": 1, "alpha": 2}[m.group(2) or ""]
    return (stage, -int(m.group(1)), -int(m.group(3) or 0))
