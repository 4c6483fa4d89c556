"""The kopf handlers: thin, they only route events to the reconcilers.

kopf watches helmop's kinds and hands each event to :class:`Dispatcher`, which keeps the object's latest
body and asks the :class:`Scheduler` for a turn: now for a change of its spec (generation), of
``helmop.dev/requestedAt`` (and the other requests) or of its finalizer, or when something it reads
changes (a ConfigMap/Secret of its values, its GitRepository, a push webhook: ``Memory.wake``); else at
its interval. A turn reconciles the object, or cleans up after it once it is being deleted and removes
helmop's finalizer (which a turn adds before anything else). No per-object task or kopf state: kopf only
watches (its own finalizer setting names one nobody sets). One turn at a time per object; the semaphore
in the context bounds helm actions across objects.
"""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from dataclasses import dataclass, replace
from typing import Any

import kopf

from helmop.api.durations import parse_duration
from helmop.api.errors import SpecError
from helmop.api.flux import spec as flux_spec
from helmop.api.images import FLUX_IMAGE_KINDS, HELMOP_IMAGES, ImageKinds
from helmop.api.kinds import (
    ALERT,
    FINALIZER,
    FLUX,
    FLUX_ALERT,
    FLUX_FINALIZER,
    FLUX_FORCE_AT,
    FLUX_PROVIDER,
    FLUX_RECEIVER,
    FLUX_REQUESTED_AT,
    FLUX_RESET_AT,
    FORCE_AT,
    HELMOP,
    PREVIEW,
    PROJECT,
    PROVIDER,
    RECEIVER,
    REQUESTED_AT,
    RESET_AT,
    SHARD_LABEL,
    Family,
    Kind,
)
from helmop.api.objects import Resource, packed, slim, unpacked
from helmop.api.redaction import redact
from helmop.api.settings import Backoffs, Settings
from helmop.api.shards import EVERYTHING, NOTHING, Range, hash_of
from helmop.api.status import Status
from helmop.api.status.app import AppStatus
from helmop.api.status.configsync import ConfigSyncStatus
from helmop.api.status.helmrelease import HelmReleaseStatus
from helmop.api.status.images import ImagePolicyStatus, ImageRepositoryStatus, ImageUpdateAutomationStatus
from helmop.api.status.preview import PreviewStatus
from helmop.api.status.project import ProjectStatus
from helmop.api.status.receiver import ReceiverStatus
from helmop.api.status.sources import (
    ArtifactGeneratorStatus,
    BucketStatus,
    GitRepositoryStatus,
    HelmChartStatus,
    HelmRepositoryStatus,
    OCIRepositoryStatus,
)
from helmop.infra.kube import KubeError

from . import (
    buckets,
    chartsources,
    configsyncs,
    fluxversions,
    generators,
    gitrepositories,
    helmcharts,
    imagepolicies,
    imagerepositories,
    imageupdates,
    notifications,
    previews,
    projects,
    receivers,
)
from .apps import App, AppController
from .context import Context, Key, Memory, Services
from .fluxgate import FluxGate
from .helmreleases import Reconciler
from .outcome import DONE, FAILED, Finalize, Outcome, Reconcile
from .scheduler import Scheduler
from .status import read_status, report

log = logging.getLogger(__name__)

ASKED = (REQUESTED_AT, RESET_AT, FORCE_AT)  # annotations that ask for a reconcile now
SOON = 1.0  # after a write of the finalizer lost a race: the winner's event is on its way


def _interval(body: dict[str, Any], default: float) -> float:
    try:
        return parse_duration(str((body.get("spec") or {}).get("interval") or "")) or default
    except ValueError:
        return default


class _Failures:
    """Failures in a row per object, turned into the next delay by the settings' backoffs."""

    def __init__(self, backoffs: Backoffs) -> None:
        self.backoffs = backoffs
        self.counts: dict[Key, int] = {}

    def delay(self, key: Key, outcome: Outcome, done: float) -> float:
        """The delay after ``outcome``; ``done`` when there is nothing to come back for sooner."""
        if not outcome.failed:
            self.counts.pop(key, None)
            return done if outcome.retry_after is None else outcome.retry_after
        self.counts[key] = self.counts.get(key, 0) + 1
        return self.backoffs.failure.after(self.counts[key])

    def unexpected(self, key: Key) -> float:
        self.counts[key] = self.counts.get(key, 0) + 1
        return self.backoffs.error.after(self.counts[key])


