"""The kopf handlers: thin, they only route events to the reconcilers.

Each object of a helmop kind gets a daemon that reconciles it, then sleeps until its interval
passes or it is woken: by a change of its spec (generation) or ``helmop.dev/requestedAt``, or by a
change of something it reads (a ConfigMap/Secret of its values, its GitRepository, a push webhook;
ConfigMaps and Secrets are watched by ``referrers``, as metadata only).
One daemon per object means one reconcile at a time per object; the semaphore in the context
bounds helm actions across objects. Deletion goes through kopf's finalizer.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import time
import traceback
from typing import Any

import kopf

from helmop.api.durations import parse_duration
from helmop.api.kinds import (
    CONFIGSYNC,
    FINALIZER,
    FORCE_AT,
    GITREPOSITORY,
    HELMRELEASE,
    PROJECT,
    REQUESTED_AT,
    RESET_AT,
    SHARD_LABEL,
    Kind,
)
from helmop.api.objects import Resource
from helmop.api.redaction import redact
from helmop.api.settings import Tunables

from . import configsyncs, gitrepositories, projects
from .apps import App, AppController
from .context import Context, Key
from .helmreleases import Reconciler
from .outcome import DONE, FAILED, Finalize, Outcome, Reconcile
from .status import report

log = logging.getLogger(__name__)

ASKED = (REQUESTED_AT, RESET_AT, FORCE_AT)  # annotations that ask for a reconcile now


def _interval(body: kopf.Body, default: float) -> float:
    try:
        return parse_duration(str((body.get("spec") or {}).get("interval") or "")) or default
    except ValueError:
        return default


class _Failures:
    """Failures in a row per object, turned into the next delay by the settings' backoffs."""

    def __init__(self, tunables: Tunables) -> None:
        self.tunables = tunables
        self.counts: dict[Key, int] = {}

    def delay(self, key: Key, outcome: Outcome, done: float) -> float:
        """The delay after ``outcome``; ``done`` when there is nothing to come back for sooner."""
        if not outcome.failed:
            self.counts.pop(key, None)
            return done if outcome.retry_after is None else outcome.retry_after
        self.counts[key] = self.counts.get(key, 0) + 1
        return self.tunables.failure_backoff.after(self.counts[key])

    def unexpected(self, key: Key) -> float:
        self.counts[key] = self.counts.get(key, 0) + 1
        return self.tunables.error_backoff.after(self.counts[key])


def _kind_handlers(registry: kopf.OperatorRegistry, ctx: Context, resource: Kind, default_interval: float,
                   reconcile: Reconcile, finalize: Finalize, shard: str) -> None:
    seen: dict[Key, tuple[Any, ...]] = {}
    failures = _Failures(ctx.tunables)
    kind, group, version, plural = resource.kind, resource.group, resource.version, resource.plural
    # A replica with --shard handles only what carries that label; without, only what carries none.
    labels = {SHARD_LABEL: shard or kopf.ABSENT}

    def key_of(body: kopf.Body) -> Key:
        return (kind, body.metadata.namespace or "", body.metadata.name or "")

    @kopf.on.event(group, version, plural, registry=registry, id=f"{kind}-changed", labels=labels)
    async def changed(body: kopf.Body, type: str, **_: Any) -> None:
        key = key_of(body)
        if type == "DELETED":
            seen.pop(key, None)
            ctx.metrics.forget_resource(*key)
            return
        ctx.metrics.observe_resource(kind, body)
        annotations = body.metadata.annotations or {}
        token = (body.metadata.get("generation"), tuple(annotations.get(a) for a in ASKED),
                 FINALIZER in (body.metadata.get("finalizers") or []))
        previous = seen.get(key)
        if previous != token:
            seen[key] = token
            if previous is not None and previous[0] != token[0]:
                # a new generation of the spec (deleting one is one too): stop acting on the old one
                ctx.supersede(key, f"the {kind} is being deleted" if body.metadata.get("deletionTimestamp")
                              else f"generation {token[0]} of its spec arrived")
            else:
                ctx.waker(key).set()

    @kopf.daemon(group, version, plural, registry=registry, id=f"{kind}-loop", cancellation_timeout=None, labels=labels)
    async def loop(body: kopf.Body, stopped: kopf.DaemonStopped, **_: Any) -> None:
        key = key_of(body)
        wake = ctx.waker(key)
        while not stopped:
            if FINALIZER not in (body.metadata.get("finalizers") or []):
                # Never act before the finalizer is there: it is what guarantees the clean-up.
                await _sleep(wake, stopped, ctx.tunables.finalizer_wait)
                continue
            wake.clear()
            started = time.monotonic()
            work = asyncio.ensure_future(reconcile(dict(body)))
            await _first(work, stopped)
            if not work.done():  # the operator is stopping: stop the action (helm is told to stop)
                work.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await work
                return
            try:
                outcome = work.result()
                delay = failures.delay(key, outcome, _interval(body, default_interval))
            except Exception as exc:  # a bug or a case nobody foresaw: said on the object, retried with backoff
                await _unexpected(ctx, resource, dict(body), exc, "reconcile")
                outcome, delay = FAILED, failures.unexpected(key)
            ctx.metrics.reconcile.labels(kind, "retry" if outcome.failed else "done").observe(
                time.monotonic() - started)
            await _sleep(wake, stopped, delay)

    @kopf.on.delete(group, version, plural, registry=registry, id=f"{kind}-finalizer", labels=labels)
    async def deleted(body: kopf.Body, **_: Any) -> None:
        key = key_of(body)
        try:
            outcome = await finalize(dict(body))
        except Exception as exc:
            await _unexpected(ctx, resource, dict(body), exc, "clean-up")
            raise kopf.TemporaryError(f"{kind} clean-up failed; retrying", delay=failures.unexpected(key)) from None
        if outcome != DONE:
            raise kopf.TemporaryError(f"{kind} clean-up not done yet; retrying",
                                      delay=failures.delay(key, outcome, 0.0))
        failures.counts.pop(key, None)

    del changed, loop, deleted  # registered; kept only by kopf


