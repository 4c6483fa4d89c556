"""One reconcile of a HelmRelease: read it once, gather its inputs, then observe, decide, act, settle and
write, round after round, until nothing is left to do.

Each round observes the release once (helm's records, and the live objects' drift where it can decide),
asks the pure ``decisions.decide`` for one action and runs it (``actions.RUNS``); the pure
``decisions.settle.helmrelease`` says what status its result leads to, and that status is written. A
failed action ends the reconcile (the next one, after a backoff, decides on remediation, then the next
try), so tries are spaced by the backoff. A reconcile that finds nothing to do spawns no helm process.
Events are posted for actions and failures, never twice in a row for the same thing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import replace
from typing import Any

from helmop.api import conditions as cond
from helmop.api.actions import Action
from helmop.api.changecontrol import parse_change_control
from helmop.api.conditions import READY
from helmop.api.errors import HelmopError
from helmop.api.helmrelease import (
    HelmReleaseSpec,
    RepositoryChart,
)
from helmop.api.kinds import FORCE_AT, RESET_AT
from helmop.api.objects import ObjectKey, Resource
from helmop.api.status.helmrelease import HelmReleaseStatus
from helmop.decisions import Decision, Desired, Observed, Reason, Release, Stop, decide, drift_matters, ends_turn
from helmop.decisions import changecontrol as rules
from helmop.decisions.settle import helmrelease as settle
from helmop.decisions.settle import progressing
from helmop.decisions.specs import chart_source
from helmop.helm import releases
from helmop.helm.inputs import Inputs, gather
from helmop.helm.releases import ReleaseState
from helmop.infra.kube import KubeError

from . import changecontrol, clusters, dependencies, observed
from .actions import RUNS, correct, uninstall
from .actions.job import Job, Result, objects, read_release
from .actions.pending import pending
from .clusters import Cluster
from .decryption import decryption_keys
from .outcome import DONE, FAILED, Outcome, after
from .status import annotation, pending_request, write_status
from .turn import Turn

log = logging.getLogger(__name__)



async def reconcile(turn: Turn[HelmReleaseSpec, HelmReleaseStatus]) -> Outcome:
    turn.ctx.memory.fresh(turn.key)  # the newest spec and inputs
    return await _Release(turn).reconcile()


async def finalize(turn: Turn[HelmReleaseSpec, HelmReleaseStatus]) -> Outcome:
    """Uninstall for a deleted HelmRelease (its dependents first: it waits for them)."""
    return await _Release(turn).finalize()


class _Release:
    """One turn of a HelmRelease of either family (helmop's kinds, or Flux's: its sources and dependencies are of
    the same family)."""

    def __init__(self, turn: Turn[HelmReleaseSpec, HelmReleaseStatus]) -> None:
        self.turn = turn
        self.ctx = turn.ctx
        self.family = turn.family
        self.kind = turn.kind
        self.retry_at = turn.ctx.memory.retry_at  # RetryOnFailure: when each failed release may be tried again

    async def finalize(self) -> Outcome:
        turn = self.turn
        this, spec, body = turn.this, turn.spec, turn.body
        if spec.kube_config is not None and (spec.suspend or _never_installed(turn.status)):
            # Flux's rule (suspended, or no storageNamespace yet): nothing to uninstall, so no cluster is asked;
            # a remote that never answers cannot hold the object. (The operator's own cluster is always asked:
            # an install cut short by a crash is recorded in helm's storage before it is in the status.)
            log.info("%s/%s deleted: %s, nothing uninstalled", this.namespace, this.name,
                     "suspended" if spec.suspend else "never installed")
            return DONE
        first = await dependencies.dependents_first(self.ctx, this, self.kind)
        if first:
            log.info("%s/%s: waiting for %s to be uninstalled first", this.namespace, this.name,
                     ", ".join(first))
            return after(self.ctx.settings.intervals.dependents_wait)
        try:
            cluster = await turn.cluster(spec.kube_config)
        except HelmopError as exc:
            return await self._unreachable_on_deletion(body, exc)
        return await self._uninstall(body, spec, cluster)

    async def _unreachable_on_deletion(self, body: dict[str, Any], exc: HelmopError) -> Outcome:
        """The remote cluster does not answer: tried again later. A remote that cannot be built (its kubeConfig
        gone, invalid or refused) leaves the release where it is, said in an Event
        (:func:`clusters.retried_on_deletion`)."""
        if clusters.retried_on_deletion(exc):
            await self.ctx.services.events.post(body, "Warning", exc.reason, str(exc))
            return FAILED
        await self.ctx.services.events.post(body, "Warning", "UninstallSkipped", "release left on the remote cluster "
                                                                                 f"(not uninstalled): {exc}")
        return DONE

    async def _uninstall(self, body: dict[str, Any], spec: HelmReleaseSpec, cluster: Cluster) -> Outcome:
        this = Resource(body)
        state = await read_release(cluster, spec)
        desired = Desired(config_digest="", owner=releases.owner_token(this.namespace, this.name, self.kind.key),
                          adopts=self.family.flux, suspended=spec.suspend, deleting=True,
                          generation=this.generation)
        decision = decide(desired, Observed(_release(state)))
        if decision.action is not Action.UNINSTALL:
            log.info("%s/%s deleted: %s", this.namespace, this.name, decision.message)
            return DONE
        job = Job(self.ctx, body, spec, decision, state, cluster)
        result = await uninstall.run(job)
        await self._report(job, result)
        if not result.ok:
            await self._write(body, settle.settle(self.turn.status, desired, decision, result))
        return DONE if result.ok else FAILED

    # --- the reconcile -----------------------------------------------------------------------------

    async def reconcile(self) -> Outcome:
        body = self.turn.body  # each status write hands on the new status in it (and in the turn)
        this, spec, key = Resource(body), self.turn.spec, self.turn.key
        status = self.turn.status  # read once: each write hands on the new one
        self._remember_references(key, spec)
        try:
            cluster = await clusters.target(self.ctx, key, spec.kube_config)
        except HelmopError as exc:
            status = status.but(cluster=exc.cluster) if isinstance(exc, clusters.ClusterUnreachable) else status
            await self._refuse(body, status, exc.reason, str(exc), stalled=not exc.transient)
            return FAILED if exc.transient else DONE
        status = status.but(cluster=cluster.name)
        self._observe(key, spec, status, cluster)
        try:
            waiting = await dependencies.waiting_for(self.ctx, self.kind, body, spec.depends_on, dependencies.reader(
                self.ctx, this.namespace, spec.service_account_name, cluster.remote))
        except HelmopError as exc:
            await self._refuse(body, status, exc.reason, str(exc), stalled=not exc.transient)
            return FAILED if exc.transient else DONE
        self.ctx.services.notifier.sourced(key, "")  # until the chart is read, no commit of its to mark
        try:
            keys = await decryption_keys(self.ctx, this.namespace, spec.decryption)
            inputs = await gather(self.ctx.services, this.namespace, spec, asked_at=pending_request(body),
                                  family=self.family, keys=keys)
            self.ctx.memory.secrets[key] = inputs.secrets
            self.ctx.services.notifier.sourced(key, inputs.source_revision)
        except HelmopError as exc:
            await self._refuse(body, status, exc.reason, str(exc), stalled=not exc.transient)
            return FAILED if exc.transient else DONE
        try:
            return await self._converge(body, status, key, spec, inputs, waiting, cluster)
        except HelmopError as exc:  # helm's records could not be read (broken, or forged by someone who may
            # write Secrets there)
            await self._refuse(body, self.turn.status, exc.reason, str(exc), stalled=not exc.transient)
            return FAILED if exc.transient else DONE

    async def _converge(self, body: dict[str, Any], status: HelmReleaseStatus, key: ObjectKey, spec: HelmReleaseSpec,
                        inputs: Inputs, waiting: tuple[str, ...], cluster: Cluster) -> Outcome:
        """Observe, decide, act, settle, write: round after round, until the release is as wanted or an action
        ends the reconcile."""
        desired = replace(_desired(body, spec, inputs, waiting), adopts=self.family.flux)
        status, asks, gates = await self._people(body, status, desired)
        marked = False
        state = await read_release(cluster, spec)  # then read again only after an action changed it
        for _ in range(self.ctx.settings.limits.release_rounds):
            held = rules.control(status, asks, desired.digest, gates)
            observed = await self._observed(body, spec, status, desired, state, cluster, held)
            decision = decide(desired, observed)
            job = Job(self.ctx, body, spec, decision, state, cluster, inputs)
            stop = ends_turn(decision)
            if stop is not None:
                await self._settle_terminal(job, status, desired, state)
                return self._stopped(stop, waiting, observed, spec)
            run = RUNS[decision.action]
            if decision.action in (Action.INSTALL, Action.UPGRADE) and not marked:
                # said before helm is run (an up-to-date release needs no read)
                await self._check_namespace(spec, cluster)
                if inputs.source_revision and (chart_source(spec) or ("",))[0] == "GitRepository":
                    # said of a chart from git (a commit status marks that commit pending)
                    await self.ctx.services.events.normal(body, "Progressing", f"{decision.message} {desired.chart} "
                                                                               f"from {inputs.source_revision}")
            progress, writing = None, asyncio.Event()
            if not marked and decision.action is not Action.UNLOCK:
                progress = asyncio.create_task(self._mark_reconciling(body, status, decision.message, writing))
                marked = True
            try:
                result = await run(job)
            finally:
                if progress is not None:
                    if not writing.is_set():  # a quick action: its outcome is the one status write
                        progress.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await progress  # a write under way ends before the outcome's, which must come last
            status = settle.settle(status, desired, decision, result)
            await self._write(body, status)
            self._observe(key, spec, status, cluster)
            await self._report(job, result)
            if result.cancelled:
                return after(0.01)  # the newer revision is reconciled at once
            if not result.ok:
                return self._after_failure(key, spec, decision, result.transient)
            self.retry_at.pop(key, None)
            state = result.state or await read_release(cluster, spec)
        return DONE

    async def _people(self, body: dict[str, Any], status: HelmReleaseStatus,
                      desired: Desired) -> tuple[HelmReleaseStatus, rules.Asks, rules.Settings]:
        """People's requests on the release acted on where no action is needed (an unpin, an approval), and its
        change control as of now (approval, windows)."""
        this = Resource(body)
        control = parse_change_control(this.spec, this.metadata.get("annotations") or {}, flux=self.kind.flux)
        status, asks = await changecontrol.settled(self.ctx, self.kind, body, status, desired.digest)
        self.turn.status = status
        return status, asks, await changecontrol.settings(self.ctx, this.namespace, control)

    def _stopped(self, stop: Stop, waiting: tuple[str, ...], observed: Observed, spec: HelmReleaseSpec) -> Outcome:
        """When to look again after a turn that ends with nothing to run."""
        if waiting:
            return after(self.ctx.settings.intervals.dependency_recheck)  # also woken when a dependency changes
        if stop is Stop.RETRY_LATER:
            return after(observed.retry_in)
        if stop is Stop.CLOSED and observed.control.opens_in:
            return after(min(observed.control.opens_in, spec.interval))  # looked at again when the window opens
        return DONE

    def _after_failure(self, key: ObjectKey, spec: HelmReleaseSpec, decision: Decision, transient: bool) -> Outcome:
        """When to look again after a failed action: at the retryInterval of a RetryOnFailure strategy (no
        sooner, whatever wakes it), else after the backoff."""
        policy = spec.install.remediation if decision.action is Action.INSTALL else spec.upgrade.remediation
        if transient or decision.action not in (Action.INSTALL, Action.UPGRADE) or not policy.retry:
            return FAILED
        self.retry_at[key] = time.monotonic() + policy.retry_interval
        return after(policy.retry_interval)

    async def _observed(self, body: dict[str, Any], spec: HelmReleaseSpec, status: HelmReleaseStatus,
                        desired: Desired, state: ReleaseState, cluster: Cluster, held: rules.Control) -> Observed:
        """What is there: helm's records and the last attempt (from status); and the live objects' drift from
        the release where it can decide (API reads, no helm process)."""
        reset, force = annotation(body, RESET_AT), annotation(body, FORCE_AT)
        observed = Observed(release=_release(state, tests=spec.test.enable, changing_from=desired.config_digest),
                            last_attempted_digest=releases.digest_token(status.last_attempted_config_digest),
                            last_action=Action.deploy(status.last_attempted_release_action),
                            install_failures=status.install_failures, upgrade_failures=status.upgrade_failures,
                            reset_requested=bool(reset) and reset != status.last_handled_reset_at,
                            force_requested=bool(force) and force != status.last_handled_force_at,
                            retry_in=max(0.0, self.retry_at.get(Resource(body).key, 0.0) - time.monotonic()),
                            control=held)
        if not drift_matters(desired, observed):
            return observed
        looking = Job(self.ctx, body, spec, Decision(Action.NONE, Reason.DRIFT_DETECTED, "looking for drift"), state,
                      cluster)
        return replace(observed, drift=await correct.detect(looking))

    async def _check_namespace(self, spec: HelmReleaseSpec, cluster: Cluster) -> None:
        if spec.install.create_namespace:
            return
        try:
            found = await cluster.kube.get(f"/api/v1/namespaces/{spec.target_namespace}")
        except KubeError as exc:
            if exc.status != 403:
                raise
            return  # a remote kubeconfig's identity may not read namespaces: helm says it if the namespace is missing
        if found is None:
            raise HelmopError("NamespaceNotFound", f"target namespace {spec.target_namespace!r} does not exist "
                                                   "(set spec.install.createNamespace to create it)", transient=True)

    # --- outcomes ----------------------------------------------------------------------------------

    async def _settle_terminal(self, job: Job, status: HelmReleaseStatus, desired: Desired,
                               state: ReleaseState) -> None:
        """Status for an answer that runs nothing: up to date, suspended, refused, stalled or waiting."""
        decision, diff = job.decision, ""
        if decision.reason is Reason.AWAITING_APPROVAL:
            decision, diff = await self._what_waits(job, status, desired)
        inventory = None
        if status.inventory is None and decision.reason is Reason.UP_TO_DATE:  # installed before inventories
            inventory = releases.inventory([obj for _, obj in await objects(job)])
        settled = settle.terminal(status, desired, decision, state.history, inventory)
        if settled is None:
            return
        changed = await self._write(job.body, settled)
        # a refusal is said every time; a stall, a wait or drift only when the status changed (no repeats
        # every interval)
        if decision.action is Action.REFUSE or (changed and decision.reason is not Reason.UP_TO_DATE):
            await self.ctx.services.events.post(job.body, cond.event_type(False, decision.reason), decision.reason,
                                                decision.message + (f"\n{diff}" if diff else ""))

    async def _what_waits(self, job: Job, status: HelmReleaseStatus, desired: Desired) -> tuple[Decision, str]:
        """A change awaiting approval, said with what it changes (rendered once per revision waiting: Ready keeps
        the summary while the same revision waits); and the diff, for its Event."""
        ready = status.condition(READY)
        if status.pending_revision == desired.digest and ready is not None and ready.reason == Reason.AWAITING_APPROVAL:
            return replace(job.decision, message=ready.message), ""
        summary, diff = await pending(job)
        return replace(job.decision, message=f"{job.decision.message}: {summary}"), diff

    async def _report(self, job: Job, result: Result) -> None:
        await self.ctx.services.events.post(job.body, cond.event_type(result.ok, result.reason), result.reason,
                                            result.message)
        if job.decision.remediation and result.ok:
            log.info("%s/%s remediated: %s", job.namespace, job.name, result.reason)

    async def _refuse(self, body: dict[str, Any], status: HelmReleaseStatus, reason: str, message: str, *,
                      stalled: bool) -> None:
        await self._write(body, settle.refused(status, Resource(body).generation, reason, message, stalled=stalled))
        await self.ctx.services.events.post(body, cond.event_type(False, reason), reason, message)

    async def _mark_reconciling(self, body: dict[str, Any], status: HelmReleaseStatus, message: str,
                                writing: asyncio.Event) -> None:
        """Reconciling=True, for an action that is still running after ``settings.intervals.progress_after``
        seconds (most end sooner, and one write of their outcome is all their status needs)."""
        await asyncio.sleep(self.ctx.settings.intervals.progress_after)
        writing.set()
        # Not yet an outcome: `helmop reconcile` waits for lastHandledReconcileAt, so it is not set here.
        await self._write(body, progressing(status, Resource(body).generation, message), outcome=False)

    async def _write(self, body: dict[str, Any], status: HelmReleaseStatus, *, outcome: bool = True) -> bool:
        """``status`` written, and the turn's from now on: a failure reported later starts from it."""
        self.turn.status = status
        return await write_status(self.ctx, self.kind, body, status, outcome=outcome)

    # --- bookkeeping -------------------------------------------------------------------------------

    def _observe(self, key: ObjectKey, spec: HelmReleaseSpec, status: HelmReleaseStatus, cluster: Cluster) -> None:
        """With drift detection on, a change of one of the release's objects wakes it for a check (as the
        interval does), so `kubectl scale` or a deleted Service is noticed within moments, and a check passes over
        the objects that did not change. On a remote cluster, its own watches of those kinds (with its client),
        started here for the first release there that has one."""
        watched = releases.inventory_objects(status.inventory) if spec.drift_mode != "disabled" else []
        self.ctx.memory.observe(key, watched, cluster.key)
        if cluster.metadata is not None:
            observed.follow_remote(self.ctx.memory, cluster.key, cluster.metadata, watched)

    def _remember_references(self, key: ObjectKey, spec: HelmReleaseSpec) -> None:
        namespace = key.namespace
        targets = [ObjectKey(ref.kind, namespace, ref.name) for ref in spec.values_from]
        if isinstance(spec.chart, RepositoryChart) and spec.chart.secret_ref:
            targets.append(ObjectKey("Secret", namespace, spec.chart.secret_ref))
        source = chart_source(spec)
        if source is not None:
            kind = self.family.source(source[0])
            targets.append(ObjectKey(kind.key if kind else source[0], source[1] or namespace, source[3]))
        for values_file in spec.values_files:  # a new artifact wakes it; its values decide whether it upgrades
            kind = self.family.source(values_file.kind)
            targets.append(ObjectKey(kind.key if kind else values_file.kind, values_file.namespace or namespace,
                                     values_file.name))
        if spec.kube_config is not None:
            targets.append(ObjectKey(spec.kube_config.source[0], namespace, spec.kube_config.source[1]))
        if spec.decryption is not None and spec.decryption.secret_ref:
            targets.append(ObjectKey("Secret", namespace, spec.decryption.secret_ref))
        self.ctx.memory.refer(key, targets)


