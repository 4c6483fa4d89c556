"""The kopf handlers and the dispatcher every kind's turn goes through.

kopf watches helmop's kinds and hands each event to :class:`Dispatcher`, which keeps the object's latest
body and asks the :class:`Scheduler` for a turn: now for a change of its spec (generation), of
``helmop.dev/requestedAt`` (and the other requests) or of its finalizer, or when something it reads
changes (a ConfigMap/Secret of its values, its GitRepository, a push webhook: ``Memory.wake``); else at
its interval. A turn reconciles the object, or cleans up after it once it is being deleted and removes
helmop's finalizer (which a turn adds before anything else). Every kind's turn is built here (:func:`opened`,
:func:`closing`: the spec read, refused or suspended) and ended here (an input error reported, an API error said
as APIError, an exception nobody foresaw as ReconcileError, the memory of a deleted object released); the kind,
from the table in :mod:`.registration`, does only its own work. No per-object task or kopf state: kopf only
watches (its own finalizer setting names one nobody sets). One turn at a time per object; the semaphore
in the context bounds helm actions across objects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import traceback
from typing import Any

import kopf

from helmop.api import requests
from helmop.api.durations import parse_duration
from helmop.api.errors import HelmopError, SpecError
from helmop.api.flux import spec as flux_spec
from helmop.api.kinds import (
    ALERT,
    FLUX,
    FLUX_ALERT,
    FLUX_FORCE_AT,
    FLUX_PROVIDER,
    FLUX_REQUESTED_AT,
    FLUX_RESET_AT,
    FORCE_AT,
    HELMOP,
    PROVIDER,
    REQUESTED_AT,
    RESET_AT,
    SHARD_LABEL,
    Kind,
)
from helmop.api.objects import ObjectKey, Resource, packed, slim, unpacked
from helmop.api.redaction import redact
from helmop.api.settings import Backoffs, Settings
from helmop.api.shards import EVERYTHING, NOTHING, Range, hash_of
from helmop.api.tenancy import Tenancy
from helmop.infra.kube import KubeError, Unreachable

from . import changecontrol, fluxversions, notifications
from .apps import App
from .context import Context, Memory, Services
from .fluxgate import FluxGate
from .outcome import DONE, FAILED, Outcome
from .registration import Controller, controllers
from .scheduler import Scheduler
from .status import read_status, report
from .turn import Turn

log = logging.getLogger(__name__)

# annotations that ask for a turn now: a reconcile, and people's requests (a rollback, a pin, an approval...)
ASKED = (REQUESTED_AT, RESET_AT, FORCE_AT, *requests.ANNOTATIONS)
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
        self.counts: dict[ObjectKey, int] = {}

    def delay(self, key: ObjectKey, outcome: Outcome, done: float) -> float:
        """The delay after ``outcome``; ``done`` when there is nothing to come back for sooner."""
        if not outcome.failed:
            self.counts.pop(key, None)
            return done if outcome.retry_after is None else outcome.retry_after
        self.counts[key] = self.counts.get(key, 0) + 1
        return self.backoffs.failure.after(self.counts[key])

    def unexpected(self, key: ObjectKey) -> float:
        self.counts[key] = self.counts.get(key, 0) + 1
        return self.backoffs.error.after(self.counts[key])


class Dispatcher:
    """Every object of helmop's kinds this operator sees: its latest body, its turns, its failures."""

    def __init__(self, services: Services, settings: Settings) -> None:
        self.controllers: dict[str, Controller] = {}
        # Every object of helmop's kinds, as its watch last brought it: packed (compact JSON, a third of the
        # memory of its dicts); a turn reads a copy of its own.
        self.bodies: dict[ObjectKey, bytes] = {}
        self.uids: dict[ObjectKey, str] = {}  # which hash shard each object is in
        self.tokens: dict[ObjectKey, tuple[Any, ...]] = {}  # what, changed, asks for a turn now
        self.failures = _Failures(settings.backoffs)
        self.acting = EVERYTHING  # the hash range this replica acts on (--shards auto: what its membership grants)
        self.scheduler = Scheduler(self.turn, self.owns, settings.limits.max_turns, settings.limits.min_turns)
        services.metrics.turns_waiting.set_function(lambda: self.scheduler.waiting)
        services.metrics.turns_running.set_function(lambda: len(self.scheduler.running))
        services.metrics.turns_open.set_function(lambda: self.scheduler.open)
        self.ctx = Context(settings, services, Memory(self.scheduler.wake, settings.limits.written_wins))
        services.notifier.secrets_of = lambda key: self.ctx.memory.secrets.get(key, [])
        self.flux_gate: FluxGate | None = None  # with --flux-api: whether Flux's own controllers still run
        self.interrupted: dict[ObjectKey, str] = {}  # turns stopped because their object is being deleted or suspended
        self.halting: dict[ObjectKey, str] = {}  # why each object's last generation halts it ("" for none)

    def serve_flux(self) -> None:
        """Flux's controllers stopped: every Flux object gets its turn now."""
        for key in self.bodies:
            if self.controllers[key[0]].kind.flux:
                self.scheduler.wake(key)

    def owns(self, key: ObjectKey) -> bool:
        return self.acting is EVERYTHING or self._hash(key) in self.acting

    def _hash(self, key: ObjectKey) -> int:
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
        key = ObjectKey(controller.kind.key, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if event == "DELETED":
            self.halting.pop(key, None)
            self.bodies.pop(key, None)
            self.uids.pop(key, None)
            self.tokens.pop(key, None)
            self.ctx.memory.drop(key)  # whatever its clean-up did not (an object that had no finalizer)
            self.failures.counts.pop(key, None)
            self.scheduler.forget(key)
            self.ctx.services.metrics.forget_resource(*key)
            return
        # kept as the watch brought it: a turn adds the status it wrote last, until the watch shows that write
        self.ctx.memory.watched(key, body)
        self.bodies[key] = packed(body)
        self.uids[key] = str(meta.get("uid") or "")
        self.ctx.services.metrics.observe_resource(controller.kind.key, body)
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

    def _interrupt_on_halt(self, key: ObjectKey, body: dict[str, Any]) -> None:
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

    async def turn(self, key: ObjectKey) -> float | None:
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
                                                      f"{self.controllers[key[0]].kind.kind} {why}")
            return 0.0  # the next turn, at once, sees the deletion or the suspension
        finally:
            self.interrupted.pop(key, None)
            self.ctx.memory.turn_ended(key)

    async def _turn(self, key: ObjectKey) -> float | None:
        kept = self.bodies.get(key)
        if kept is None:
            return None
        body = self.ctx.memory.with_written(key, unpacked(kept))
        controller = self.controllers[key[0]]
        if controller.kind.flux and self.flux_gate is not None and self.flux_gate.holds(controller.kind.group):
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
            outcome = await self._reconcile(controller, body)
            delay = self.failures.delay(key, outcome, _interval(body, controller.interval))
        except Exception as exc:  # a bug or a case nobody foresaw: said on the object, retried with backoff
            await _unexpected(self.ctx, controller, dict(body), exc, "reconcile")
            outcome, delay = FAILED, self.failures.unexpected(key)
        self.ctx.services.metrics.reconcile.labels(key[0], "retry" if outcome.failed else "done").observe(
            time.monotonic() - started)
        return delay

    async def _reconcile(self, controller: Controller, body: dict[str, Any]) -> Outcome:
        """The prologue every kind shares (the spec read, or refused: Stalled; suspended: nothing done), the kind's
        turn, and what ends any turn alike: an error of its inputs reported, an API error said as APIError."""
        turn = await opened(self.ctx, controller, dict(body))
        if isinstance(turn, Outcome):
            return turn
        try:
            return await controller.reconcile(turn)
        except KubeError as exc:
            return await api_error(turn, exc)
        except HelmopError as exc:
            return await turn.failed(exc)

    async def _clean_up(self, controller: Controller, key: ObjectKey, body: dict[str, Any]) -> float | None:
        try:
            outcome = await self._finalize(controller, key, body)
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

    async def _finalize(self, controller: Controller, key: ObjectKey, body: dict[str, Any]) -> Outcome:
        """The kind's clean-up, with what the operator remembers of the object forgotten first (nothing it reads
        wakes a clean-up) and again once it is done; a remote cluster it held let go."""
        self.ctx.memory.drop(key)
        turn = await closing(self.ctx, controller, dict(body))
        outcome = DONE
        if turn is not None:
            try:
                outcome = await controller.finalize(turn)
            except KubeError as exc:
                outcome = await api_error(turn, exc)
        if outcome == DONE:
            self.ctx.memory.drop(key)
            if key in self.ctx.services.remotes.held:
                await self.ctx.services.remotes.release(key)
        return outcome

    async def _finalizers(self, controller: Controller, body: dict[str, Any],
                          finalizers: list[str]) -> dict[str, Any] | None:
        """Write the object's finalizers, if it has not changed since ``body`` (the list is replaced whole:
        the resourceVersion keeps another writer's entry from being lost); the object written, or None
        when it changed or is gone."""
        meta = body["metadata"]
        path = controller.kind.path(meta.get("namespace"), meta["name"])
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
    resource = controller.kind
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
    """Every kind's handlers (:func:`.registration.controllers`); Providers and Alerts, and ExternalArtifacts,
    which have no turns."""
    for controller in controllers(dispatcher.ctx, apps, clusterwide=clusterwide, flux=flux):
        _kind_handlers(registry, dispatcher, controller, shard)
    for kind in (PROVIDER, ALERT, *((FLUX_PROVIDER, FLUX_ALERT) if flux else ())):
        _notification_handlers(registry, dispatcher.ctx, kind)
    for family in (HELMOP, *((FLUX,) if flux else ())):
        _external_artifact_handlers(registry, dispatcher.ctx, family.externalartifact)


