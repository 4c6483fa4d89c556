"""How a HelmRelease's status changes: after each action (:func:`settle`), after a decision that runs
nothing (:func:`terminal`), and when the spec or its inputs are refused (:func:`refused`). Pure: what an
action did comes in as an :class:`ActionResult`, what the reconcile works towards as ``Desired``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from helmop.api.actions import Action
from helmop.api.conditions import DRIFTED, READY, RECONCILING, RELEASED, REMEDIATED, STALLED, TEST_SUCCESS
from helmop.api.durations import go_duration
from helmop.api.status.helmrelease import HelmReleaseStatus, Inventory, ReadinessCheck, Snapshot
from helmop.decisions import Decision, Desired, Reason
from helmop.decisions.changecontrol import handled, pinned

from . import outcome

Status = HelmReleaseStatus


@dataclass(frozen=True)
class ActionResult:
    """What an action did, as far as status records it."""

    ok: bool
    reason: str  # the Event and condition reason, such as UpgradeSucceeded or TestFailed
    message: str  # for people; secret values already masked
    transient: bool = False  # failed, but not because of the configuration (retry with backoff)
    cancelled: bool = False  # stopped for a newer revision of the spec or values
    history: tuple[Snapshot, ...] = ()  # release revisions after the action (empty: not read)
    inventory: Inventory | None = None  # the objects of the release after the action (None: unknown)
    readiness: ReadinessCheck | None = None  # who judged an install or upgrade ready, and why


def settle(status: Status, desired: Desired, decision: Decision, result: ActionResult) -> Status:
    """The status after ``decision``'s action ended with ``result``."""
    out = _begin(status, desired)
    if result.history:
        out = out.but(history=result.history)
    if result.inventory is not None:
        out = out.but(inventory=result.inventory)
    action = decision.action
    if result.cancelled:
        return out.with_condition(READY, False, result.reason, result.message, desired.generation)
    if action in (Action.INSTALL, Action.UPGRADE):
        return _deployed(out, desired, decision, action, result)
    if action is Action.TEST:
        return _tested(out, desired, result)
    if action is Action.ROLLBACK and decision.asked is not None:
        return _rolled_back(out, desired, decision, result)
    if action is Action.ROLLBACK:
        out = _set(out, desired, READY, False, result)
        return _set(out, desired, REMEDIATED, True, result) if result.ok else out
    if action is Action.UNINSTALL:
        out = _set(out, desired, READY, False, result)
        return _set(out, desired, REMEDIATED, True, result) if result.ok and decision.remediation else out
    if action is Action.CORRECT:
        return _set(out, desired, DRIFTED, not result.ok, result)
    return out  # UNLOCK: helm's record changed, the status did not


def terminal(status: Status, desired: Desired, decision: Decision, history: Callable[[], tuple[Snapshot, ...]],
             inventory: Inventory | None) -> Status | None:
    """The status for a decision that runs nothing (None: nothing to record). ``history`` gives the release's
    revisions as read (asked only when the status lacks them: decoding every record is not free, and an
    up-to-date release is the common case); ``inventory`` its objects, when the status has none yet."""
    generation = desired.generation
    if decision.action is Action.REFUSE:
        return refused(status, generation, decision.reason, decision.message, stalled=True)
    out = _begin(status, desired)
    if decision.action is Action.STALL:
        ready = out.condition(READY)
        if ready is None or ready.true:  # else Ready keeps the reason of the last failure
            out = out.with_condition(READY, False, decision.reason, decision.message, generation)
        return out.with_condition(STALLED, True, decision.reason, decision.message, generation)
    if decision.reason in HELD:
        return _held(out, desired, decision)
    if decision.reason is Reason.DEPENDENCY_NOT_READY:
        return out.with_condition(READY, False, decision.reason, decision.message, generation).without(STALLED)
    if decision.reason is Reason.RETRYING:  # Ready keeps the failure's reason; never stalled
        return out.with_condition(RECONCILING, True, decision.reason, decision.message, generation).without(STALLED)
    if decision.reason is Reason.DRIFT_DETECTED:  # warn mode: report, change nothing
        return out.with_condition(DRIFTED, True, decision.reason, decision.message, generation)
    if decision.reason is not Reason.UP_TO_DATE:
        return None
    if out.is_true(DRIFTED):
        out = out.with_condition(DRIFTED, False, "NoDrift", "the live objects match the release", generation)
    ready = out.condition(READY)
    if not (ready is not None and ready.true and ready.reason not in HELD
            and out.last_attempted_config_digest == desired.digest):
        # deployed as wanted, but the status does not say so yet (e.g. after a restart, a remediation or a pin)
        message = f"Release {desired.release} is deployed with chart {desired.chart} ({decision.message})"
        out = out.but(last_applied_revision=desired.chart_version, last_attempted_config_digest=desired.digest,
                      history=history())
        for kind in (READY, RELEASED):
            out = out.with_condition(kind, True, "UpToDate", message, generation)
        out = out.without(STALLED)
    if out.inventory is None and inventory is not None:  # a release installed before inventories were kept
        out = out.but(inventory=inventory)
    return out


