"""What every reconcile of one operator process shares: clients, caches, limits, and the wiring
that lets a change to one object wake the reconcilers of the objects that depend on it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from helmop.api.settings import Tunables
from helmop.api.tenancy import Tenancy
from helmop.helm.engine import Engine
from helmop.helm.releases import Gateway
from helmop.infra.events import Recorder
from helmop.infra.kube import Kube
from helmop.infra.metrics import Metrics
from helmop.infra.watches import Collections
from helmop.infra.worker import Worker
from helmop.sources.git import GitCache
from helmop.sources.repositories import Repositories

# (kind, namespace, name) of one of helmop's objects; (namespace, kind, name) of what it reads.
Key = tuple[str, str, str]
Target = tuple[str, str, str]


@dataclass
class Links:
    """Which of helmop's objects hold on to which targets, indexed both ways: replacing one object's
    targets costs its own targets, not a scan of everyone's (it happens on every reconcile)."""

    holders: dict[Target, set[Key]] = field(default_factory=dict)
    targets: dict[Key, list[Target]] = field(default_factory=dict)

    def assign(self, holder: Key, targets: list[Target]) -> None:
        for target in self.targets.pop(holder, []):
            held = self.holders.get(target)
            if held is not None:
                held.discard(holder)
                if not held:
                    del self.holders[target]
        if targets:
            self.targets[holder] = targets
            for target in targets:
                self.holders.setdefault(target, set()).add(holder)

    def of(self, target: Target) -> set[Key]:
        return self.holders.get(target, set())


class Supersession(asyncio.Event):
    """Set when a newer revision of an object's spec or inputs arrives; ``why`` says which (what a
    cancelled action reports)."""

    why: str = ""


@dataclass
class Context:
    kube: Kube
    engine: Engine
    repos: Repositories
    git: GitCache
    events: Recorder
    slots: asyncio.Semaphore  # helm processes at once
    tenancy: Tenancy = field(default_factory=Tenancy)
    tunables: Tunables = field(default_factory=Tunables)
    metrics: Metrics = field(default_factory=Metrics)
    cel: Worker = field(init=False)  # spec.healthCheckExprs, off the event loop
    yaml: Worker = field(init=False)  # large YAML, off the event loop
    releases: Gateway = field(init=False)  # helm's storage, read and written through the API
    collections: Collections = field(init=False)  # what releases' readiness is judged from, watched once
    # Secret strings each object's last reconcile read (values from Secrets, credentials): masked in what is
    # reported of an unexpected error, which may quote anything.
    secrets: dict[Key, list[str]] = field(default_factory=dict)
    # Set when a newer revision of an object's spec or inputs arrives: a running helm action for the
    # old one is stopped rather than left to wait out its timeout.
    supersessions: dict[Key, Supersession] = field(default_factory=dict)
    references: Links = field(default_factory=Links)
    # Objects whose turn started a helm action: moving a hash shard waits for those turns to end, and
    # cancels the others (a turn still waiting for a helm slot loses nothing).
    committed: set[Key] = field(default_factory=set)
    # Objects a resource deployed and watches for drift: a change wakes it (a check), never supersedes
    # (helm changing them during an action must not stop that action).
    observers: Links = field(default_factory=Links)
    watch_kind: Callable[[str, str], None] = lambda api_version, kind: None  # set by the operator
    wake: Callable[[Key], None] = lambda key: None  # a turn for an object now; set by the handlers' scheduler
    # A status just written: the next turn must read it even if the watch has not brought it yet (a ConfigSync's
    # inventory is what it prunes from). Set by the handlers.
    status_written: Callable[[Key, dict[str, Any]], None] = lambda key, status: None

    def __post_init__(self) -> None:
        self.cel = Worker(timeout=self.tunables.cel_timeout)
        self.yaml = Worker(timeout=self.tunables.yaml_timeout)
        self.releases = Gateway(self.kube)
        self.collections = Collections(self.kube)

    def superseded(self, key: Key) -> Supersession:
        return self.supersessions.setdefault(key, Supersession())

    def fresh(self, key: Key) -> None:
        """A reconcile of ``key`` starts from its newest spec and inputs: what superseded the last one is done."""
        self.supersessions.pop(key, None)

    def turn_ended(self, key: Key) -> None:
        """Forget what only a turn needed (so an idle object keeps nothing here), but not a supersession that
        arrived during it: the next turn must see it."""
        self.committed.discard(key)
        supersession = self.supersessions.get(key)
        if supersession is not None and not supersession.is_set():
            del self.supersessions[key]

    def supersede(self, key: Key, why: str) -> None:
        """A newer revision of ``key``'s spec or inputs (``why``: which): wake it, and stop what it runs for
        the old one."""
        supersession = self.superseded(key)
        supersession.why = why
        supersession.set()
        self.wake(key)

    def wake_referrers(self, namespace: str, kind: str, name: str) -> None:
        """An input of theirs changed (a values Secret, a source's revision): supersede what they run."""
        for key in list(self.references.of((namespace, kind, name))):
            self.supersede(key, f"its input {kind} {namespace}/{name} changed")

    def notify_referrers(self, namespace: str, kind: str, name: str) -> None:
        """A status they read changed (an app its HelmRelease's, a Project its Jenkins's): a look, no more."""
        for key in list(self.references.of((namespace, kind, name))):
            self.wake(key)

    def refer(self, referrer: Key, targets: list[Target]) -> None:
        """``referrer`` reads ``targets`` (namespace, kind, name): wake it when they change."""
        self.references.assign(referrer, targets)

    def observe(self, observer: Key, objects: list[tuple[str, str, str, str]]) -> None:
        """``observer`` watches ``objects`` (apiVersion, namespace, kind, name): wake it when they change."""
        self.observers.assign(observer, [(namespace, kind, name) for _, namespace, kind, name in objects])
        for api_version, _, kind, _ in objects:
            self.watch_kind(api_version, kind)

    def wake_observers_of(self, kind: str) -> None:
        """Wake everything that watches objects of ``kind``."""
        for namespace, target_kind, name in list(self.observers.holders):
            if target_kind == kind:
                self.wake_observers(namespace, kind, name)

    def observed_by(self, namespace: str, kind: str, name: str) -> set[Key]:
        return self.observers.of((namespace, kind, name))

    def wake_observers(self, namespace: str, kind: str, name: str) -> None:
        for key in self.observed_by(namespace, kind, name):
            self.wake(key)

    def drop(self, key: Key) -> None:
        """An object is gone: forget everything kept for it."""
        self.references.assign(key, [])
        self.observers.assign(key, [])
        for table in (self.supersessions, self.secrets):
            table.pop(key, None)
