"""What one cluster's metadata watches (:mod:`helmop.infra.metadata`) tell the drift memory and the resources that
deployed the objects they see: the operator's own cluster's (the referrers' watches, which also wake readers and
waiters) and each remote's (started here, by the turns of the releases there)."""

from __future__ import annotations

from dataclasses import dataclass, field

from helmop.helm.releases import NOT_STORAGE
from helmop.infra.metadata import MetadataWatches

from .context import Memory
from .drift_memory import LiveKey


@dataclass
class Observed:
    """What one cluster's watches tell the drift memory and the resources that deployed the objects."""

    memory: Memory
    cluster: str  # "" for the operator's own, else the remote's key
    generations: dict[LiveKey, int] = field(default_factory=dict)  # of observed objects only

    def started(self, kind: str, namespace: str, *, listed: bool) -> None:
        if listed:  # what changed before this list went unseen: a drift check of what deployed one covers it
            self.memory.wake_observers_of(self.cluster, kind, namespace)
        self.memory.drift.watching(self.cluster, kind, namespace)

    def lost(self, kind: str, namespace: str) -> None:
        self.memory.drift.lost(self.cluster, kind, namespace)

    def changed(self, api_version: str, kind: str, type_: str, meta: dict[str, object]) -> None:
        key = (self.cluster, str(meta.get("namespace") or ""), kind, str(meta.get("name") or ""))
        if not self.memory.observed_by(*key):
            return
        self.memory.drift.seen(key, None if type_ == "DELETED" else meta)
        if type_ == "DELETED":
            self.generations.pop(key, None)
        generation = meta.get("generation")
        if isinstance(generation, int) and type_ == "MODIFIED" and self.generations.get(key) == generation:
            return  # a status update: the spec (what drift is about) did not change
        if isinstance(generation, int) and type_ != "DELETED":
            self.generations[key] = generation
        self.memory.wake_observers(*key)


def follow_remote(memory: Memory, cluster: str, watches: MetadataWatches,
                  objects: list[tuple[str, str, str, str]]) -> None:
    """Watch the kinds of ``objects`` (apiVersion, namespace, kind, name) of remote ``cluster`` (its key) in their
    namespaces, with its ``watches`` (idempotent: one watch per kind and namespace, whoever asks)."""
    for api_version, namespace, kind, _ in objects:
        if (api_version, kind, namespace) not in watches.tasks:
            watches.follow((api_version, kind, namespace), Observed(memory, cluster),
                           NOT_STORAGE if (api_version, kind) == ("v1", "Secret") else "")
