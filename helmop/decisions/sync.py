"""What a ConfigSync does with the objects its build made, decided from typed inputs: the objects as applied
(their namespace and this ConfigSync's marks), what is refused (outside a tenant's namespace, or someone else's
object), the apply order, what to prune, and the inventory that results. Pure."""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from helmop.api.manifests import Manifest
from helmop.api.status.configsync import AppliedObject

# Applied first, in this order, so what later objects need exists (as kubectl and Flux order them).
FIRST = ("CustomResourceDefinition", "Namespace", "ServiceAccount", "Secret", "ConfigMap")


@dataclass(frozen=True, order=True)
class ObjectId:
    api_version: str
    kind: str
    namespace: str
    name: str

    def to_json(self) -> dict[str, str]:
        return {"apiVersion": self.api_version, "kind": self.kind, "namespace": self.namespace, "name": self.name}

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind}/{where}{self.name}"


def id_of(entry: AppliedObject) -> ObjectId:
    return ObjectId(entry.api_version, entry.kind, entry.namespace, entry.name)


def entry(oid: ObjectId, uids: Mapping[ObjectId, str]) -> AppliedObject:
    return AppliedObject(api_version=oid.api_version, kind=oid.kind, namespace=oid.namespace, name=oid.name,
                         uid=uids.get(oid, ""))


def apply_order(ids: list[ObjectId]) -> list[ObjectId]:
    def rank(oid: ObjectId) -> tuple[int, ObjectId]:
        return (FIRST.index(oid.kind) if oid.kind in FIRST else len(FIRST), oid)

    return sorted(ids, key=rank)


def to_prune(previous: list[ObjectId], desired: list[ObjectId]) -> list[ObjectId]:
    """Objects the last sync applied that git no longer has; the reverse of apply order, so
    namespaces and CRDs go last. An object whose apiVersion changed is the same object."""
    wanted = {(o.group, o.kind, o.namespace, o.name) for o in desired}
    gone = [o for o in previous if (o.group, o.kind, o.namespace, o.name) not in wanted]
    return list(reversed(apply_order(gone)))


# Ownership marks on every object a ConfigSync applies: the label says which ConfigSync (for people and
# selectors); the annotation carries its uid, which a copied label cannot fake for a different object.
OWNER_LABEL = "helmop.dev/configsync"
OWNER_UID = "helmop.dev/configsync-uid"
ADOPT = "helmop.dev/adopt"  # "true" on an existing object: a ConfigSync may take it over


RBAC_GROUP = "rbac.authorization.k8s.io"


def owner_label(namespace: str, name: str) -> str:
    """The OWNER_LABEL value of the ConfigSync ``namespace/name`` (a digest where that is no label value)."""
    value = f"{namespace}.{name}"
    if len(value) <= 63 and re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", value):
        return value
    return hashlib.sha256(value.encode()).hexdigest()[:40]


@dataclass(frozen=True)
class Marks:
    """What says an object is this ConfigSync's: its label and uid, and (a Flux Kustomization's) Flux's labels."""

    label: str
    uid: str
    origin: Mapping[str, str] = field(default_factory=dict)


class Refusal(NamedTuple):
    """Why a sync applies nothing: the condition's reason, and a message naming every offending object."""

    reason: str
    message: str


@dataclass(frozen=True)
class Wanted:
    """The objects a sync applies, as applied: namespaced ones in their namespace, all marked."""

    objects: dict[ObjectId, dict[str, Any]]
    origins: dict[ObjectId, str]  # file:line each came from
    cluster_scoped: frozenset[ObjectId]
    duplicates: tuple[str, ...]  # "<id>: defined twice (<file:line>)"


def desired(found: list[Manifest], namespaced: Mapping[tuple[str, str], bool], namespace: str,
            marks: Marks) -> Wanted:
    """``found`` (what the build made) as applied: ``namespaced`` says of each (apiVersion, kind) whether its
    objects live in a namespace (a kind it does not name is taken as namespaced: its CRD comes in this sync);
    ``namespace``: where those without one go."""
    objects: dict[ObjectId, dict[str, Any]] = {}
    origins: dict[ObjectId, str] = {}
    cluster_scoped: set[ObjectId] = set()
    duplicates: list[str] = []
    for item in found:
        obj = copy.deepcopy(item.obj)
        meta = obj.setdefault("metadata", {})
        scoped = namespaced.get((item.api_version, item.kind), True)
        if scoped:
            meta.setdefault("namespace", namespace)
        else:
            meta.pop("namespace", None)
        meta["labels"] = {**(meta.get("labels") or {}), OWNER_LABEL: marks.label, **marks.origin}
        meta.setdefault("annotations", {})[OWNER_UID] = marks.uid
        oid = ObjectId(item.api_version, item.kind, meta.get("namespace", ""), item.name)
        if oid in objects:
            duplicates.append(f"{oid}: defined twice ({item.origin})")
        objects[oid], origins[oid] = obj, item.origin
        if not scoped:
            cluster_scoped.add(oid)
    return Wanted(objects, origins, frozenset(cluster_scoped), tuple(duplicates))