def _release(state: ReleaseState, tests: bool = False, changing_from: str = "") -> Release | None:
    """The latest revision as the decision sees it; its chart's name read (its record decoded) only when its
    configuration is not ``changing_from`` (that digest covers the chart's name: up to date, nothing to read)."""
    record = state.latest
    if record is None:
        return None
    changing = bool(changing_from) and record.config_digest != changing_from
    return Release(record.status, record.owner, record.config_digest, record.revision,
                   last_good=state.last_good(), tests=state.tests() if tests else "",
                   chart_name=state.chart_name() if changing else "")


def _never_installed(status: HelmReleaseStatus) -> bool:
    """Whether the status records no install or upgrade attempt (it records one before it ends: the release
    name, helm's history, the last action) and no release adopted (its history or inventory)."""
    return not (status.release_name or status.history or status.last_attempted_release_action
                or status.inventory is not None)


def _desired(body: dict[str, Any], spec: HelmReleaseSpec, inputs: Inputs, waiting: tuple[str, ...]) -> Desired:
    this = Resource(body)
    return Desired(config_digest=releases.digest_token(inputs.digest),
                   owner=releases.owner_token(this.namespace, this.name, this.key[0]), suspended=spec.suspend,
                   install=spec.install.remediation, upgrade=spec.upgrade.remediation, tests=spec.test.enable,
                   waiting_for=waiting, drift_mode=spec.drift_mode, generation=this.generation, digest=inputs.digest,
                   chart_version=inputs.chart.version, chart=f"{inputs.chart.name}@{inputs.chart.version}",
                   release=f"{spec.target_namespace}/{spec.release_name}", release_name=spec.release_name,
                   reset_at=annotation(body, RESET_AT), force_at=annotation(body, FORCE_AT),
                   chart_name=inputs.chart.name, reinstall_on_rename=spec.upgrade.chart_name_change == "Reinstall")