@dataclass(frozen=True)
class Controller:
    """What one kind does: its reconcile and clean-up, and how often it comes back when all is well."""

    resource: Kind
    status: type[Status]
    interval: float
    reconcile: Reconcile
    finalize: Finalize

    @property
    def finalizer(self) -> str:
        """Flux's kinds keep Flux's finalizer: a cluster moving over (or back) keeps one clean-up guarantee."""
        return FLUX_FINALIZER if self.resource.flux else FINALIZER


class Dispatcher:
    """Every object of helmop's kinds this operator sees: its latest body, its turns, its failures."""

    def __init__(self, services: Services, settings: Settings) -> None:
        self.controllers: dict[str, Controller] = {}
        # Every object of helmop's kinds, as its watch last brought it: packed (compact JSON, a third of the
        # memory of its dicts); a turn reads a copy of its own.
        self.bodies: dict[Key, bytes] = {}
        self.uids: dict[Key, str] = {}  # which hash shard each object is in
        self.tokens: dict[Key, tuple[Any, ...]] = {}  # what, changed, asks for a turn now
        self.failures = _Failures(settings.backoffs)
        self.acting = EVERYTHING  # the hash range this replica acts on (--shards auto: what its membership grants)
        self.scheduler = Scheduler(self.turn, self.owns, settings.limits.max_turns)
        services.metrics.turns_waiting.set_function(lambda: self.scheduler.waiting)
        services.metrics.turns_running.set_function(lambda: len(self.scheduler.running))
        self.ctx = Context(settings, services, Memory(self.scheduler.wake, settings.limits.written_wins))
        services.notifier.secrets_of = lambda key: self.ctx.memory.secrets.get(key, [])
        self.flux_gate: FluxGate | None = None  # with --flux-api: whether Flux's own controllers still run
        self.interrupted: dict[Key, str] = {}  # turns stopped because their object is being deleted or suspended
        self.halting: dict[Key, str] = {}  # why each object's last generation halts it ("" for none)

    def serve_flux(self) -> None:
        """Flux's controllers stopped: every Flux object gets its turn now."""
        for key in self.bodies:
            if self.controllers[key[0]].resource.flux:
                self.scheduler.wake(key)

    def owns(self, key: Key) -> bool:
        return self.acting is EVERYTHING or self._hash(key) in self.acting

    def _hash(self, key: Key) -> int:
        uid = self.uids.get(key)
        return hash_of(uid) if uid is not None else -1

    def hold(self, acting: Range) -> bool:
        """Act on ``acting`` from now on (objects newly in it get a turn at once); True once no turn outside
        it is still running (the membership then says it holds no more than that)."""
        before, self.acting = self.acting, acting
        for key in self.bodies:
            h = self._hash(key)
            if h in acting and h not in before:
                self.scheduler.wake(key)
        outside = [key for key in self.scheduler.running if not self.owns(key)]
        for key in outside:
            if key not in self.ctx.memory.committed:  # not in helm or an apply yet: stopping it loses nothing
                self.scheduler.running[key].cancel()
        return not outside

    def drop(self) -> None:
        """Act on nothing, and stop the turns running now (this replica may already count as gone)."""
        self.acting = NOTHING
        self.scheduler.cancel()

    def seen(self, controller: Controller, body: dict[str, Any], event: str) -> None:
        """An event of kopf's watch: keep the body, and ask for a turn when something that matters changed."""
        body = _as_read(controller, body)
        meta = body["metadata"]
        key = (controller.resource.key, meta.get("namespace") or "", meta.get("name") or "")
        if event == "DELETED":
            self.halting.pop(key, None)
            self.bodies.pop(key, None)
            self.uids.pop(key, None)
            self.tokens.pop(key, None)
            self.ctx.memory.written.pop(key, None)
            self.scheduler.forget(key)
            self.ctx.services.metrics.forget_resource(*key)
            return
        # kept as the watch brought it: a turn adds the status it wrote last, until the watch shows that write
        self.ctx.memory.watched(key, body)
        self.bodies[key] = packed(body)
        self.uids[key] = str(meta.get("uid") or "")
        self.ctx.services.metrics.observe_resource(controller.resource.key, body)
        token = self._token(meta, controller.finalizer)
        previous = self.tokens.get(key)
        if previous == token:
            return
        self.tokens[key] = token
        if previous is not None and previous[0] != token[0]:
            # a new generation of the spec (deleting one is one too): stop acting on the old one
            self.ctx.memory.supersede(key, f"the {key[0]} is being deleted" if meta.get("deletionTimestamp")
                                      else f"generation {token[0]} of its spec arrived")
            self._interrupt_on_halt(key, body)
        else:
            self.scheduler.wake(key)

    @staticmethod
    def _token(meta: dict[str, Any], finalizer: str) -> tuple[Any, ...]:
        annotations = meta.get("annotations") or {}
        return (meta.get("generation"), tuple(annotations.get(a) for a in ASKED),
                finalizer in (meta.get("finalizers") or []))

    def _interrupt_on_halt(self, key: Key, body: dict[str, Any]) -> None:
        """Stop the turn running for an object that has just come to be deleted or suspended: a listing, a fetch,
        a build that may take minutes (or, from a hostile server, forever) is for nothing now, and holds its
        clean-up back. Only on that change (a later generation of an object already halting must not cut its own
        clean-up short, over and over), once per turn, and not a turn in a helm action (its supersession tells
        helm to stop)."""
        why = "is being deleted" if body["metadata"].get("deletionTimestamp") else \
            "is suspended" if (body.get("spec") or {}).get("suspend") is True else ""
        before = self.halting.get(key, "")
        self.halting[key] = why
        task = self.scheduler.running.get(key)
        if why and why != before and task is not None and key not in self.ctx.memory.committed \
                and key not in self.interrupted:
            self.interrupted[key] = why
            task.cancel()

    async def turn(self, key: Key) -> float | None:
        """Reconcile the object, or clean up after it; the delay to its next turn (None: it has none)."""
        try:
            return await self._turn(key)
        except asyncio.CancelledError:
            # (kept in `interrupted` until the turn ends: a second halt meanwhile cancels nothing more)
            why, task = self.interrupted.get(key), asyncio.current_task()
            if why is None or task is None or task.uncancel() > 0:
                raise  # the operator stopping, a shard moving
            kept = self.bodies.get(key)
            if kept is not None:
                await self.ctx.services.events.normal(unpacked(kept), "ReconcileInterrupted",
                                                      f"the reconcile under way was stopped: the "
                                                      f"{self.controllers[key[0]].resource.kind} {why}")
            return 0.0  # the next turn, at once, sees the deletion or the suspension
        finally:
            self.interrupted.pop(key, None)
            self.ctx.memory.turn_ended(key)

    async def _turn(self, key: Key) -> float | None:
        kept = self.bodies.get(key)
        if kept is None:
            return None
        body = self.ctx.memory.with_written(key, unpacked(kept))
        controller = self.controllers[key[0]]
        if controller.resource.flux and self.flux_gate is not None and self.flux_gate.holds(controller.resource.group):
            self.ctx.services.metrics.flux_held.labels(key[0]).inc()
            return self.ctx.settings.flux.check  # Flux's own controllers act on it: untouched (woken when they stop)
        meta, finalizer = body["metadata"], controller.finalizer
        if meta.get("deletionTimestamp"):
            return await self._clean_up(controller, key, body) if finalizer in (meta.get("finalizers") or []) else None
        if finalizer not in (meta.get("finalizers") or []):
            # Never act before the finalizer is there: it is what guarantees the clean-up.
            held = await self._finalizers(controller, body, [*(meta.get("finalizers") or []), finalizer])
            if held is None:
                return SOON
            body = _as_read(controller, held)
            self.bodies[key] = packed(body)
            # its own write's event is no news: the turn goes on with the body written
            self.tokens[key] = self._token(held["metadata"], finalizer)
        started = time.monotonic()
        try:
            outcome = await controller.reconcile(dict(body))
            delay = self.failures.delay(key, outcome, _interval(body, controller.interval))
        except Exception as exc:  # a bug or a case nobody foresaw: said on the object, retried with backoff
            await _unexpected(self.ctx, controller, dict(body), exc, "reconcile")
            outcome, delay = FAILED, self.failures.unexpected(key)
        self.ctx.services.metrics.reconcile.labels(key[0], "retry" if outcome.failed else "done").observe(
            time.monotonic() - started)
        return delay

    async def _clean_up(self, controller: Controller, key: Key, body: dict[str, Any]) -> float | None:
        try:
            outcome = await controller.finalize(dict(body))
        except Exception as exc:
            await _unexpected(self.ctx, controller, dict(body), exc, "clean-up")
            return self.failures.unexpected(key)
        if outcome != DONE:
            return max(self.failures.delay(key, outcome, 0.0), 0.2)
        finalizers = [f for f in body["metadata"].get("finalizers") or [] if f != controller.finalizer]
        if await self._finalizers(controller, body, finalizers) is None:
            return SOON  # lost a race with another writer of the list: its event brings the new one
        self.failures.counts.pop(key, None)
        return None

    async def _finalizers(self, controller: Controller, body: dict[str, Any],
                          finalizers: list[str]) -> dict[str, Any] | None:
        """Write the object's finalizers, if it has not changed since ``body`` (the list is replaced whole:
        the resourceVersion keeps another writer's entry from being lost); the object written, or None
        when it changed or is gone."""
        meta = body["metadata"]
        path = controller.resource.path(meta.get("namespace"), meta["name"])
        try:
            return await self.ctx.services.kube.merge_patch(path, {"metadata": {
                "finalizers": finalizers, "resourceVersion": meta.get("resourceVersion")}})
        except KubeError as exc:
            if exc.status in (404, 409):
                return None
            raise

    async def stop(self) -> None:
        await self.scheduler.stop()


