"""The kopf handlers: thin, they only route events to the reconciler.

Each HelmRelease gets a daemon that reconciles it, then sleeps until its interval passes or it is
woken: by a change of its spec (generation) or ``helmop.dev/requestedAt``, or by a change of a
ConfigMap/Secret its values read. One daemon per object means one reconcile at a time per object;
the shared semaphore in the context bounds helm actions across objects.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import kopf

from helmop.api.durations import parse_duration
from helmop.api.helmrelease import DEFAULT_INTERVAL, GROUP, PLURAL, VERSION

from .helmreleases import REQUESTED_AT, Context, Reconciler

FINALIZER = "helmop.dev/finalizer"


def _interval(body: kopf.Body) -> float:
    try:
        return parse_duration(str((body.get("spec") or {}).get("interval") or "")) or DEFAULT_INTERVAL
    except ValueError:
        return DEFAULT_INTERVAL


def register(registry: kopf.OperatorRegistry, ctx: Context, reconciler: Reconciler) -> None:
    wakers: dict[tuple[str, str], asyncio.Event] = {}
    seen: dict[tuple[str, str], tuple[Any, ...]] = {}

    def waker(key: tuple[str, str]) -> asyncio.Event:
        return wakers.setdefault(key, asyncio.Event())

    @kopf.on.event(GROUP, VERSION, PLURAL, registry=registry)
    async def helmrelease_changed(body: kopf.Body, type: str, **_: Any) -> None:
        key = (body.metadata.namespace or "", body.metadata.name or "")
        if type == "DELETED":
            wakers.pop(key, None)
            seen.pop(key, None)
            return
        token = (body.metadata.get("generation"), (body.metadata.annotations or {}).get(REQUESTED_AT),
                 FINALIZER in (body.metadata.get("finalizers") or []))
        if seen.get(key) != token:
            seen[key] = token
            waker(key).set()

    @kopf.daemon(GROUP, VERSION, PLURAL, registry=registry, cancellation_timeout=None)
    async def helmrelease_loop(body: kopf.Body, stopped: kopf.DaemonStopped, **_: Any) -> None:
        key = (body.metadata.namespace or "", body.metadata.name or "")
        wake = waker(key)
        while not stopped:
            if FINALIZER not in (body.metadata.get("finalizers") or []):
                # Never install before the finalizer is there: it is what guarantees the uninstall.
                await _sleep(wake, stopped, 5)
                continue
            wake.clear()
            outcome = await reconciler.reconcile(dict(body))
            await _sleep(wake, stopped, outcome.retry_after or _interval(body))

    @kopf.on.delete(GROUP, VERSION, PLURAL, registry=registry)
    async def helmrelease_deleted(body: kopf.Body, **_: Any) -> None:
        if not await reconciler.finalize(dict(body)):
            raise kopf.TemporaryError("uninstall failed; retrying", delay=15)

    def wake_referrers(kind: str) -> Any:
        async def handler(namespace: str | None, name: str | None, **_: Any) -> None:
            for key in ctx.references.get((namespace or "", kind, name or ""), ()):
                waker(key).set()

        return handler

    kopf.on.event("", "v1", "configmaps", registry=registry)(wake_referrers("ConfigMap"))
    kopf.on.event("", "v1", "secrets", registry=registry)(wake_referrers("Secret"))


async def _sleep(wake: asyncio.Event, stopped: kopf.DaemonStopped, seconds: float) -> None:
    """Until woken, stopped, or ``seconds`` passed."""
    waiters = [asyncio.ensure_future(wake.wait()), asyncio.ensure_future(stopped.wait())]
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiter
