"""spec.dependsOn: what an object waits for before it acts. An entry names an object of the same kind (Flux's form:
``name``, ``namespace``, ``readyExpr``) or of any kind, as Flux's RFC for dependencies on any kind shapes it
(fluxcd/flux2 PR #5988: ``apiVersion`` and ``kind`` too, and ``ready: false`` for "present is enough"); Flux
Operator's ResourceSet entries have the same fields.

Where they differ, helmop follows Flux's RFC: ``ready`` defaults to true, ``readyExpr`` (CEL over ``dep``, the
object depended on, and ``self``, the waiting object) replaces the built-in judgement and is not evaluated with
``ready: false``. An entry of another kind without ``namespace`` means the waiting object's namespace for a
namespaced kind (the RFC asks for it to be written; helmop knows the scope from discovery) and nothing for a
cluster-scoped one."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .errors import SpecError
from .fields import optional_list
from .kinds import FLUX, HELMOP, PROJECT, Kind, key_of
from .names import path_problem, problem
from .objects import Resource

# The kinds that have a dependsOn of their own: what a cycle is looked for through, what `helmop why` follows.
WAITING_KINDS = (HELMOP.helmrelease, HELMOP.configsync, FLUX.helmrelease, FLUX.configsync, PROJECT)
# group/version, as apiVersion is written (core's "v1"): anything else is refused, not sent to the API in a path
API_VERSION = re.compile(r"([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?v[0-9]+((alpha|beta)[0-9]+)?")


@dataclass(frozen=True)
class Dependency:
    namespace: str  # the same kind's: the object's own by default; another kind's: "" until resolved
    name: str
    ready_expr: str = ""  # CEL over dep and self; "" = the built-in judgement (decisions.readiness)
    api_version: str = ""  # "" (with kind ""): the depending object's own kind
    kind: str = ""
    ready: bool = True  # False: the object being there is enough

    @property
    def same_kind(self) -> bool:
        return not self.kind

    def key(self, own_key: str) -> str:
        """What names its kind in the operator's memory (``own_key``: the depending object's kind's)."""
        return own_key if self.same_kind else key_of(self.api_version, self.kind)

    @property
    def title(self) -> str:
        """How a message names it: namespace/name for the same kind (as before), Kind/namespace/name otherwise."""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return where if self.same_kind else f"{self.kind}/{where}"


def dependencies(raw: Any, name: str, namespace: str, kind: str, group: str = "") -> tuple[Dependency, ...]:
    """spec.dependsOn of the object ``namespace/name`` of kind ``kind`` (of API ``group``, when known: an entry
    naming that kind and group is of the same kind)."""
    out = []
    for i, entry in enumerate(optional_list(raw, "spec.dependsOn")):
        if not isinstance(entry, dict) or not entry.get("name"):
            raise SpecError("InvalidSpec", f"spec.dependsOn[{i}].name is required")
        dep = _entry(entry, i, namespace, kind, group)
        if dep.same_kind and (dep.namespace, dep.name) == (namespace, name):
            raise SpecError("DependencyCycle", f"spec.dependsOn[{i}] names this {kind} itself")
        out.append(dep)
    return tuple(out)


def _checked(entry: dict[str, Any], i: int) -> None:
    """What would make a bad request path, or is not a value of its field, refused."""
    name, where = str(entry["name"]), str(entry.get("namespace") or "")
    api_version = str(entry.get("apiVersion") or "")
    for field, value, said in (("name", name, path_problem(name)),
                               ("namespace", where, problem(where, namespace=True) if where else "")):
        if said:  # (a name of any kind's, as RBAC objects' are: only what cannot be a path segment is refused)
            raise SpecError("InvalidSpec", f"spec.dependsOn[{i}].{field}: {value[:80]!r} {said}")
    if api_version and not API_VERSION.fullmatch(api_version):
        raise SpecError("InvalidSpec", f"spec.dependsOn[{i}].apiVersion {api_version[:100]!r} is not group/version")
    if not isinstance(entry.get("ready", True), bool):
        raise SpecError("InvalidSpec", f"spec.dependsOn[{i}].ready must be true or false")


def _entry(entry: dict[str, Any], i: int, namespace: str, own_kind: str, own_group: str) -> Dependency:
    _checked(entry, i)
    api_version, kind = str(entry.get("apiVersion") or ""), str(entry.get("kind") or "")
    if api_version and not kind:
        raise SpecError("InvalidSpec", f"spec.dependsOn[{i}].kind is required with apiVersion")
    same = not kind or (kind == own_kind and (not api_version or api_version.rpartition("/")[0] == own_group))
    if not same and not api_version:
        raise SpecError("InvalidSpec", f"spec.dependsOn[{i}].apiVersion is required: {kind} is not a {own_kind}")
    return Dependency(namespace=str(entry.get("namespace") or (namespace if same else "")), name=str(entry["name"]),
                      ready_expr=str(entry.get("readyExpr") or ""), api_version="" if same else api_version,
                      kind="" if same else kind, ready=bool(entry.get("ready", True)))


def waiting_kind(api_version: str, kind: str) -> Kind | None:
    """The kind with a dependsOn that ``api_version`` (any version of its group) and ``kind`` name, or None."""
    return next((k for k in WAITING_KINDS if k.kind == kind and k.api_version.rpartition("/")[0]
                 == api_version.rpartition("/")[0]), None)


def of_object(kind: Kind, obj: dict[str, Any]) -> tuple[Dependency, ...]:
    """The dependsOn of ``obj``, an object of ``kind`` (one of :data:`WAITING_KINDS`): none when it is invalid
    (that object reports its own invalid spec; it depends on nothing for whoever follows it)."""
    this = Resource(obj)
    try:
        return dependencies(this.spec.get("dependsOn"), this.name, this.namespace, kind.kind, kind.group)
    except SpecError:
        return ()