def _kind_handlers(registry: kopf.OperatorRegistry, dispatcher: Dispatcher, controller: Controller,
                   shard: str) -> None:
    resource = controller.resource
    dispatcher.controllers[resource.key] = controller

    # A replica with --shard handles only what carries that label; without, only what carries none. Every
    # event is looked at (no kopf label filter): an object relabelled into another shard must be let go
    # here, as gone, or this replica would go on acting on the body it kept.
    @kopf.on.event(resource.group, resource.version, resource.plural, registry=registry, id=f"{resource.key}-seen")
    async def seen(body: kopf.Body, type: str, **_: Any) -> None:
        ours = (body.metadata.labels or {}).get(SHARD_LABEL, "") == shard
        dispatcher.seen(controller, dict(body), type if ours else "DELETED")

    del seen  # registered; kept only by kopf


def register(registry: kopf.OperatorRegistry, dispatcher: Dispatcher, apps: list[App], shard: str = "", *,
             clusterwide: bool = True, flux: bool = False) -> None:
    """Every kind's handlers; cluster-scoped kinds (Project) only for an operator that watches the whole
    cluster; Flux's kinds with ``flux`` (--flux-api)."""
    ctx = dispatcher.ctx
    controllers = [
        *_family(ctx, HELMOP),
        *(_family(ctx, FLUX) if flux else []),
        *_images(ctx, HELMOP_IMAGES), *(_images(ctx, FLUX_IMAGE_KINDS) if flux else []),
        *([Controller(PROJECT, ProjectStatus, ctx.settings.intervals.release,
                      lambda body: projects.reconcile(ctx, body), lambda body: projects.finalize(ctx, body))]
          if clusterwide else []),
        *(_app_controller(ctx, AppController(ctx, app)) for app in apps),
        _receiver(ctx, RECEIVER),
        *([_flux_checked(ctx, _receiver(ctx, FLUX_RECEIVER))] if flux else []),
        Controller(PREVIEW, PreviewStatus, ctx.settings.intervals.preview, lambda body: previews.reconcile(ctx, body),
                   lambda body: previews.finalize(ctx, body)),
    ]
    for controller in controllers:
        _kind_handlers(registry, dispatcher, controller, shard)
    for kind in (PROVIDER, ALERT, *((FLUX_PROVIDER, FLUX_ALERT) if flux else ())):
        _notification_handlers(registry, ctx, kind)
    for family in (HELMOP, *((FLUX,) if flux else ())):
        _external_artifact_handlers(registry, ctx, family.externalartifact)