def refused(status: Status, generation: int, reason: str, message: str, *, stalled: bool) -> Status:
    """Not Ready for a reason found before any action: the spec, its inputs, helm's records."""
    return outcome(status, generation, False, reason, message, stalled=stalled)


def _begin(status: Status, desired: Desired) -> Status:
    return status.but(observed_generation=desired.generation, pending_revision="").without(RECONCILING)


HELD = (Reason.PINNED, Reason.ROLLBACK_REQUESTED, Reason.AWAITING_APPROVAL, Reason.OUTSIDE_WINDOW)


def _held(status: Status, desired: Desired, decision: Decision) -> Status:
    """A person's hold: pinned (Ready, and a pin asked for set), a rollback with nowhere to go (asked, and
    said), a change awaiting approval or a deployment window (not Ready: what runs is not what is asked for)."""
    generation, reason = desired.generation, decision.reason
    asked = decision.asked
    if reason is Reason.PINNED and asked is not None:
        status = pinned(status, asked, str(decision.target_revision), desired.digest)
    elif asked is not None:  # a rollback to no revision: handled, nothing to pin
        status = handled(status, asked)
    if reason in (Reason.AWAITING_APPROVAL, Reason.OUTSIDE_WINDOW):
        status = status.but(pending_revision=desired.digest)
    ready = reason is Reason.PINNED
    return status.with_condition(READY, ready, reason, decision.message, generation).without(STALLED)


def _rolled_back(status: Status, desired: Desired, decision: Decision, result: ActionResult) -> Status:
    """A rollback a person asked for: the release pinned at the revision it made (Ready says Pinned once the
    next round finds it held); a failed one is handled too (not tried again), and said in Ready."""
    assert decision.asked is not None
    if not result.ok:
        return _set(handled(status, decision.asked), desired, READY, False, result)
    revision = str(result.history[0].revision) if result.history else str(decision.target_revision)
    out = pinned(status, decision.asked, revision, desired.digest)
    return _set(out, desired, READY, True, result).without(STALLED, REMEDIATED)


def _set(status: Status, desired: Desired, kind: str, ok: bool, result: ActionResult, message: str = "") -> Status:
    return status.with_condition(kind, ok, result.reason, message or result.message, desired.generation)


def _attempted(status: Status, desired: Desired, decision: Decision, action: Action) -> Status:
    """An install/upgrade attempt of the desired configuration recorded. Failures count afresh for a new
    configuration, or when a new helmop.dev/resetAt asks for it; a forceAt acted on is handled."""
    reset = desired.reset_at
    fresh = status.last_attempted_config_digest != desired.digest or (
        bool(reset) and reset != status.last_handled_reset_at)
    out = status.but(last_attempted_generation=desired.generation, last_attempted_revision=desired.chart_version,
                     last_attempted_config_digest=desired.digest, last_attempted_release_action=action.value,
                     release_name=desired.release_name)
    if fresh:
        out = out.but(install_failures=0, upgrade_failures=0)
    if reset:
        out = out.but(last_handled_reset_at=reset)
    if decision.force and desired.force_at:
        out = out.but(last_handled_force_at=desired.force_at)
    return out


def _failed_once_more(status: Status, action: Action) -> Status:
    if action is Action.INSTALL:
        return status.but(install_failures=status.install_failures + 1)
    return status.but(upgrade_failures=status.upgrade_failures + 1)


def _deployed(status: Status, desired: Desired, decision: Decision, action: Action, result: ActionResult) -> Status:
    out = _attempted(status, desired, decision, action)
    if result.readiness is not None:
        out = out.but(readiness_check=result.readiness)
    policy = desired.install if action is Action.INSTALL else desired.upgrade
    if result.ok:
        # with RetryOnFailure failures count only while the release is failed (Flux): both counts are cleared
        cleared = ("install_failures", "upgrade_failures") if policy.retry else (f"{action.value}_failures",)
        out = out.but(last_applied_revision=desired.chart_version, **dict.fromkeys(cleared, 0))
        for kind in (RELEASED, READY):
            out = _set(out, desired, kind, True, result)
        # a new revision: its tests have not run, and nothing needed remediating
        return out.without(REMEDIATED, TEST_SUCCESS, STALLED)
    if not result.transient:
        out = _failed_once_more(out, action)
    for kind in (RELEASED, READY):
        out = _set(out, desired, kind, False, result)
    if policy.retry and not result.transient:
        return out.with_condition(RECONCILING, True, Reason.RETRYING,
                                  f"retrying after {go_duration(policy.retry_interval)}", desired.generation)
    # Whether retries are left is decisions.decide's to say (Stalled RetriesExceeded), on the next round.
    return out


def _tested(status: Status, desired: Desired, result: ActionResult) -> Status:
    out = _set(status, desired, TEST_SUCCESS, result.ok, result)
    action = Action.deploy(status.last_attempted_release_action)
    policy = desired.install if action is Action.INSTALL else desired.upgrade
    if result.ok or policy.ignore_test_failures:
        message = result.message if result.ok else f"{result.message} (test failures are ignored)"
        return _set(out, desired, READY, True, result, message)
    if not result.transient:
        out = _failed_once_more(out, action)
    # Whether retries are left is decisions.decide's to say (Stalled RetriesExceeded), on the next round.
    return _set(out, desired, READY, False, result)