def confinement(objects: dict[ObjectId, str], namespace: str, cluster_scoped: set[ObjectId]) -> Refusal | None:
    """Without a ServiceAccount to act as, a ConfigSync writes only namespaced objects into its own
    namespace, and no RBAC objects (written with the operator's rights, a RoleBinding to cluster-admin or
    a Role granting everything would escape Kubernetes' own escalation checks). None when ``objects``
    (id -> file:line) keep to that; else the reason and a message listing every offender."""
    outside = [f"{objects[o]}: {o} is cluster-scoped" for o in sorted(objects) if o in cluster_scoped]
    reason = "ClusterScopedObject" if outside else ""
    outside += [f"{objects[o]}: {o} is in namespace {o.namespace!r}" for o in sorted(objects)
                if o not in cluster_scoped and o.namespace != namespace]
    reason = reason or ("ObjectOutsideNamespace" if outside else "")
    rbac = [f"{objects[o]}: {o} is an RBAC object" for o in sorted(objects)
            if o not in cluster_scoped and o.api_version.split("/")[0] == RBAC_GROUP]
    if not outside and not rbac:
        return None
    return Refusal(reason or "RBACObjectRefused",
                   f"without spec.serviceAccountName a ConfigSync only writes namespaced objects other than Roles "
                   f"and RoleBindings in its own namespace {namespace!r}; refused, nothing applied: "
                   + "; ".join(outside + rbac))


def owned(meta: dict[str, Any], uid: str, label: str, in_inventory: bool,
          origin: Mapping[str, str] | None = None) -> bool:
    """Whether a live object (its metadata) belongs to the ConfigSync with ``uid``/``label``. Objects
    applied before uid marks existed count when they carry the label and are in its inventory; so do those
    a Flux Kustomization applied, in its inventory with its ``origin`` labels (a cluster moving from Flux)."""
    annotations, labels = meta.get("annotations") or {}, meta.get("labels") or {}
    if OWNER_UID in annotations:
        return bool(annotations[OWNER_UID] == uid)
    flux_applied = bool(origin) and all(labels.get(k) == v for k, v in (origin or {}).items())
    return in_inventory and (labels.get(OWNER_LABEL) == label or flux_applied)


def claim_problem(oid: ObjectId, origin: str, live: dict[str, Any] | None, uid: str, label: str,
                  in_inventory: bool, applied_uid: str = "", *, adopt: bool = False) -> str:
    """Why applying ``oid`` would take over someone else's object ("" when it may be applied): an
    existing object is applied only when it is this ConfigSync's (and, when the inventory recorded its
    uid, still that very object), or says it may be adopted (``adopt``: any object no other sync manages
    may be, as Flux's Kustomization applies over what it finds)."""
    if live is None:
        return ""
    meta = live.get("metadata") or {}
    replaced = bool(applied_uid) and meta.get("uid") != applied_uid
    if owned(meta, uid, label, in_inventory) and not replaced:
        return ""
    if replaced and (meta.get("annotations") or {}).get(ADOPT) != "true":
        return f"{origin}: {oid} was deleted and re-created by someone else since this ConfigSync applied it"
    other = (meta.get("annotations") or {}).get(OWNER_UID)
    if other:
        return f"{origin}: {oid} is managed by another ConfigSync (uid {other})"
    if adopt or (meta.get("annotations") or {}).get(ADOPT) == "true":
        return ""
    return (f"{origin}: {oid} exists and was not created by this ConfigSync (annotate it "
            f"{ADOPT}=\"true\" to let it be adopted)")


def claims(want: Wanted, live: Mapping[ObjectId, dict[str, Any] | None], marks: Marks,
           inventory: tuple[AppliedObject, ...], *, adopt: bool, left: frozenset[ObjectId] = frozenset()
           ) -> Refusal | None:
    """Refused (ObjectOwnedElsewhere) when applying would take over objects that are not this sync's (see
    :func:`claim_problem`), else None; ``left``: objects the sync leaves as they are (never applied)."""
    previous = {id_of(x): x.uid for x in inventory}
    problems = [p for oid in apply_order([oid for oid in want.objects if oid not in left])
                if (p := claim_problem(oid, want.origins[oid], live.get(oid), marks.uid, marks.label, oid in previous,
                                       previous.get(oid, ""), adopt=adopt))]
    if not problems:
        return None
    return Refusal("ObjectOwnedElsewhere", f"refused, nothing applied: {'; '.join(problems[:10])}")


def inventory_after(want: Wanted, inventory: tuple[AppliedObject, ...], applied: Mapping[ObjectId, str],
                    unpruned: list[ObjectId]) -> list[AppliedObject]:
    """What the sync has applied once it applied ``applied`` (id -> the object's uid): the objects applied now
    or before (one refused at its first apply was never this sync's), each with its own uid (an object deleted
    and re-created by someone else under the same name is not the one applied), and those of the previous
    inventory still to be pruned (``unpruned``: tried again next time)."""
    previous = {id_of(x): x.uid for x in inventory}
    uids = {**{oid: uid for oid, uid in previous.items() if uid}, **applied}
    kept = [entry(oid, uids) for oid in sorted(want.objects) if uids.get(oid) or oid in previous]
    return kept + [entry(oid, uids) for oid in unpruned if oid in previous and oid not in want.objects]
