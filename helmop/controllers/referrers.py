"""Waking resources when an object they read or deployed changes, without holding the objects.

Through kopf, every ConfigMap and Secret of the cluster would stream through the operator whole,
helm's release records (a Secret per revision of every release) included. Here every watch asks
for metadata only (``PartialObjectMetadata``: names and versions, never data, :mod:`helmop.infra.metadata`),
and helm's release Secrets are left out by a field selector. An event wakes only the resources that said
they read that object (a change of a ConfigMap/Secret they read supersedes what they run: their inputs
changed) or that deployed it and check it for drift (a plain wake: helm itself changes those
objects during an action). Kinds of deployed objects are watched from the first release that has
one; for objects with a ``generation``, a change that did not bump it (a status update) wakes
nobody. Each watch starts from a list of one item, for its resourceVersion, so starting wakes
nothing; after 410 Gone it starts again that way.

A remote cluster's deployed objects are watched the same way, with that remote's own client (never the operator's
identity), per kind and namespace of the objects: a tenant's kubeconfig is often allowed its namespaces only, and a
cluster-wide watch would stream every object of the kind there, however few are the releases'. Each starts with the
turn of the first release there that observes an object of that kind and namespace, and stops when the remote is
closed (its last holder gone; at most ``MAX_WATCHES`` per remote). A watch its identity may not make leaves those
objects compared at every look.
"""

from __future__ import annotations

from dataclasses import dataclass

from helmop.api.kinds import key_of
from helmop.api.objects import ObjectKey
from helmop.helm.releases import NOT_STORAGE
from helmop.infra.metadata import MetadataWatches

from .context import Context
from .observed import Observed

INPUTS = (("v1", "ConfigMap", ""), ("v1", "Secret", NOT_STORAGE))  # helm's records are not inputs


class _Local(Observed):
    """The operator's own cluster, where objects are also read (inputs) and waited for (dependencies)."""

    def changed(self, api_version: str, kind: str, type_: str, meta: dict[str, object]) -> None:
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        if kind in ("ConfigMap", "Secret"):
            self.memory.wake_referrers(ObjectKey(kind, namespace, name))
        self.memory.wake_waiting(ObjectKey(key_of(api_version, kind), namespace, name))  # a dependency's change
        super().changed(api_version, kind, type_, meta)


@dataclass
class Watches:
    ctx: Context
    namespaces: list[str]  # where inputs are watched (empty: everywhere); deployed objects: everywhere

    async def run(self) -> None:
        """Watch the inputs (and, as they are asked for, deployed kinds) until cancelled."""
        watches, listener = MetadataWatches(self.ctx.services.kube), _Local(self.ctx.memory, "")
        for api_version, kind, selector in INPUTS:
            for namespace in self.namespaces or [""]:
                watches.follow((api_version, kind, namespace), listener, selector)
        memory = self.ctx.memory
        try:
            while True:  # every kind of object a release deployed, as the memory learns of them
                await memory.new_kinds.wait()
                memory.new_kinds.clear()
                for api_version, kind in sorted(memory.observed_kinds):
                    if not any((api_version, kind) == (v, k) for v, k, _ in INPUTS):
                        watches.follow((api_version, kind, ""), listener)
        finally:
            await watches.close()
