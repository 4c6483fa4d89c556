"""The actions a HelmRelease reconcile carries out, one module each (Flux's small atomic actions):
install, upgrade, test, rollback, uninstall, unlock. Each module provides a :class:`Step`: ``run``
does the I/O (helm, or the API) and returns a :class:`Result`; ``settle`` is pure and says what status
that result leads to. ``reconcile.decide`` picks the action; adding one means a module here and rows
in its decision table.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from helmop.api import conditions as cond
from helmop.api.actions import Action
from helmop.api.errors import HelmopError
from helmop.api.helmrelease import HelmReleaseSpec
from helmop.api.kinds import FORCE_AT, RESET_AT
from helmop.api.objects import Resource
from helmop.api.redaction import redact
from helmop.helm import releases
from helmop.helm.inputs import Inputs
from helmop.helm.releases import ReleaseState
from helmop.reconcile import Decision

from ..context import Context
from ..status import annotation

T = TypeVar("T")


@dataclass(frozen=True)
class Job:
    """Everything one action needs: the HelmRelease, its parsed spec, the release as helm keeps it, its
    inputs, and the decision (the plan)."""

    ctx: Context
    body: dict[str, Any]
    spec: HelmReleaseSpec
    decision: Decision
    state: ReleaseState  # helm's storage of the release, as read for this decision
    inputs: Inputs | None = None  # None when deleting

    @property
    def namespace(self) -> str:
        return Resource(self.body).namespace

    @property
    def name(self) -> str:
        return Resource(self.body).name

    @property
    def generation(self) -> int:
        return Resource(self.body).generation

    @property
    def acting_as(self) -> str:
        return self.ctx.tenancy.acting_as(self.namespace, self.spec.service_account_name)

    @property
    def key(self) -> tuple[str, str, str]:
        """The HelmRelease's key in the operator's tables (supersessions, committed turns)."""
        return ("HelmRelease", self.namespace, self.name)

    @property
    def release(self) -> str:
        return f"{self.spec.target_namespace}/{self.spec.release_name}"

    @property
    def chart(self) -> str:
        return f"{self.inputs.chart.name}@{self.inputs.chart.version}" if self.inputs else "(unknown chart)"


@dataclass(frozen=True)
class Result:
    ok: bool
    reason: str  # the Event and condition reason, such as UpgradeSucceeded or TestFailed
    message: str  # for people; secret values already masked
    transient: bool = False  # failed, but not because of the configuration (retry with backoff)
    cancelled: bool = False  # stopped for a newer revision of the spec or values
    history: list[dict[str, Any]] = field(default_factory=list)  # release revisions after the action
    inventory: dict[str, Any] | None = None  # the objects of the release after the action (None: unknown)
    state: ReleaseState | None = None  # the release as read after the action (None: not read)
    objects: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (REST path, object) after it
    readiness: dict[str, str] = field(default_factory=dict)  # who judged an install or upgrade ready, and why


@dataclass(frozen=True)
class Step:
    run: Callable[[Job], Awaitable[Result]]
    settle: Callable[[dict[str, Any], Job, Result], dict[str, Any]]


class Cancelled(Exception):
    """The action was stopped because a newer revision of the spec or values arrived (or a deletion)."""


def cancelled(job: Job, what: str) -> Result:
    why = job.ctx.superseded(job.key).why or "a newer revision arrived"
    return Result(False, "ActionCancelled", f"{what} of {job.release} stopped: {why}", cancelled=True)


async def helm_call(job: Job, action: str, call: Awaitable[T]) -> T:
    """Run a helm call, counted and timed by its result, within the concurrency limit, and stopped when
    a newer revision of the spec or values arrives (no waiting for an old rollout's timeout)."""
    superseded = job.ctx.superseded(job.key)
    started, result = time.monotonic(), "success"
    async with job.ctx.slots:
        job.ctx.committed.add(job.key)
        task = asyncio.ensure_future(call)
        waiter = asyncio.ensure_future(superseded.wait())
        try:
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        try:
            if not task.done():  # superseded: stopping the task stops helm (pyhelm3 terminates it)
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, HelmopError):
                    await task
                result = "cancelled"
                raise Cancelled()
            return task.result()
        except HelmopError:
            result = "failure"
            raise
        finally:
            job.ctx.metrics.helm_actions.labels(action, result).inc()
            job.ctx.metrics.helm_duration.labels(action, result).observe(time.monotonic() - started)