def _external_artifact_handlers(registry: kopf.OperatorRegistry, ctx: Context, kind: Kind) -> None:
    """ExternalArtifacts have no reconcile (their producer writes their status): a change of one is a look for
    what reads it, whoever made it."""

    @kopf.on.event(kind.group, kind.version, kind.plural, registry=registry, id=f"{kind.key}-seen")
    async def seen(body: kopf.Body, **_: Any) -> None:
        meta = body.get("metadata") or {}
        ctx.memory.notify_referrers(str(meta.get("namespace") or ""), kind.key, str(meta.get("name") or ""))

    del seen  # registered; kept only by kopf


def _notification_handlers(registry: kopf.OperatorRegistry, ctx: Context, kind: Kind) -> None:
    """Providers and Alerts are known to every replica, whatever its shard (each sends its own objects' events);
    they have no turns and no finalizer: nothing to clean up."""

    @kopf.on.event(kind.group, kind.version, kind.plural, registry=registry, id=f"{kind.key}-seen")
    async def seen(body: kopf.Body, type: str, **_: Any) -> None:
        await notifications.seen(ctx, kind, slim(fluxversions.noted(kind, dict(body))), type)

    del seen  # registered; kept only by kopf


FLUX_REQUESTS = {FLUX_REQUESTED_AT: REQUESTED_AT, FLUX_RESET_AT: RESET_AT, FLUX_FORCE_AT: FORCE_AT}