def _external_artifact_handlers(registry: kopf.OperatorRegistry, ctx: Context, kind: Kind) -> None:
    """ExternalArtifacts have no reconcile (their producer writes their status): a change of one is a look for
    what reads it, whoever made it."""

    @kopf.on.event(kind.group, kind.version, kind.plural, registry=registry, id=f"{kind.key}-seen")
    async def seen(body: kopf.Body, **_: Any) -> None:
        meta = body.get("metadata") or {}
        ctx.memory.notify_referrers(ObjectKey(kind.key, str(meta.get("namespace") or ""), str(meta.get("name") or "")))

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
    body = slim(fluxversions.noted(controller.kind, body))
    annotations = body["metadata"].get("annotations") or {}
    asked = {ours: annotations[theirs] for theirs, ours in FLUX_REQUESTS.items()
             if controller.kind.flux and theirs in annotations}
    if asked:
        body["metadata"]["annotations"] = {**annotations, **asked}
    return body


async def _read(ctx: Context, controller: Controller, body: dict[str, Any],
                tenancy: Tenancy | None, *, warn: bool) -> tuple[dict[str, Any], Any]:
    """The body (a Flux object's spec read as the served version's, a removed version's Warning posted with
    ``warn``) and its spec, as the kind reads it under ``tenancy`` (None: the model alone); SpecError when it is
    refused (for Flux's kinds, a field helmop does not implement too, never reconciled as if it were not there)."""
    kind = controller.kind
    if kind.flux:
        body = await fluxversions.read(ctx, kind, body, warn=warn)
        flux_spec.check(kind, body.get("spec") or {})
    return body, controller.read(body, tenancy)


