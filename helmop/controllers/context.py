"""What every reconcile of one operator process shares, in three parts: the :class:`Settings` (fixed at start;
the tenancy policy, also held by the services, whose readers judge references by it), the :class:`Services` (clients,
workers, caches: the I/O), and the
:class:`Memory` of what reconciles learned about each other (who reads what, who is superseded), which
lets a change to one object wake the reconcilers of the objects that depend on it."""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from helmop.api.addresses import Policy
from helmop.api.objects import ObjectKey
from helmop.api.settings import Limits, Settings
from helmop.api.tenancy import Tenancy
from helmop.helm.engine import Engine
from helmop.helm.releases import Gateway
from helmop.images.registry import Scanner
from helmop.infra.clusters import Options, Remotes
from helmop.infra.events import Recorder
from helmop.infra.kube import Kube
from helmop.infra.metrics import Metrics
from helmop.infra.watches import Collections
from helmop.infra.worker import Worker
from helmop.notifications.notifier import Notifier
from helmop.sources.git import GitCache
from helmop.sources.kustomize import Kustomize
from helmop.sources.repositories import Repositories

from .drift_memory import DriftMemory, LiveKey

# (kind, namespace, name) of one of helmop's objects; (namespace, kind, name) of what it reads.


@dataclass(frozen=True)
class Services:
    """The operator's I/O, made once per process."""

    kube: Kube
    engine: Engine
    repos: Repositories
    git: GitCache
    kustomize: Kustomize  # a config repository's overlays, built
    events: Recorder
    slots: asyncio.Semaphore  # helm processes at once
    metrics: Metrics
    cel: Worker  # spec.healthCheckExprs, off the event loop
    yaml: Worker  # large YAML, off the event loop
    releases: Gateway  # helm's storage, read and written through the API
    collections: Collections  # what releases' readiness is judged from, watched once
    notifier: Notifier  # Alerts and Providers: the Events posted, sent on
    keys_folder: Path | None = None  # --decryption-keys: SOPS keys for objects that name no Secret of their own
    tenancy: Tenancy = field(default_factory=Tenancy)  # what references may name, what identity acts
    images: Scanner = field(default_factory=Scanner)  # image repositories' tags, per image and credentials
    remotes: Remotes = field(default_factory=Remotes)  # remote clusters objects name in spec.kubeConfig
    # helm's storage on each remote (its parsed manifests cached), for as long as the remote's client lives
    gateways: weakref.WeakKeyDictionary[Kube, Gateway] = field(default_factory=weakref.WeakKeyDictionary)

    @classmethod
    def of(cls, kube: Kube, engine: Engine, repos: Repositories, git: GitCache, kustomize: Kustomize, *,
           settings: Settings, metrics: Metrics | None = None, remotes: Options | None = None) -> Services:
        events, metrics = Recorder(kube), metrics or Metrics()
        cel = Worker(timeout=settings.limits.cel_timeout)
        notifier = Notifier(events, metrics, cel, settings.notifications,
                            Policy.notifications(settings.notifications.allow_cidrs))
        events.listeners.append(notifier.observe)
        return cls(kube=kube, engine=engine, repos=repos, git=git, kustomize=kustomize, events=events,
                   slots=asyncio.Semaphore(settings.helm.concurrency), metrics=metrics, cel=cel,
                   yaml=Worker(timeout=settings.limits.yaml_timeout), releases=Gateway(kube),
                   collections=Collections(kube), notifier=notifier, keys_folder=settings.sources.decryption_keys,
                   remotes=Remotes(remotes, metrics), tenancy=settings.tenancy)

    async def unwatch(self) -> None:
        """Stop the shared watches, here and on remote clusters (the operator is stopping: no turn reads them)."""
        await self.collections.close()
        await self.remotes.unwatch()

    async def close(self) -> None:
        await self.notifier.close()
        await self.cel.close()
        await self.yaml.close()
        await self.collections.close()
        await self.remotes.close()


T = TypeVar("T", bound=Hashable)


@dataclass
class Links(Generic[T]):
    """Which of helmop's objects hold on to which targets (other objects they read, or live objects they
    deployed), indexed both ways: replacing one object's targets costs its own targets, not a scan of everyone's
    (it happens on every reconcile)."""

    holders: dict[T, set[ObjectKey]] = field(default_factory=dict)
    targets: dict[ObjectKey, list[T]] = field(default_factory=dict)

    def assign(self, holder: ObjectKey, targets: list[T]) -> list[T]:
        """Replace ``holder``'s targets; the targets nobody holds any more."""
        previous = self.targets.pop(holder, [])
        for target in previous:
            held = self.holders.get(target)
            if held is not None:
                held.discard(holder)
                if not held:
                    del self.holders[target]
        if targets:
            self.targets[holder] = targets
            for target in targets:
                self.holders.setdefault(target, set()).add(holder)
        return [target for target in previous if target not in self.holders]

    def of(self, target: T) -> set[ObjectKey]:
        return self.holders.get(target, set())