def _as_read(controller: Controller, body: dict[str, Any]) -> dict[str, Any]:
    """An object as kept and reconciled (:func:`slim`); a Flux object with the requests `flux reconcile` makes
    (``reconcile.fluxcd.io/requestedAt``, ``resetAt``, ``forceAt``) under helmop's names, and the removed
    versions it was written in (:func:`fluxversions.noted`). In memory only: nothing writes an object's
    annotations back."""
    body = slim(fluxversions.noted(controller.resource, body))
    annotations = body["metadata"].get("annotations") or {}
    asked = {ours: annotations[theirs] for theirs, ours in FLUX_REQUESTS.items()
             if controller.resource.flux and theirs in annotations}
    if asked:
        body["metadata"]["annotations"] = {**annotations, **asked}
    return body


def _family(ctx: Context, family: Family) -> list[Controller]:
    """The controllers of one family of kinds: the same code for helmop's and Flux's. Methods and module
    functions are looked up at each call (not bound once here)."""
    releases = Reconciler(ctx, family)
    t = ctx.settings.intervals
    git, helm, oci, sync = family.gitrepository, family.helmrepository, family.ocirepository, family.configsync
    bucket = family.bucket
    controllers = [
        Controller(family.helmrelease, HelmReleaseStatus, t.release, lambda body: releases.reconcile(body),
                   lambda body: releases.finalize(body)),
        Controller(git, GitRepositoryStatus, t.source, lambda body: gitrepositories.reconcile(ctx, git, body),
                   lambda body: gitrepositories.finalize(ctx, git, body)),
        Controller(helm, HelmRepositoryStatus, t.source,
                   lambda body: chartsources.reconcile_helm_repository(ctx, helm, body),
                   lambda body: chartsources.finalize(ctx, helm, body)),
        Controller(oci, OCIRepositoryStatus, t.source,
                   lambda body: chartsources.reconcile_oci_repository(ctx, oci, body),
                   lambda body: chartsources.finalize(ctx, oci, body)),
        Controller(sync, ConfigSyncStatus, t.source, lambda body: configsyncs.reconcile(ctx, family, body),
                   lambda body: configsyncs.finalize(ctx, family, body)),
        Controller(bucket, BucketStatus, t.source, lambda body: buckets.reconcile(ctx, bucket, body),
                   lambda body: buckets.finalize(ctx, bucket, body)),
        Controller(family.helmchart, HelmChartStatus, t.source,
                   lambda body: helmcharts.reconcile(ctx, family, body),
                   lambda body: helmcharts.finalize(ctx, family, body)),
        # Flux's source-watcher has no interval: an hour, and at once when a source publishes
        Controller(family.artifactgenerator, ArtifactGeneratorStatus, t.artifact_generator,
                   lambda body: generators.reconcile(ctx, family, body),
                   lambda body: generators.finalize(ctx, family, body)),
    ]
    return [_flux_checked(ctx, c) for c in controllers] if family.flux else controllers


