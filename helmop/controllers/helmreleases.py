"""One reconcile of a HelmRelease: gather inputs, then decide, act, observe, until nothing is left to do.

Each round asks the pure ``reconcile.decide`` for one action and carries it out through its module in
``actions`` (install, upgrade, test, rollback, uninstall, unlock); the action's pure ``settle`` says
what status its result leads to. A failed action ends the reconcile (the next one, after a backoff,
decides on remediation, then the next try), so tries are spaced by the backoff. A reconcile that finds
nothing to do spawns no helm process. Events are posted for actions and failures, never twice in a
row for the same thing.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from dataclasses import replace
from typing import Any

from helmop.api import conditions as cond
from helmop.api.actions import Action
from helmop.api.errors import HelmopError, SpecError
from helmop.api.helmrelease import HelmReleaseSpec, RepositoryChart, SourceChart, parse_spec
from helmop.api.kinds import FORCE_AT, HELMRELEASE, RESET_AT
from helmop.api.objects import Resource
from helmop.helm import releases
from helmop.helm.inputs import Inputs, gather
from helmop.helm.releases import ReleaseState
from helmop.infra.kube import KubeError
from helmop.reconcile import Decision, Desired, Observed, Reason, Release, decide
from helmop.reconcile.health import check_exprs

from . import dependencies
from .actions import (
    Job,
    Result,
    Step,
    begin,
    condition,
    correct,
    install,
    objects,
    read_release,
    rollback,
    stalled,
    test,
    uninstall,
    unlock,
    upgrade,
)
from .context import Context, Key
from .outcome import DONE, FAILED, Outcome, after
from .status import annotation, pending_request, with_ready, write_status

log = logging.getLogger(__name__)

MAX_ROUNDS = 6  # unlock, install/upgrade, test: a few actions at most before the answer is "nothing"
STEPS: dict[Action, Step] = {Action.INSTALL: install.STEP, Action.UPGRADE: upgrade.STEP, Action.TEST: test.STEP,
                             Action.ROLLBACK: rollback.STEP, Action.UNINSTALL: uninstall.STEP,
                             Action.UNLOCK: unlock.STEP, Action.CORRECT: correct.STEP}


class Reconciler:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    # --- entry points ------------------------------------------------------------------------------

    async def reconcile(self, body: dict[str, Any]) -> Outcome:
        this = Resource(body)
        key = ("HelmRelease", this.namespace, this.name)
        self.ctx.fresh(key)  # this reconcile reads the newest spec and inputs
        try:
            return await self._reconcile(copy.deepcopy(body))
        except KubeError as exc:  # the API itself failed us: try again soon
            log.warning("%s/%s: API error: %s", this.namespace, this.name, exc)
            return FAILED

    async def finalize(self, body: dict[str, Any]) -> Outcome:
        """Uninstall for a deleted HelmRelease (its dependents first: it waits for them)."""
        this = Resource(body)
        key = ("HelmRelease", this.namespace, this.name)
        self.ctx.drop(key)
        try:
            spec = parse_spec(body.get("spec") or {}, this.name, this.namespace)
        except SpecError:
            return DONE  # nothing helmop could have installed
        first = await dependencies.dependents_first(self.ctx, this)
        if first:
            log.info("%s/%s: waiting for %s to be uninstalled first", this.namespace, this.name,
                     ", ".join(first))
            return after(self.ctx.tunables.dependents_wait)
        state = await read_release(self.ctx, spec)
        desired = Desired(config_digest="", owner=releases.owner_token(this.namespace, this.name),
                          suspended=spec.suspend, deleting=True)
        decision = decide(desired, Observed(self._release(state)))
        if decision.action is not Action.UNINSTALL:
            log.info("%s/%s deleted: %s", this.namespace, this.name, decision.message)
            return DONE
        job = Job(self.ctx, body, spec, decision, state)
        result = await uninstall.STEP.run(job)
        await self._report(job, result)
        if not result.ok:
            await self._write_status(body, uninstall.STEP.settle(body.get("status") or {}, job, result))
        return DONE if result.ok else FAILED

    # --- the reconcile -----------------------------------------------------------------------------

    async def _reconcile(self, body: dict[str, Any]) -> Outcome:
        this = Resource(body)
        key = ("HelmRelease", this.namespace, this.name)
        try:
            spec = parse_spec(body.get("spec") or {}, this.name, this.namespace)
            if isinstance(spec.chart, SourceChart):
                self.ctx.tenancy.check_reference(this.namespace, spec.chart.namespace, "spec.chart.sourceRef")
            for i, (dep_namespace, _) in enumerate(spec.depends_on):
                self.ctx.tenancy.check_reference(this.namespace, dep_namespace, f"spec.dependsOn[{i}]")
            check_exprs(spec.health_check_exprs)
        except SpecError as exc:
            await self._fail(body, exc.reason, str(exc), stalled=True)
            return DONE
        self._remember_references(key, spec)
        self._observe(key, spec, body)
        if spec.suspend:
            return DONE
        try:
            waiting = await dependencies.waiting_for(self.ctx, this.namespace, this.name, spec.depends_on)
        except SpecError as exc:
            await self._fail(body, exc.reason, str(exc), stalled=True)
            return DONE
        try:
            inputs = await gather(self.ctx, this.namespace, spec, asked_at=pending_request(body))
            self.ctx.secrets[key] = inputs.secrets
            await self._check_namespace(spec)
        except HelmopError as exc:
            await self._fail(body, exc.reason, str(exc), stalled=not exc.transient)
            return FAILED if exc.transient else DONE
        try:
            return await self._converge(body, key, spec, inputs, waiting)
        except HelmopError as exc:  # helm's records could not be read (broken, or forged by someone who may
            await self._fail(body, exc.reason, str(exc), stalled=not exc.transient)  # write Secrets there)
            return FAILED if exc.transient else DONE

    async def _converge(self, body: dict[str, Any], key: Key, spec: HelmReleaseSpec, inputs: Inputs,
                        waiting: tuple[str, ...]) -> Outcome:
        """Decide and act, round after round, until the release is as wanted or an action ends the reconcile."""
        marked = False
        state = await read_release(self.ctx, spec)  # then read again only after an action changed it
        for _ in range(MAX_ROUNDS):
            observed = self._observed(body, spec, state)
            desired = self._desired(body, spec, inputs, waiting)
            decision = decide(desired, observed)
            if decision.reason is Reason.UP_TO_DATE and spec.drift_mode != "disabled":
                # deployed as wanted: is it still live as helm left it? (API reads, no helm process)
                job = Job(self.ctx, body, spec, decision, state, inputs)
                decision = decide(desired, replace(observed, drift=await correct.detect(job)))
            step = STEPS.get(decision.action)
            if step is None:
                await self._settle_terminal(body, spec, inputs, decision, state)
                if waiting:
                    return after(self.ctx.tunables.dependency_recheck)  # also woken when a dependency's status changes
                break
            progress, writing = None, asyncio.Event()
            if not marked and decision.action is not Action.UNLOCK:
                progress = asyncio.create_task(self._mark_reconciling(body, decision.message, writing))
                marked = True
            job = Job(self.ctx, body, spec, decision, state, inputs)
            try:
                result = await step.run(job)
            finally:
                if progress is not None:
                    if not writing.is_set():  # a quick action: its outcome is the one status write
                        progress.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await progress  # a write under way ends before the outcome's, which must come last
            await self._write_status(body, step.settle(body.get("status") or {}, job, result))
            self._observe(key, spec, body)
            await self._report(job, result)
            if result.cancelled:
                return after(0.01)  # the newer revision is reconciled at once
            if not result.ok:
                return FAILED
            state = result.state or await read_release(self.ctx, spec)
        return DONE

    async def _check_namespace(self, spec: HelmReleaseSpec) -> None:
        if spec.install.create_namespace:
            return
        if await self.ctx.kube.get(f"/api/v1/namespaces/{spec.target_namespace}") is None:
            raise HelmopError("NamespaceNotFound", f"target namespace {spec.target_namespace!r} does not exist "
                                                   "(set spec.install.createNamespace to create it)", transient=True)

    @staticmethod
    def _release(state: ReleaseState, tests: bool = False) -> Release | None:
        record = state.latest
        if record is None:
            return None
        return Release(record.status, record.owner, record.config_digest, record.revision,
                       last_good=state.last_good(), tests=state.tests() if tests else "")

    @staticmethod
    def _desired(body: dict[str, Any], spec: HelmReleaseSpec, inputs: Inputs, waiting: tuple[str, ...]) -> Desired:
        this = Resource(body)
        return Desired(config_digest=releases.digest_token(inputs.digest),
                       owner=releases.owner_token(this.namespace, this.name), suspended=spec.suspend,
                       install=spec.install.remediation, upgrade=spec.upgrade.remediation, tests=spec.test.enable,
                       waiting_for=waiting, drift_mode=spec.drift_mode)

    def _observed(self, body: dict[str, Any], spec: HelmReleaseSpec, state: ReleaseState) -> Observed:
        status = body.get("status") or {}
        reset, force = annotation(body, RESET_AT), annotation(body, FORCE_AT)
        return Observed(release=self._release(state, tests=spec.test.enable),
                        last_attempted_digest=releases.digest_token(status.get("lastAttemptedConfigDigest", "")),
                        last_action=Action.deploy(str(status.get("lastAttemptedReleaseAction", ""))),
                        install_failures=int(status.get("installFailures", 0)),
                        upgrade_failures=int(status.get("upgradeFailures", 0)),
                        reset_requested=bool(reset) and reset != status.get("lastHandledResetAt"),
                        force_requested=bool(force) and force != status.get("lastHandledForceAt"))

    # --- outcomes ----------------------------------------------------------------------------------

    async def _settle_terminal(self, body: dict[str, Any], spec: HelmReleaseSpec, inputs: Inputs,
                               decision: Decision, state: ReleaseState) -> None:
        """Status for an answer that runs nothing: up to date, suspended, refused, or stalled."""
        if decision.action is Action.REFUSE:
            await self._fail(body, decision.reason, decision.message, stalled=True)
            return
        job = Job(self.ctx, body, spec, decision, state, inputs)
        status = begin(body.get("status") or {}, job)
        if decision.action is Action.STALL:
            ready = cond.get_condition(status.get("conditions") or [], cond.READY) or {}
            if ready.get("status") != "False":  # else Ready keeps the reason of the last failure
                condition(status, job, cond.READY, False, decision.reason, decision.message)
            stalled(status, job, decision.reason, decision.message)
            await self._publish(body, status, decision, ok=False)
            return
        if decision.reason is Reason.DEPENDENCY_NOT_READY:
            condition(status, job, cond.READY, False, decision.reason, decision.message)
            stalled(status, job)
            await self._publish(body, status, decision, ok=False)
            return
        if decision.reason is Reason.DRIFT_DETECTED:  # warn mode: report, change nothing
            condition(status, job, cond.DRIFTED, True, decision.reason, decision.message)
            await self._publish(body, status, decision, ok=False)
            return
        if decision.reason is not Reason.UP_TO_DATE:
            return
        drifted = cond.get_condition(status.get("conditions") or [], cond.DRIFTED)
        if drifted and drifted.get("status") == "True":
            condition(status, job, cond.DRIFTED, False, "NoDrift", "the live objects match the release")
        current = cond.get_condition(status.get("conditions") or [], cond.READY) or {}
        if not (current.get("status") == "True" and status.get("lastAttemptedConfigDigest") == inputs.digest):
            # deployed as wanted, but the status does not say so yet (e.g. after a restart or a remediation)
            message = f"Release {job.release} is deployed with chart {job.chart} ({decision.message})"
            status.update(lastAppliedRevision=inputs.chart.version, lastAttemptedConfigDigest=inputs.digest,
                          history=state.history())
            for kind in (cond.READY, cond.RELEASED):
                condition(status, job, kind, True, "UpToDate", message)
            stalled(status, job)
        if "inventory" not in status:  # e.g. a release installed before helmop recorded inventories
            status["inventory"] = releases.inventory([obj for _, obj in await objects(job)])
        await self._write_status(body, status)

    async def _publish(self, body: dict[str, Any], status: dict[str, Any], decision: Decision, *, ok: bool) -> None:
        """Write a terminal status; an Event only when it changes something (no repeats every interval)."""
        if status != body.get("status"):
            await self.ctx.events.post(body, cond.event_type(ok, decision.reason), decision.reason, decision.message)
        await self._write_status(body, status)

    async def _report(self, job: Job, result: Result) -> None:
        await self.ctx.events.post(job.body, cond.event_type(result.ok, result.reason), result.reason, result.message)
        if job.decision.remediation and result.ok:
            log.info("%s/%s remediated: %s", job.namespace, job.name, result.reason)

    async def _fail(self, body: dict[str, Any], reason: str, message: str, *, stalled: bool) -> None:
        await self._write_status(body, with_ready(body, body.get("status") or {}, False, reason, message,
                                                  stalled=stalled))
        await self.ctx.events.post(body, cond.event_type(False, reason), reason, message)

    async def _mark_reconciling(self, body: dict[str, Any], message: str, writing: asyncio.Event) -> None:
        """Reconciling=True, for an action that is still running after ``tunables.progress_after`` seconds (most end
        sooner, and one write of their outcome is all their status needs)."""
        await asyncio.sleep(self.ctx.tunables.progress_after)
        writing.set()
        status = copy.deepcopy(body.get("status") or {})
        generation = Resource(body).generation
        conditions = status.get("conditions") or []
        conditions = cond.set_condition(conditions, cond.RECONCILING, True, "Progressing", message, generation)
        if not cond.get_condition(conditions, cond.READY):
            conditions = cond.set_condition(conditions, cond.READY, False, "Progressing", message, generation)
        status["conditions"] = conditions
        # Not yet an outcome: `helmop reconcile` waits for lastHandledReconcileAt, so it is not set here.
        await self._write_status(body, status, outcome=False)

    async def _write_status(self, body: dict[str, Any], status: dict[str, Any], *, outcome: bool = True) -> None:
        await write_status(self.ctx, HELMRELEASE, body, status, outcome=outcome)

    # --- bookkeeping -------------------------------------------------------------------------------


    def _observe(self, key: Key, spec: HelmReleaseSpec, body: dict[str, Any]) -> None:
        """With drift detection on, a change of one of the release's objects wakes it for a check (as the
        interval does), so `kubectl scale` or a deleted Service is noticed within moments."""
        inventory = (body.get("status") or {}).get("inventory")
        self.ctx.observe(key, releases.inventory_objects(inventory) if spec.drift_mode != "disabled" else [])

    def _remember_references(self, key: Key, spec: HelmReleaseSpec) -> None:
        namespace = key[1]
        targets = [(namespace, ref.kind, ref.name) for ref in spec.values_from]
        if isinstance(spec.chart, RepositoryChart) and spec.chart.secret_ref:
            targets.append((namespace, "Secret", spec.chart.secret_ref))
        if isinstance(spec.chart, SourceChart):
            targets.append((spec.chart.namespace or namespace, spec.chart.kind, spec.chart.name))
        targets += [(dep_namespace, "HelmRelease", dep_name) for dep_namespace, dep_name in spec.depends_on]
        self.ctx.refer(key, targets)
