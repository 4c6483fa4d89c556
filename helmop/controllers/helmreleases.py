"""One reconcile of a HelmRelease: gather inputs, decide, perform, report.

Status is written once per outcome (plus a Reconciling mark before a helm action, which can take
minutes), and only when it changed; Events are posted for actions and failures, never twice in a
row for the same thing. A reconcile that finds nothing to do spawns no helm process.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from helmop.api import conditions as cond
from helmop.api.helmrelease import (
    HelmReleaseSpec,
    RepositoryChart,
    SourceChart,
    SpecError,
    parse_spec,
)
from helmop.api.kinds import HELMRELEASE
from helmop.api.redaction import redact
from helmop.helm import storage
from helmop.helm.engine import HelmError
from helmop.helm.request import upgrade_request
from helmop.reconcile import Action, Decision, Desired, Observed, Release, decide

from . import metrics
from .context import Context, Key
from .inputs import InputError, Inputs, gather
from .kube import KubeError
from .status import requested, write_status

log = logging.getLogger(__name__)

HISTORY_KEPT = 5
RETRY_MIN, RETRY_MAX = 5.0, 300.0


@dataclass
class Outcome:
    """What the caller should do next: come back after ``retry_after`` seconds (None: at interval)."""

    retry_after: float | None = None


@contextlib.asynccontextmanager
async def _timed(action: str) -> AsyncIterator[None]:
    """Count and time one helm action by its result."""
    started, result = time.monotonic(), "success"
    try:
        yield
    except HelmError:
        result = "failure"
        raise
    finally:
        metrics.HELM_ACTIONS.labels(action, result).inc()
        metrics.HELM_DURATION.labels(action, result).observe(time.monotonic() - started)


class Reconciler:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    # --- entry points ------------------------------------------------------------------------------

    async def reconcile(self, body: dict[str, Any]) -> Outcome:
        meta = body["metadata"]
        key = ("HelmRelease", meta["namespace"], meta["name"])
        async with self.ctx.lock(key):
            try:
                return await self._reconcile(copy.deepcopy(body))
            except KubeError as exc:  # the API itself failed us: try again soon
                log.warning("%s/%s: API error: %s", meta["namespace"], meta["name"], exc)
                return Outcome(self._next_backoff(key))

    async def finalize(self, body: dict[str, Any]) -> bool:
        """Uninstall for a deleted HelmRelease; True when the finalizer may go."""
        meta = body["metadata"]
        key = ("HelmRelease", meta["namespace"], meta["name"])
        async with self.ctx.lock(key):
            self.ctx.drop(key)
            try:
                spec = parse_spec(body.get("spec") or {}, meta["name"], meta["namespace"])
            except SpecError:
                return True  # nothing helmop could have installed
            record = await self._record(spec)
            decision = decide(self._desired(body, spec, "", deleting=True), Observed(self._release(record)))
            if decision.action is not Action.UNINSTALL:
                log.info("%s/%s deleted: %s", meta["namespace"], meta["name"], decision.message)
                return True
            opts = spec.uninstall
            try:
                async with self.ctx.slots, _timed("uninstall"):
                    await self.ctx.engine.uninstall(spec.release_name, spec.target_namespace,
                                                    opts.timeout or spec.timeout, wait=not opts.disable_wait,
                                                    keep_history=opts.keep_history, disable_hooks=opts.disable_hooks,
                                                    impersonate=self.ctx.tenancy.acting_as(
                                                        meta["namespace"], spec.service_account_name))
            except HelmError as exc:
                await self.ctx.events.warning(body, "UninstallFailed", str(exc))
                await self._write_status(body, self._failed(body, "UninstallFailed", str(exc), stalled=False))
                return False
            await self.ctx.events.normal(body, "UninstallSucceeded",
                                         f"Helm uninstall succeeded for release {spec.target_namespace}/"
                                         f"{spec.release_name}")
            return True

    # --- the reconcile -----------------------------------------------------------------------------

    async def _reconcile(self, body: dict[str, Any]) -> Outcome:
        meta = body["metadata"]
        key = ("HelmRelease", meta["namespace"], meta["name"])
        try:
            spec = parse_spec(body.get("spec") or {}, meta["name"], meta["namespace"])
            if isinstance(spec.chart, SourceChart):
                self.ctx.tenancy.check_reference(meta["namespace"], spec.chart.namespace, "spec.chart.sourceRef")
        except SpecError as exc:
            await self._fail(body, exc.reason, str(exc), stalled=True)
            return Outcome()
        self._remember_references(key, spec)
        if spec.suspend:
            return Outcome()
        try:
            inputs = await gather(self.ctx, meta["namespace"], spec)
            await self._check_namespace(spec)
        except (InputError, SpecError) as exc:
            transient = getattr(exc, "transient", False)
            await self._fail(body, exc.reason, str(exc), stalled=not transient)
            return Outcome(self._next_backoff(key) if transient else None)
        for _ in range(2):  # a second round after unlocking a stuck release
            record = await self._record(spec)
            observed = self._observed(body, record)
            decision = decide(self._desired(body, spec, storage.digest_token(inputs.digest)), observed)
            if decision.action is not Action.UNLOCK or record is None:
                break
            await self._unlock(body, record, decision)
        outcome = await self._perform(body, spec, inputs, decision)
        if outcome.retry_after is None:
            self.ctx.backoff.pop(key, None)
        return outcome

    async def _check_namespace(self, spec: HelmReleaseSpec) -> None:
        if spec.install.create_namespace:
            return
        if await self.ctx.kube.get(f"/api/v1/namespaces/{spec.target_namespace}") is None:
            raise InputError("NamespaceNotFound", f"target namespace {spec.target_namespace!r} does not exist "
                                                  "(set spec.install.createNamespace to create it)", transient=True)

    async def _release_secrets(self, spec: HelmReleaseSpec) -> list[dict[str, Any]]:
        """helm's storage Secrets of the release (one API list, no helm process)."""
        return await self.ctx.kube.list(f"/api/v1/namespaces/{spec.storage_namespace}/secrets",
                                        storage.selector(spec.release_name))

    async def _record(self, spec: HelmReleaseSpec) -> storage.ReleaseRecord | None:
        return storage.latest(await self._release_secrets(spec))

    @staticmethod
    def _release(record: storage.ReleaseRecord | None) -> Release | None:
        if record is None:
            return None
        return Release(record.status, record.owner, record.config_digest, record.revision)

    @staticmethod
    def _desired(body: dict[str, Any], spec: HelmReleaseSpec, digest: str, deleting: bool = False) -> Desired:
        meta = body["metadata"]
        return Desired(config_digest=digest, owner=storage.owner_token(meta["namespace"], meta["name"]),
                       suspended=spec.suspend, deleting=deleting, install_retries=spec.install.retries,
                       upgrade_retries=spec.upgrade.retries)

    def _observed(self, body: dict[str, Any], record: storage.ReleaseRecord | None) -> Observed:
        status = body.get("status") or {}
        asked = requested(body)
        return Observed(release=self._release(record),
                        last_attempted_digest=storage.digest_token(status.get("lastAttemptedConfigDigest", "")),
                        failures=int(status.get("failures", 0)),
                        retry_requested=bool(asked) and asked != status.get("lastHandledReconcileAt"))

    async def _unlock(self, body: dict[str, Any], record: storage.ReleaseRecord, decision: Decision) -> None:
        secret = storage.unlocked(record.secret, "marked failed by helmop: the previous action never finished")
        meta = secret["metadata"]
        await self.ctx.kube.request("PUT", f"/api/v1/namespaces/{meta['namespace']}/secrets/{meta['name']}", secret)
        await self.ctx.events.warning(body, "ReleaseUnlocked", decision.message)

    async def _perform(self, body: dict[str, Any], spec: HelmReleaseSpec, inputs: Inputs,
                       decision: Decision) -> Outcome:
        if decision.action is Action.REFUSE:
            await self._fail(body, decision.reason, decision.message, stalled=True)
            return Outcome()
        if decision.action is Action.NONE:
            if decision.reason == "UpToDate":
                await self._up_to_date(body, spec, inputs)
            return Outcome()
        installing = decision.action is Action.INSTALL
        await self._mark_reconciling(body, decision.message)
        meta = body["metadata"]
        request = upgrade_request(spec, meta["namespace"], meta["name"], chart=inputs.chart_path,
                                  values=inputs.values, digest=inputs.digest, installing=installing,
                                  tenancy=self.ctx.tenancy)
        action = "install" if installing else "upgrade"
        try:
            async with self.ctx.slots, _timed(action):
                await self.ctx.engine.upgrade(request, installing=installing)
        except HelmError as exc:
            message = redact(str(exc), inputs.secrets)
            return await self._action_failed(body, spec, inputs, installing, exc, message)
        return await self._action_succeeded(body, spec, inputs, installing)

    # --- outcomes ----------------------------------------------------------------------------------

    async def _action_succeeded(self, body: dict[str, Any], spec: HelmReleaseSpec, inputs: Inputs,
                                installing: bool) -> Outcome:
        verb = "install" if installing else "upgrade"
        reason = "InstallSucceeded" if installing else "UpgradeSucceeded"
        message = await self._deployed(body, spec, inputs, reason,
                                       f"Helm {verb} succeeded for release {{release}} with chart {{chart}}")
        await self.ctx.events.normal(body, reason, message)
        return Outcome()

    async def _deployed(self, body: dict[str, Any], spec: HelmReleaseSpec, inputs: Inputs, reason: str,
                        template: str) -> str:
        """Write the status of a deployed, current release; returns the Ready message."""
        secrets = await self._release_secrets(spec)
        record = storage.latest(secrets)
        message = template.format(release=f"{spec.target_namespace}/{spec.release_name}.v"
                                          f"{record.revision if record else 0}",
                                  chart=f"{inputs.chart.name}@{inputs.chart.version}")
        status = self._attempted(body, inputs, failures=0)
        status["lastAppliedRevision"] = inputs.chart.version
        status["history"] = self._history(secrets)
        status["conditions"] = self._conditions(body, ready=True, reason=reason, message=message, released=True,
                                                stalled=False)
        await self._write_status(body, status)
        return message

    async def _action_failed(self, body: dict[str, Any], spec: HelmReleaseSpec, inputs: Inputs, installing: bool,
                             exc: HelmError, message: str) -> Outcome:
        key = ("HelmRelease", body["metadata"]["namespace"], body["metadata"]["name"])
        previous = body.get("status") or {}
        same = previous.get("lastAttemptedConfigDigest") == inputs.digest
        failures = (int(previous.get("failures", 0)) if same else 0) + (0 if exc.transient else 1)
        retries = spec.install.retries if installing else spec.upgrade.retries
        exhausted = not exc.transient and failures > retries
        verb = "install" if installing else "upgrade"
        reason = exc.reason if exc.reason not in ("InstallFailed", "UpgradeFailed") else f"{verb.capitalize()}Failed"
        text = f"Helm {verb} failed for release {spec.target_namespace}/{spec.release_name} with chart " \
               f"{inputs.chart.name}@{inputs.chart.version}: {message}"
        status = self._attempted(body, inputs, failures=failures)
        status["history"] = self._history(await self._release_secrets(spec))
        status["conditions"] = self._conditions(body, ready=False, reason=reason, message=text, released=False,
                                                stalled=exhausted)
        await self._write_status(body, status)
        await self.ctx.events.warning(body, reason, text)
        if exhausted:
            return Outcome()
        return Outcome(self._next_backoff(key))

    async def _up_to_date(self, body: dict[str, Any], spec: HelmReleaseSpec, inputs: Inputs) -> None:
        status = body.get("status") or {}
        ready = cond.get_condition(status.get("conditions") or [], cond.READY)
        if ready and ready.get("status") == "True" and status.get("lastAttemptedConfigDigest") == inputs.digest \
                and status.get("observedGeneration") == body["metadata"].get("generation", 0):
            await self._write_status(body, copy.deepcopy(status))  # only a handled requestedAt may change
            return
        await self._deployed(body, spec, inputs, "UpToDate", "Release {release} is deployed with chart {chart}")

    async def _fail(self, body: dict[str, Any], reason: str, message: str, *, stalled: bool) -> None:
        await self._write_status(body, self._failed(body, reason, message, stalled=stalled))
        await self.ctx.events.warning(body, reason, message)

    def _failed(self, body: dict[str, Any], reason: str, message: str, *, stalled: bool) -> dict[str, Any]:
        status = copy.deepcopy(body.get("status") or {})
        status["observedGeneration"] = body["metadata"].get("generation", 0)
        status["conditions"] = self._conditions(body, ready=False, reason=reason, message=message, released=None,
                                                stalled=stalled)
        return status

    # --- status pieces -----------------------------------------------------------------------------

    def _attempted(self, body: dict[str, Any], inputs: Inputs, *, failures: int) -> dict[str, Any]:
        status = copy.deepcopy(body.get("status") or {})
        generation = body["metadata"].get("generation", 0)
        status.update(observedGeneration=generation, lastAttemptedGeneration=generation,
                      lastAttemptedRevision=inputs.chart.version, lastAttemptedConfigDigest=inputs.digest,
                      failures=failures)
        if requested(body):
            status["lastHandledReconcileAt"] = requested(body)
        return status

    @staticmethod
    def _conditions(body: dict[str, Any], *, ready: bool, reason: str, message: str, released: bool | None,
                    stalled: bool) -> list[dict[str, Any]]:
        generation = body["metadata"].get("generation", 0)
        conditions = list((body.get("status") or {}).get("conditions") or [])
        conditions = cond.set_condition(conditions, cond.READY, ready, reason, message, generation)
        if released is not None:
            conditions = cond.set_condition(conditions, cond.RELEASED, released, reason, message, generation)
        conditions = cond.remove_condition(conditions, cond.RECONCILING)
        if stalled:
            conditions = cond.set_condition(conditions, cond.STALLED, True, reason, message, generation)
        else:
            conditions = cond.remove_condition(conditions, cond.STALLED)
        return conditions

    @staticmethod
    def _history(secrets: list[dict[str, Any]]) -> list[dict[str, Any]]:
        ordered = sorted(secrets, key=lambda s: int((s["metadata"].get("labels") or {}).get("version", "0")),
                         reverse=True)
        return [storage.summary(s) for s in ordered[:HISTORY_KEPT]]

    async def _mark_reconciling(self, body: dict[str, Any], message: str) -> None:
        status = copy.deepcopy(body.get("status") or {})
        generation = body["metadata"].get("generation", 0)
        conditions = status.get("conditions") or []
        conditions = cond.set_condition(conditions, cond.RECONCILING, True, "Progressing", message, generation)
        if not cond.get_condition(conditions, cond.READY):
            conditions = cond.set_condition(conditions, cond.READY, False, "Progressing", message, generation)
        status["conditions"] = conditions
        # Not yet an outcome: `helmop reconcile` waits for lastHandledReconcileAt, so it is not set here.
        await self._write_status(body, status, outcome=False)

    async def _write_status(self, body: dict[str, Any], status: dict[str, Any], *, outcome: bool = True) -> None:
        if requested(body) and outcome:  # whatever the outcome, this request was handled (`helmop reconcile` waits)
            status = {**status, "lastHandledReconcileAt": requested(body)}
        if status == body.get("status"):
            return
        await write_status(self.ctx, HELMRELEASE, body, status)
        meta = body["metadata"]
        self.ctx.wake_referrers(meta["namespace"], "HelmRelease", meta["name"])  # apps mirror this status

    # --- bookkeeping -------------------------------------------------------------------------------

    def _next_backoff(self, key: Key) -> float:
        delay = min(RETRY_MAX, max(RETRY_MIN, self.ctx.backoff.get(key, RETRY_MIN / 2) * 2))
        self.ctx.backoff[key] = delay
        return delay

    def _remember_references(self, key: Key, spec: HelmReleaseSpec) -> None:
        namespace = key[1]
        targets = [(namespace, ref.kind, ref.name) for ref in spec.values_from]
        if isinstance(spec.chart, RepositoryChart) and spec.chart.secret_ref:
            targets.append((namespace, "Secret", spec.chart.secret_ref))
        if isinstance(spec.chart, SourceChart):
            targets.append((spec.chart.namespace or namespace, spec.chart.kind, spec.chart.name))
        self.ctx.refer(key, targets)