def register(registry: kopf.OperatorRegistry, ctx: Context, releases: Reconciler, apps: list[App],
             shard: str = "", *, clusterwide: bool = True) -> None:
    """Every kind's handlers; cluster-scoped kinds (Project) only for an operator that watches the whole
    cluster."""
    # Methods and module functions looked up at each call (not bound once here).
    t = ctx.tunables
    _kind_handlers(registry, ctx, HELMRELEASE, t.release_interval, lambda body: releases.reconcile(body),
                   lambda body: releases.finalize(body), shard)
    _kind_handlers(registry, ctx, GITREPOSITORY, t.source_interval, lambda body: gitrepositories.reconcile(ctx, body),
                   lambda body: gitrepositories.finalize(ctx, body), shard)
    _kind_handlers(registry, ctx, CONFIGSYNC, t.source_interval, lambda body: configsyncs.reconcile(ctx, body),
                   lambda body: configsyncs.finalize(ctx, body), shard)
    if clusterwide:
        _kind_handlers(registry, ctx, PROJECT, t.release_interval, lambda body: projects.reconcile(ctx, body),
                       lambda body: projects.finalize(ctx, body), shard)
    for app in apps:
        _app_kind(registry, ctx, AppController(ctx, app), shard)


def _app_kind(registry: kopf.OperatorRegistry, ctx: Context, controller: AppController, shard: str) -> None:
    """An app kind's handlers, in the same form as the others (a function of its own: each app's lambdas
    close over their own controller)."""
    _kind_handlers(registry, ctx, controller.app.kind.resource, ctx.tunables.release_interval,
                   lambda body: controller.reconcile(body), lambda body: controller.finalize(body), shard)


async def _unexpected(ctx: Context, resource: Kind, body: dict[str, Any], exc: Exception, action: str) -> None:
    """Report an exception that escaped a reconcile or clean-up: Ready=False with reason ReconcileError and
    what was raised, a Warning Event, helmop_reconcile_errors_total, the traceback in the log. What was
    raised may quote anything: the secret strings the object's reconcile read are masked in all three."""
    this = Resource(body)
    key = (resource.kind, this.namespace, this.name)
    ctx.metrics.reconcile_errors.labels(resource.kind).inc()
    message = redact(f"the {action} raised {type(exc).__name__}: {exc}", ctx.secrets.get(key, []))[:1024]
    # the frames (code, not values) and the masked message; never the exception's own text
    log.error("%s %s/%s: %s\n%s", resource.kind, key[1], key[2], message,
              "".join(traceback.format_tb(exc.__traceback__)).rstrip())
    try:
        await report(ctx, resource, body, copy.deepcopy(body.get("status") or {}), False, "ReconcileError", message)
    except Exception as failed:  # the API itself is failing: the log has it, the retry comes all the same
        log.warning("could not report the error on %s %s/%s: %s", resource.kind, key[1], key[2], failed)


async def _sleep(wake: asyncio.Event, stopped: kopf.DaemonStopped, seconds: float) -> None:
    """Until woken, stopped, or ``seconds`` passed."""
    waking = asyncio.ensure_future(wake.wait())
    try:
        await _first(waking, stopped, seconds)
    finally:
        waking.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waking


async def _first(task: asyncio.Future[Any], stopped: kopf.DaemonStopped, timeout: float | None = None) -> None:
    """Until ``task`` is done, the daemon is stopped, or ``timeout`` passed."""
    stopping = asyncio.ensure_future(stopped.wait())
    try:
        await asyncio.wait([task, stopping], timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await stopping