def _images(ctx: Context, kinds: ImageKinds) -> list[Controller]:
    """Image automation's controllers, helmop's or Flux's (policies are woken by their repository's scans, and
    come back every ten minutes without an interval of their own)."""
    repository, automation = kinds.repository, kinds.automation
    controllers = [
        Controller(repository, ImageRepositoryStatus, ctx.settings.intervals.source,
                   lambda body: imagerepositories.reconcile(ctx, repository, body),
                   lambda body: imagerepositories.finalize(ctx, repository, body)),
        Controller(kinds.policy, ImagePolicyStatus, ctx.settings.intervals.image_policy,
                   lambda body: imagepolicies.reconcile(ctx, kinds, body),
                   lambda body: imagerepositories.finalize(ctx, kinds.policy, body)),
        Controller(automation, ImageUpdateAutomationStatus, ctx.settings.intervals.source,
                   lambda body: imageupdates.reconcile(ctx, kinds, body),
                   lambda body: imagerepositories.finalize(ctx, automation, body)),
    ]
    return [_flux_checked(ctx, c) for c in controllers] if repository.flux else controllers


def _flux_checked(ctx: Context, controller: Controller) -> Controller:
    """A Flux kind's controller: a spec with a field helmop does not implement is refused (Stalled, with the
    field's name), never reconciled as if the field were not there; deleted, it cleans nothing up (what it names
    may be elsewhere: ``spec.kubeConfig``'s cluster)."""
    async def reconcile(body: dict[str, Any]) -> Outcome:
        try:
            body = await fluxversions.read(ctx, controller.resource, body)
            flux_spec.check(controller.resource, body.get("spec") or {})
        except SpecError as exc:
            status = read_status(controller.resource, controller.status, body)
            await report(ctx, controller.resource, body, status, False, exc.reason, str(exc), stalled=True)
            return DONE
        return await controller.reconcile(body)

    async def finalize(body: dict[str, Any]) -> Outcome:
        try:
            body = await fluxversions.read(ctx, controller.resource, body, warn=False)
            flux_spec.check(controller.resource, body.get("spec") or {})
        except SpecError as exc:
            this = Resource(body)
            log.info("%s %s/%s deleted: nothing cleaned up (%s)", controller.resource.kind, this.namespace, this.name,
                     exc)
            return DONE
        return await controller.finalize(body)

    return replace(controller, reconcile=reconcile, finalize=finalize)


def _receiver(ctx: Context, kind: Kind) -> Controller:
    """A Receiver's controller: its status (the webhook path); every replica's webhook server serves its requests."""
    return Controller(kind, ReceiverStatus, ctx.settings.intervals.receiver,
                      lambda body: receivers.reconcile(ctx, kind, body),
                      lambda body: receivers.finalize(ctx, kind, body))


def _app_controller(ctx: Context, app: AppController) -> Controller:
    """An app kind's controller (a function of its own: each app's lambdas close over their own controller)."""
    return Controller(app.app.kind.resource, AppStatus, ctx.settings.intervals.release,
                      lambda body: app.reconcile(body), lambda body: app.finalize(body))


async def _unexpected(ctx: Context, controller: Controller, body: dict[str, Any], exc: Exception, action: str) -> None:
    """Report an exception that escaped a reconcile or clean-up: Ready=False with reason ReconcileError and
    what was raised, a Warning Event, helmop_reconcile_errors_total, the traceback in the log. What was
    raised may quote anything: the secret strings the object's reconcile read are masked in all three."""
    this, resource = Resource(body), controller.resource
    key = (resource.key, this.namespace, this.name)
    ctx.services.metrics.reconcile_errors.labels(resource.key).inc()
    message = redact(f"the {action} raised {type(exc).__name__}: {exc}", ctx.memory.secrets.get(key, []))[:1024]
    # the frames (code, not values) and the masked message; never the exception's own text
    log.error("%s %s/%s: %s\n%s", resource.kind, key[1], key[2], message,
              "".join(traceback.format_tb(exc.__traceback__)).rstrip())
    try:
        await report(ctx, resource, body, read_status(resource, controller.status, body), False, "ReconcileError",
                     message)
    except Exception as failed:  # the API itself is failing: the log has it, the retry comes all the same
        log.warning("could not report the error on %s %s/%s: %s", resource.kind, key[1], key[2], failed)