async def outcome(job: Job, action: str, call: Awaitable[Any], ok_reason: str, ok_message: str) -> Result:
    """The Result of one helm call: success, failure (masked message), or cancelled. ``ok_message`` may
    name ``{revision}``, the release's revision afterwards."""
    secrets = job.inputs.secrets if job.inputs else []
    try:
        await helm_call(job, action, call)
    except Cancelled:
        return cancelled(job, f"helm {action}")
    except HelmopError as exc:
        failed = exc.reason if exc.reason not in ("UpgradeFailed", "InstallFailed") else f"{action.capitalize()}Failed"
        return Result(False, failed, redact(f"Helm {action} failed for release {job.release} with chart {job.chart}: "
                                            f"{exc}", secrets), transient=exc.transient)
    state = await read_release(job.ctx, job.spec)  # once: the history, the inventory and the next decision
    revisions = state.history()
    revision = revisions[0]["revision"] if revisions else 0
    located = await objects(job, state)  # its manifest parsed once: for the inventory and the health check
    return Result(True, ok_reason, ok_message.format(revision=revision), history=revisions,
                  inventory=releases.inventory([obj for _, obj in located]), state=state, objects=located)


async def objects(job: Job, state: ReleaseState | None = None) -> list[tuple[str, dict[str, Any]]]:
    """(REST path, object) of each object of the release (of ``state``, else of the job's), resolved as the
    identity the release acts as."""
    return await releases.located(state or job.state, job.ctx.kube.acting_as(job.acting_as),
                                  job.spec.target_namespace)


async def read_release(ctx: Context, spec: HelmReleaseSpec) -> ReleaseState:
    return await ctx.releases.read(spec.release_name, spec.storage_namespace)


# --- pure status pieces every action's settle uses -----------------------------------------------


def observed(status: dict[str, Any], result: Result) -> None:
    """What the action saw of the release afterwards: its revisions and its objects."""
    if result.history:
        status["history"] = result.history
    if result.inventory is not None:
        status["inventory"] = result.inventory


def begin(status: dict[str, Any], job: Job) -> dict[str, Any]:
    """A copy of ``status`` for the job's generation, with the Reconciling mark gone."""
    out = copy.deepcopy(status)
    out["observedGeneration"] = job.generation
    out["conditions"] = cond.remove_condition(out.get("conditions") or [], cond.RECONCILING)
    return out


def condition(status: dict[str, Any], job: Job, kind: str, ok: bool, reason: str, message: str) -> None:
    status["conditions"] = cond.set_condition(status.get("conditions") or [], kind, ok, reason, message,
                                              job.generation)


def drop(status: dict[str, Any], kind: str) -> None:
    status["conditions"] = cond.remove_condition(status.get("conditions") or [], kind)


def stalled(status: dict[str, Any], job: Job, reason: str = "", message: str = "") -> None:
    """Stalled set (with a reason) or cleared (without)."""
    if reason:
        condition(status, job, cond.STALLED, True, reason, message)
    else:
        drop(status, cond.STALLED)


def attempted(status: dict[str, Any], job: Job, action: Action) -> dict[str, Any]:
    """Record an install/upgrade attempt of the job's configuration. Failures count afresh for a new
    configuration, or when a new helmop.dev/resetAt asks for it; a forceAt acted on is handled."""
    assert job.inputs is not None
    reset = annotation(job.body, RESET_AT)
    fresh = status.get("lastAttemptedConfigDigest") != job.inputs.digest or (
        bool(reset) and reset != status.get("lastHandledResetAt"))
    status.update(lastAttemptedGeneration=job.generation, lastAttemptedRevision=job.inputs.chart.version,
                  lastAttemptedConfigDigest=job.inputs.digest, lastAttemptedReleaseAction=action.value)
    if fresh:
        status["installFailures"] = status["upgradeFailures"] = 0
    if reset:
        status["lastHandledResetAt"] = reset
    if job.decision.force and annotation(job.body, FORCE_AT):
        status["lastHandledForceAt"] = annotation(job.body, FORCE_AT)
    return status


def failures_key(action: Action) -> str:
    return "installFailures" if action is Action.INSTALL else "upgradeFailures"
