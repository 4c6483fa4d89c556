"""What every action works with: the :class:`Job` (one HelmRelease, its parsed spec, helm's records, its
inputs and the decision), the :class:`Result` it returns, and running helm within the operator's limits."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from helmop.api.errors import HelmopError
from helmop.api.helmrelease import HelmReleaseSpec
from helmop.api.objects import ObjectKey, Resource
from helmop.api.redaction import redact
from helmop.decisions import Decision
from helmop.decisions.settle.helmrelease import ActionResult
from helmop.helm import releases
from helmop.helm.inputs import Inputs
from helmop.helm.releases import ReleaseState

from ..clusters import Cluster
from ..context import Context
from ..readiness import Cancelled, Waiter

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
    cluster: Cluster  # where the release lives (the operator's cluster, or spec.kubeConfig's)
    inputs: Inputs | None = None  # None when deleting

    @property
    def namespace(self) -> str:
        return Resource(self.body).namespace

    @property
    def name(self) -> str:
        return Resource(self.body).name

    @property
    def acting_as(self) -> str:
        return self.cluster.acting_as(self.ctx.tenancy, self.namespace, self.spec.service_account_name)

    @property
    def key(self) -> ObjectKey:
        """The HelmRelease's key in the operator's tables (supersessions, committed turns)."""
        return Resource(self.body).key

    @property
    def waiter(self) -> Waiter:
        """The release's objects' readiness, as this HelmRelease waits for it."""
        return Waiter(self.ctx, self.cluster, self.key, self.acting_as, self.spec.health_check_exprs)

    @property
    def release(self) -> str:
        return f"{self.spec.target_namespace}/{self.spec.release_name}"

    @property
    def chart(self) -> str:
        return f"{self.inputs.chart.name}@{self.inputs.chart.version}" if self.inputs else "(unknown chart)"


@dataclass(frozen=True)
class Result(ActionResult):
    """An action's :class:`ActionResult`, with what the reconcile goes on from."""

    state: ReleaseState | None = None  # the release as read after the action (None: not read)
    objects: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (REST path, object) after it


def major_notes(job: Job) -> str:
    """What of the spec the running helm major cannot do, said after the action's message."""
    major = job.ctx.services.engine.major
    unmet = [f"{name} needs helm {needs}" for name, needs in job.spec.helm_major_fields if needs != major]
    return f" (not applied: {'; '.join(unmet)}; the operator runs helm {major})" if unmet else ""


def cancelled(job: Job, what: str) -> Result:
    why = job.ctx.memory.superseded(job.key).why or "a newer revision arrived"
    return Result(False, "ActionCancelled", f"{what} of {job.release} stopped: {why}", cancelled=True)


async def helm_call(job: Job, action: str, call: Awaitable[T]) -> T:
    """Run a helm call, counted and timed by its result, within the concurrency limit, and stopped when
    a newer revision of the spec or values arrives (no waiting for an old rollout's timeout)."""
    memory, services = job.ctx.memory, job.ctx.services
    superseded = memory.superseded(job.key)
    started, result = time.monotonic(), "success"
    async with services.slots:
        memory.committed.add(job.key)
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
            services.metrics.helm_actions.labels(action, result).inc()
            services.metrics.helm_duration.labels(action, result).observe(time.monotonic() - started)


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
    state = await read_release(job.cluster, job.spec)  # once: the history, the inventory and the next decision
    # off the loop: each revision's record is inflated, parsed and its values digested (a large release: tens of ms)
    revisions = await asyncio.to_thread(state.history)
    revision = revisions[0].revision if revisions else 0
    located = await objects(job, state)  # its manifest parsed once: for the inventory and the health check
    return Result(True, ok_reason, ok_message.format(revision=revision), history=revisions,
                  inventory=releases.inventory([obj for _, obj in located]), state=state, objects=located)


async def objects(job: Job, state: ReleaseState | None = None) -> list[tuple[str, dict[str, Any]]]:
    """(REST path, object) of each object of the release (of ``state``, else of the job's), resolved as the
    identity the release acts as."""
    return await releases.located(state or job.state, job.cluster.kube.acting_as(job.acting_as),
                                  job.spec.target_namespace)


async def read_release(cluster: Cluster, spec: HelmReleaseSpec) -> ReleaseState:
    return await cluster.releases.read(spec.release_name, spec.storage_namespace)
