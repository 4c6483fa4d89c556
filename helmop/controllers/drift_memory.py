"""What lets a drift check pass over objects that did not change: for each release, the deployed objects
last found as the release wants them, with a fingerprint of what they were then; and, from the metadata
watches, the fingerprint each object has now and since when each kind's watch has been unbroken.

A fingerprint is the metadata a drift check can be about that a watch of metadata alone still shows: the
uid, the labels, annotations, finalizers and owners, the deletion mark, and the ``generation`` (which every
change of anything but metadata and status bumps) or, for kinds without one, the resourceVersion. So a
Deployment's status updates leave it unchanged, and any edit of its spec does not. An object is passed
over only while the watch of its kind has run without a break since the check that found it clean (a
watch that broke may have missed a change), and only for the same release record and spec generation (a
new revision or new ignore rules want something else). Kinds the operator may not watch (lockdown) are
never passed over: they are compared at every look, as before.

Every object and watch is of one cluster: "" for the operator's own, else a remote's
:attr:`~helmop.infra.clusters.Remote.key`. An object of a remote cluster is passed over only on the strength of that
remote's own watch (made with its client), never of another cluster's watch of the same kind and namespace; the
watches of a remote closed are lost (their epochs go), and what it deployed is no longer observed.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from helmop.api.objects import ObjectKey

LiveKey = tuple[str, str, str, str]  # (cluster, namespace, kind, name), as Memory's observers


def fingerprint(meta: Mapping[str, Any]) -> int:
    """What an object's metadata says of it that drift can be about (see the module's doc)."""
    generation = meta.get("generation")
    return hash(json.dumps([meta.get("uid"), generation if isinstance(generation, int) else meta.get("resourceVersion"),
                            meta.get("labels"), meta.get("annotations"), meta.get("finalizers"),
                            meta.get("ownerReferences"), meta.get("deletionTimestamp")], sort_keys=True))


@dataclass(frozen=True)
class Clean:
    fingerprint: int
    epoch: int  # of its kind's watch when the check that found it clean started


@dataclass
class _Release:
    token: tuple[Any, ...]  # the release record and spec generation the objects were found clean for
    objects: dict[LiveKey, Clean] = field(default_factory=dict)
    everything: bool = False  # every object of the release's manifest is among them


class DriftMemory:
    def __init__(self) -> None:
        # (cluster, kind, namespace or "" for every namespace): unbroken since
        self._epochs: dict[tuple[str, str, str], int] = {}
        self._counter = itertools.count(1)
        self._now: dict[LiveKey, int] = {}  # fingerprints the watches saw last (observed objects only)
        self._releases: dict[ObjectKey, _Release] = {}

    # --- the watches ---------------------------------------------------------------------------------

    def watching(self, cluster: str, kind: str, namespace: str) -> None:
        """A watch of ``kind`` on ``cluster`` (in ``namespace``, "" for all) started afresh: what was found before it
        is not trusted."""
        self._epochs[(cluster, kind, namespace)] = next(self._counter)

    def lost(self, cluster: str, kind: str, namespace: str) -> None:
        """That watch broke (or stopped): nothing of its kind is passed over until it lists again."""
        self._epochs.pop((cluster, kind, namespace), None)

    def seen(self, target: LiveKey, meta: Mapping[str, Any] | None) -> None:
        """A watch event of an observed object (``meta`` None: deleted)."""
        self._now[target] = fingerprint(meta) if meta is not None else 0

    def unobserved(self, targets: list[LiveKey]) -> None:
        """No release observes these any more: their changes go unseen from now on, so nothing found of them
        before is trusted either."""
        if not targets:
            return
        for target in targets:
            self._now.pop(target, None)
        gone = set(targets)
        for release in self._releases.values():
            if gone & release.objects.keys():
                release.objects = {t: c for t, c in release.objects.items() if t not in gone}
                release.everything = False

    # --- the drift checks ----------------------------------------------------------------------------

    def epoch(self, target: LiveKey) -> int | None:
        """The unbroken watch covering ``target`` now (None: none; it cannot be passed over later)."""
        cluster, namespace, kind, _ = target
        return self._epochs.get((cluster, kind, "")) or self._epochs.get((cluster, kind, namespace))

    def clean(self, key: ObjectKey, token: tuple[Any, ...], target: LiveKey) -> Clean | None:
        """How ``target`` was found clean for this record and generation, if no change was seen since by an
        unbroken watch (None: it must be compared)."""
        release = self._releases.get(key)
        clean = release.objects.get(target) if release is not None and release.token == token else None
        if clean is None or self.epoch(target) != clean.epoch or self._now.get(target, clean.fingerprint) != \
                clean.fingerprint:
            return None
        return clean

    def all_unchanged(self, key: ObjectKey, token: tuple[Any, ...]) -> int:
        """How many objects the release has, when every one was found clean for this record and generation and
        none changed since (the manifest need not even be read); else 0."""
        release = self._releases.get(key)
        if (release is None or release.token != token or not release.everything
                or any(self.clean(key, token, target) is None for target in release.objects)):
            return 0
        return len(release.objects)

    def found(self, key: ObjectKey, token: tuple[Any, ...], clean: dict[LiveKey, Clean], *, everything: bool) -> None:
        """What a check of ``key`` found clean (the objects it found drifted, or could not judge, are left out);
        ``everything``: all of the release's objects are among them."""
        self._releases[key] = _Release(token, clean, everything)

    def forget(self, key: ObjectKey) -> None:
        self._releases.pop(key, None)