class Supersession(asyncio.Event):
    """Set when a newer revision of an object's spec or inputs arrives; ``why`` says which (what a
    cancelled action reports)."""

    why: str = ""


@dataclass(frozen=True)
class Written:
    """A status a turn wrote."""

    status: dict[str, Any]
    uid: str  # of the object written to
    resource_version: str  # the object's after the write ("" when unknown)
    at: float  # monotonic time of the write


class Memory:
    """What the reconciles of one process know of each other between turns. ``wake`` gives an object a
    turn now (the scheduler's)."""

    def __init__(self, wake: Callable[[ObjectKey], None], written_wins: float = Limits.written_wins) -> None:
        self.wake = wake
        self.written_wins = written_wins  # Settings.limits.written_wins
        # Secret strings each object's last reconcile read (values from Secrets, credentials): masked in what
        # is reported of an unexpected error, which may quote anything.
        self.secrets: dict[ObjectKey, list[str]] = {}
        # Set when a newer revision of an object's spec or inputs arrives: a running helm action for the old
        # one is stopped rather than left to wait out its timeout.
        self.supersessions: dict[ObjectKey, Supersession] = {}
        self.references: Links[ObjectKey] = Links()
        # What objects wait for (spec.dependsOn, of any kind): a change of one wakes them, never stops their action.
        self.waits: Links[ObjectKey] = Links()
        # Objects whose turn started a helm action, or a ConfigSync's apply not yet in its inventory: moving a
        # hash shard, a suspension or a deletion waits for those turns to end, and cancels the others (a turn
        # still waiting for a helm slot loses nothing).
        self.committed: set[ObjectKey] = set()
        # Objects a resource deployed and watches for drift, on the operator's cluster ("") or a remote's: a change
        # wakes it (a check), never supersedes (helm changing them during an action must not stop that action).
        self.observers: Links[LiveKey] = Links()
        # Which of those objects drift checks found as their release wants them, and which changed since.
        self.drift = DriftMemory()
        # (apiVersion, kind) of what is observed or waited for on the operator's cluster: the referrer watches follow
        # this set as it grows (a remote's are started by the turns that observe its objects).
        self.observed_kinds: set[tuple[str, str]] = set()
        self.new_kinds = asyncio.Event()
        # A status just written: the next turn must read it even if the watch has not brought it yet (a
        # ConfigSync's inventory is what it prunes from, a release's what its drift checks observe).
        self.written: dict[ObjectKey, Written] = {}
        # RetryOnFailure: when each failed release may be tried again (monotonic time; after a restart, at once)
        self.retry_at: dict[ObjectKey, float] = {}
        # Each namespace's default deployment windows (its ConfigMap helmop-windows, or None), as read at a monotonic
        # time: read again after NAMESPACE_DEFAULTS_TTL, not at every turn of every object without windows of its own.
        self.namespace_defaults: dict[str, tuple[float, dict[str, Any] | None]] = {}

    def superseded(self, key: ObjectKey) -> Supersession:
        return self.supersessions.setdefault(key, Supersession())

    def fresh(self, key: ObjectKey) -> None:
        """A reconcile of ``key`` starts from its newest spec and inputs: what superseded the last one is done."""
        self.supersessions.pop(key, None)

    def turn_ended(self, key: ObjectKey) -> None:
        """Forget what only a turn needed (so an idle object keeps nothing here), but not a supersession that
        arrived during it: the next turn must see it."""
        self.committed.discard(key)
        supersession = self.supersessions.get(key)
        if supersession is not None and not supersession.is_set():
            del self.supersessions[key]

    def supersede(self, key: ObjectKey, why: str) -> None:
        """A newer revision of ``key``'s spec or inputs (``why``: which): wake it, and stop what it runs for
        the old one."""
        supersession = self.superseded(key)
        supersession.why = why
        supersession.set()
        self.wake(key)

    def wake_referrers(self, target: ObjectKey) -> None:
        """An input of theirs changed (a values Secret, a source's revision): supersede what they run."""
        for key in list(self.references.of(target)):
            self.supersede(key, f"its input {target.kind} {target.namespace}/{target.name} changed")

    def notify_referrers(self, target: ObjectKey) -> None:
        """A status they read changed (an app its HelmRelease's, a Project its Jenkins's, a dependency's): a look, no
        more."""
        for key in list(self.references.of(target) | self.waits.of(target)):
            self.wake(key)

    def wake_waiting(self, target: ObjectKey) -> None:
        """``target`` changed: wake what waits for it."""
        for key in list(self.waits.of(target)):
            self.wake(key)

    def depend_on(self, waiting: ObjectKey, targets: list[ObjectKey], kinds: set[tuple[str, str]]) -> None:
        """``waiting`` waits for ``targets`` (of ``kinds``, (apiVersion, kind), watched for it): wake it when they
        change."""
        self.waits.assign(waiting, targets)
        self._watch_kinds(kinds)

    def refer(self, referrer: ObjectKey, targets: list[ObjectKey]) -> None:
        """``referrer`` reads ``targets``: wake it when they change."""
        self.references.assign(referrer, targets)

    def observe(self, observer: ObjectKey, objects: list[tuple[str, str, str, str]], cluster: str = "") -> None:
        """``observer`` watches ``objects`` (apiVersion, namespace, kind, name) of ``cluster`` ("": the operator's
        own, a remote's key): wake it when they change."""
        self.drift.unobserved(self.observers.assign(observer, [(cluster, namespace, kind, name)
                                                               for _, namespace, kind, name in objects]))
        if not cluster:
            self._watch_kinds({(api_version, kind) for api_version, _, kind, _ in objects})

    def _watch_kinds(self, kinds: set[tuple[str, str]]) -> None:
        if kinds - self.observed_kinds:
            self.observed_kinds |= kinds
            self.new_kinds.set()

    def wake_observers_of(self, cluster: str, kind: str, namespace: str = "") -> None:
        """Wake everything that watches objects of ``kind`` on ``cluster`` (in ``namespace``; "": in any)."""
        for target in list(self.observers.holders):
            if target[0] == cluster and target[2] == kind and (not namespace or target[1] == namespace):
                self.wake_observers(*target)

    def observed_by(self, cluster: str, namespace: str, kind: str, name: str) -> set[ObjectKey]:
        return self.observers.of((cluster, namespace, kind, name))

    def wake_observers(self, cluster: str, namespace: str, kind: str, name: str) -> None:
        for key in self.observed_by(cluster, namespace, kind, name):
            self.wake(key)

    def status_written(self, key: ObjectKey, status: dict[str, Any], uid: str = "", resource_version: str = "") -> None:
        """``status`` was written to ``key`` (the object ``uid``), which then had ``resource_version``."""
        self.written[key] = Written(status, uid, resource_version, time.monotonic())

    def watched(self, key: ObjectKey, body: dict[str, Any]) -> None:
        """``body`` came from the watch: if it shows the last write to ``key`` (the same status, or the
        resourceVersion the write returned), the watch has caught up with it and its bodies count as they are
        from now on; another object of that name (uid) ends it too. Events come in order, so one that shows
        neither is from before the write, however late it comes (a watch seconds behind: many replicas each
        follow every object's events)."""
        written = self.written.get(key)
        if written is None:
            return
        meta = body.get("metadata") or {}
        if (body.get("status") == written.status
                or (written.resource_version and meta.get("resourceVersion") == written.resource_version)
                or (written.uid and meta.get("uid") and meta.get("uid") != written.uid)):
            del self.written[key]

    def with_written(self, key: ObjectKey, body: dict[str, Any]) -> dict[str, Any]:
        """``body`` (as the watch last brought it) with the status last written to it, until the watch shows that
        write (:meth:`watched`): a turn that read the status from before it would act on what the object was (a
        release's drift checks observing an inventory of nothing, then comparing it all again at the next look).
        At most ``written_wins`` seconds (a write whose event never comes)."""
        written = self.written.get(key)
        if written is None:
            return body
        if time.monotonic() - written.at > self.written_wins:
            del self.written[key]
            return body
        return {**body, "status": written.status}

    def drop(self, key: ObjectKey) -> None:
        """An object is gone: forget everything kept for it."""
        self.references.assign(key, [])
        self.waits.assign(key, [])
        self.drift.unobserved(self.observers.assign(key, []))
        self.drift.forget(key)
        for table in (self.supersessions, self.secrets, self.written, self.retry_at):
            table.pop(key, None)


@dataclass(frozen=True)
class Context:
    settings: Settings
    services: Services
    memory: Memory

    @property
    def tenancy(self) -> Tenancy:
        """The tenancy policy (fixed at start), held by the services whose source readers judge references by it."""
        return self.services.tenancy
