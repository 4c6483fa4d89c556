"""The fleet: every cluster helmop delivers to, as the HelmReleases, ConfigSyncs and Flux Kustomizations a reader
may see say it (``cells.cluster``: ``local`` for the operator's own), each with its objects counted by health,
whether it answers and its last error. Pure: the objects are read by the caller, with the reader's rights, so a
cluster none of the reader's objects targets is not shown.

Whether a remote answers is what its objects last said: unreachable while the newest ``ClusterUnreachable`` among
them is newer than any of them turning Ready (the operator probes a remote before anything else, so an object
that turned Ready reached it); an object not retried yet keeps its old message until it is."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from helmop.api.conditions import condition_of
from helmop.api.kinds import Kind

from .cells import HEALTHS, LOCAL, cluster, health

UNREACHABLE = "ClusterUnreachable"
SYNCS = ("ConfigSync", "Kustomization")  # counted apart from releases


@dataclass(frozen=True)
class Said:
    """One object's Ready condition, as a cluster's last error or its unreachability."""

    kind: Kind
    obj: dict[str, Any]
    reason: str
    message: str
    at: str  # when Ready last changed (RFC 3339)


@dataclass
class Cluster:
    name: str
    releases: dict[str, int] = field(default_factory=lambda: dict.fromkeys(HEALTHS, 0))
    syncs: dict[str, int] = field(default_factory=lambda: dict.fromkeys(HEALTHS, 0))
    kinds: dict[Kind, int] = field(default_factory=dict)  # objects per kind
    unreachable: Said | None = None  # the newest ClusterUnreachable, while no object has been Ready since
    last_error: Said | None = None  # the newest failure of its objects
    ready_at: str = ""  # the newest turn of one of its objects to Ready

    @property
    def local(self) -> bool:
        return self.name == LOCAL


def _said(kind: Kind, obj: dict[str, Any]) -> Said:
    ready = condition_of(obj, "Ready")
    return Said(kind, obj, str(ready.get("reason") or ""), str(ready.get("message") or ""),
                str(ready.get("lastTransitionTime") or ""))


def _newer(old: Said | None, new: Said) -> Said:
    return new if old is None or new.at >= old.at else old


def _count(entry: Cluster, kind: Kind, obj: dict[str, Any]) -> None:
    state, said = health(obj), _said(kind, obj)
    (entry.syncs if kind.kind in SYNCS else entry.releases)[state] += 1
    entry.kinds[kind] = entry.kinds.get(kind, 0) + 1
    if state == "ready":
        entry.ready_at = max(entry.ready_at, said.at)
    elif state == "failed":
        entry.last_error = _newer(entry.last_error, said)
        if said.reason == UNREACHABLE:
            entry.unreachable = _newer(entry.unreachable, said)


def fleet(found: list[tuple[Kind, dict[str, Any]]]) -> list[Cluster]:
    """The clusters the objects deliver to (other kinds are left out): the operator's own first, then by name."""
    clusters: dict[str, Cluster] = {}
    for kind, obj in found:
        name = cluster(obj)
        if name:
            _count(clusters.setdefault(name, Cluster(name)), kind, obj)
    for entry in clusters.values():
        if entry.unreachable is not None and entry.ready_at > entry.unreachable.at:
            entry.unreachable = None  # answered since
    return sorted(clusters.values(), key=lambda c: (not c.local, c.name))

