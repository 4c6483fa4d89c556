"""Readiness: every object given must become healthy by kstatus rules (or spec.healthCheckExprs) before a
deadline — a release's objects after helm reports success (whatever the helm version's --wait checked: an
unhealthy release is a failed one, so remediation follows), a ConfigSync's after it applied them (wait,
healthChecks).

Objects are followed through the operator's shared collections (one watch per kind and namespace for
every release), after one read of each right after helm: a cached copy counts only once it is the same
object (uid) at least as new (generation) as that read, so a watch that lags behind helm's write never
passes an old rollout for the new one. Kinds judged Current on sight are not read at all. Where the
operator may not watch a kind, its objects are read again every second, as the release's identity.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from typing import Any

from helmop.api.helmrelease import HealthExpr
from helmop.api.objects import ObjectKey
from helmop.decisions.health import FAILED, IN_PROGRESS, by_expression, expression_for, judge, needs_live
from helmop.infra.kube import KubeError
from helmop.infra.watches import Collection
from helmop.infra.worker import WorkerTimeout

from .clusters import Cluster
from .context import Context


class Cancelled(Exception):
    """The wait was stopped because a newer revision of the spec or inputs arrived (or a deletion)."""


@dataclass(frozen=True)
class Waiter:
    """Who waits: the object (its key: what supersedes it), the identity it reads as, its expressions."""

    ctx: Context
    cluster: Cluster  # where the objects are
    key: ObjectKey
    acting_as: str
    exprs: tuple[HealthExpr, ...] = ()


async def _judge(waiter: Waiter, live: dict[str, Any]) -> tuple[str, str]:
    """kstatus' verdict, or that of the spec.healthCheckExprs entry for the object's kind (evaluated in the
    bounded CEL worker: an expression that runs away fails the check, not the operator)."""
    expr = expression_for(live, waiter.exprs)
    if expr is None:
        return judge(live)
    try:
        expressions = [expr.failed or "false", expr.current or "false"]
        failed, current = await waiter.ctx.services.cel.evaluate(expressions, live)
    except WorkerTimeout as exc:
        return FAILED, f"healthCheckExprs: the expressions {exc}"
    return by_expression(expr, failed, current)


def _newest(read: dict[str, Any] | None, cached: dict[str, Any] | None) -> dict[str, Any] | None:
    """The cached copy when it is the object that was read, at least as new; else what was read."""
    if read is None or cached is None:
        return cached if read is None else read
    meta, seen = read["metadata"], cached["metadata"]
    if seen.get("uid") == meta.get("uid") and int(seen.get("generation", 0)) >= int(meta.get("generation", 0)):
        return cached
    return read


class _Watched:
    """One object of the release: its REST path, the collection it belongs to, and the last copy read."""

    def __init__(self, path: str, manifest: dict[str, Any], collection: Collection) -> None:
        self.path, self.collection = path, collection
        self.name = path.rpartition("/")[2]
        namespace = (manifest.get("metadata") or {}).get("namespace")
        self.kind, self.title = manifest["kind"], f"{namespace}/{self.name}" if namespace else self.name
        self.read: dict[str, Any] | None = None

    async def refresh(self, waiter: Waiter) -> str:
        """Read it as the release's identity; a problem reading it ("" when none)."""
        try:
            self.read = await waiter.cluster.kube.acting_as(waiter.acting_as).get(self.path)
        except KubeError as exc:
            return exc.message
        return ""

    def live(self) -> dict[str, Any] | None:
        return self.read if self.collection.refused else _newest(self.read, self.collection.get(self.name))


async def unhealthy(waiter: Waiter, located: list[tuple[str, dict[str, Any]]], timeout: float,
                    started: float) -> tuple[str, str]:
    """("", "") once every object is Current; else the reason and what is wrong: HealthCheckFailed at the
    first Failed object, Timeout (as helm's own wait says it) ``timeout`` seconds after ``started``."""
    superseded = waiter.ctx.memory.superseded(waiter.key)
    deadline = started + timeout
    live_ones = [(path, obj) for path, obj in located if needs_live(obj, waiter.exprs)]
    async with waiter.cluster.collections.reading({path.rpartition("/")[0] for path, _ in live_ones}) as held:
        watched = [_Watched(path, obj, held[path.rpartition("/")[0]]) for path, obj in live_ones]
        problems = await _refreshed(waiter, watched)
        while True:
            changes = [w.collection.changed(w.name) for w in watched]  # taken before judging: none is missed
            failed, waiting = await _look(waiter, watched, problems)
            verdict = _verdict(failed, waiting, timeout, deadline)
            if verdict is not None:
                return verdict
            if superseded.is_set():
                raise Cancelled()
            polled = [w for w in watched if w.collection.refused]
            await _next_change(changes, superseded, deadline,
                               waiter.ctx.settings.limits.unwatched_poll if polled else None)
            problems.update(await _refreshed(waiter, polled))


def _verdict(failed: str, waiting: list[str], timeout: float, deadline: float) -> tuple[str, str] | None:
    """How the wait ends after a look (None: it goes on): failed at a Failed object, done when none waits,
    timed out past the deadline."""
    if failed:
        return "HealthCheckFailed", failed
    if not waiting:
        return "", ""
    if time.monotonic() > deadline:
        return "Timeout", f"timed out: not healthy within {timeout:.0f}s: " + "; ".join(waiting[:5])
    return None


async def _refreshed(waiter: Waiter, watched: list[_Watched]) -> dict[str, str]:
    """Each object read again: the problem reading it, by path ("" when none)."""
    return dict(zip([w.path for w in watched], await asyncio.gather(*(w.refresh(waiter) for w in watched)),
                    strict=True))


async def _look(waiter: Waiter, watched: list[_Watched], problems: dict[str, str]) -> tuple[str, list[str]]:
    """One look at every object: what is wrong with the first Failed one ("" when none), and what the others
    not Current yet wait for (the objects that could not be read among them)."""
    waiting = []
    for w in watched:
        if problems.get(w.path):
            waiting.append(f"{w.kind}/{w.name}: {problems[w.path]}")
            continue
        live = w.live()
        state, why = (IN_PROGRESS, "not found") if live is None else await _judge(waiter, live)
        if state == FAILED:
            return f"{w.kind} {w.title} is not healthy: {why}", waiting
        if state == IN_PROGRESS:
            waiting.append(f"{w.kind}/{w.name}: {why}")
    return "", waiting


async def _next_change(changes: list[asyncio.Event], superseded: asyncio.Event, deadline: float,
                       poll: float | None) -> None:
    """Until one of ``changes`` or ``superseded`` is set, ``poll`` seconds passed, or the deadline."""
    waits = [asyncio.ensure_future(e.wait()) for e in {id(e): e for e in [*changes, superseded]}.values()]
    limit = max(0.0, deadline - time.monotonic()) + 0.01
    try:
        await asyncio.wait(waits, timeout=min(limit, poll) if poll else limit, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*waits, return_exceptions=True)