async def opened(ctx: Context, controller: Controller, body: dict[str, Any]) -> Turn[Any, Any] | Outcome:
    """The turn of ``body``, or the outcome of one that stops before the kind acts: a spec refused (Stalled, with
    its reason), or suspended (nothing written)."""
    status = read_status(controller.kind, controller.status, body)
    try:
        body, spec = await _read(ctx, controller, body, ctx.tenancy, warn=True)
    except SpecError as exc:
        await report(ctx, controller.kind, body, status, False, exc.reason, str(exc), stalled=True)
        return DONE
    turn: Turn[Any, Any] = Turn(ctx, controller.kind, body, spec, status)
    turn.status = await changecontrol.recorded(ctx, controller.kind, body, status)
    return DONE if controller.suspended(turn) else turn


async def closing(ctx: Context, controller: Controller, body: dict[str, Any]) -> Turn[Any, Any] | None:
    """The clean-up turn of a deleted object, its spec read by its model alone (what an object made under other
    rules, an older tenancy policy say, still goes with it); None when there is nothing to clean up: the model
    cannot read its spec, so it never made anything (a kind whose clean-up needs no spec gets a turn whose spec
    is None)."""
    status = read_status(controller.kind, controller.status, body)
    try:
        body, spec = await _read(ctx, controller, body, None, warn=False)
    except SpecError as exc:
        if not controller.cleans_up_unread:
            this = Resource(body)
            log.info("%s %s/%s deleted: nothing cleaned up (%s)", controller.kind.kind, this.namespace, this.name,
                     exc)
            return None
        spec = None
    return Turn(ctx, controller.kind, body, spec, status)


async def api_error(turn: Turn[Any, Any], exc: KubeError) -> Outcome:
    """The API failed a turn: said in Ready (when it can be written) as APIError, or ClusterUnreachable when a
    remote cluster did not answer; tried again after the failure backoff."""
    turn.log.warning("API error: %s", exc)
    said = f"the API server answered {exc.status or 'nothing'}: {exc.message}"
    remote = isinstance(exc, Unreachable) and turn.ctx.services.remotes.unanswered(exc.server, exc.message)
    with contextlib.suppress(KubeError):
        await turn.report(False, "ClusterUnreachable" if remote else "APIError", turn.masked(said)[:1024])
    return FAILED


async def _unexpected(ctx: Context, controller: Controller, body: dict[str, Any], exc: Exception, action: str) -> None:
    """Report an exception that escaped a reconcile or clean-up: Ready=False with reason ReconcileError and
    what was raised, a Warning Event, helmop_reconcile_errors_total, the traceback in the log. What was
    raised may quote anything: the secret strings the object's reconcile read are masked in all three."""
    this, resource = Resource(body), controller.kind
    key = ObjectKey(resource.key, this.namespace, this.name)
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
