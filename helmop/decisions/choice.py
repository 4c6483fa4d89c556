"""The second half of a HelmRelease's decision: the action for the state :func:`~.states.classify` named,
one small rule per state (:data:`CHOICES`); and the rule for when a turn ends (:func:`ends_turn`)."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

from helmop.api.actions import Action
from helmop.api.durations import go_duration

from .release import Decision, Desired, Observed, Reason
from .states import ReleaseStatus, State, classify, last_attempt

Choice = Callable[[State, Desired, Observed], Decision]


def decide(desired: Desired, observed: Observed) -> Decision:
    """The one action to take next: the state of the release, then the action for that state."""
    state = classify(desired, observed)
    return CHOICES[state.status](state, desired, observed)


def _absent(state: State, desired: Desired, _: Observed) -> Decision:
    if desired.deleting:
        return Decision(Action.NONE, Reason.RELEASE_ABSENT, state.reason)
    return Decision(Action.INSTALL, Reason.INSTALLING, f"{state.reason}; installing")


def _unmanaged(state: State, desired: Desired, _: Observed) -> Decision:
    """Left in place on deletion; refused otherwise."""
    return Decision(Action.NONE if desired.deleting else Action.REFUSE, Reason.OWNED_ELSEWHERE, state.reason)


def _retrying(state: State, desired: Desired, observed: Observed) -> Decision:
    """RetryOnFailure: the failed action again, as it is, once its interval has passed (a release that failed
    is upgraded, as Flux retries a failed install with an upgrade)."""
    release = observed.release
    if observed.retry_in > 0:
        interval = last_attempt(desired, observed).policy.retry_interval
        return Decision(Action.NONE, Reason.RETRYING, f"{state.reason}; retrying after {go_duration(interval)}")
    if release is None or release.status == "uninstalled":
        return Decision(Action.INSTALL, Reason.INSTALLING, f"{state.reason}; installing again (RetryOnFailure)")
    return Decision(Action.UPGRADE, Reason.UPGRADING,
                    f"{state.reason}; upgrading the {release.status} release again (RetryOnFailure)")


def _remediate(state: State, desired: Desired, observed: Observed) -> Decision:
    """A failed install is uninstalled; a failed upgrade rolled back to the last successful revision, or
    uninstalled (upgrade.remediation.strategy uninstall, or no such revision)."""
    attempt, release = last_attempt(desired, observed), observed.release
    assert release is not None  # a FAILED release is there
    if attempt.action is Action.INSTALL:
        return Decision(Action.UNINSTALL, Reason.INSTALL_REMEDIATION,
                        f"{state.reason}; uninstalling the failed install", remediation=True)
    if attempt.policy.strategy == "rollback" and release.last_good:
        return Decision(Action.ROLLBACK, Reason.UPGRADE_REMEDIATION,
                        f"{state.reason}; rolling back to revision {release.last_good}", remediation=True,
                        target_revision=release.last_good)
    return Decision(Action.UNINSTALL, Reason.UPGRADE_REMEDIATION, f"{state.reason}; uninstalling the failed release",
                    remediation=True)


def _rollback(state: State, _: Desired, observed: Observed) -> Decision:
    """A person's rollback: to the revision asked for, else the one deployed before (as `helm rollback`)."""
    asked, release = observed.control.rollback or observed.control.pin_request, observed.release
    assert asked is not None  # ROLLBACK_ASKED is of a request
    if release is None or release.status == "uninstalled" or asked is observed.control.pin_request:
        return Decision(Action.NONE, Reason.ROLLBACK_REQUESTED, state.reason, asked=asked)
    target = int(asked.revision) if asked.revision.isdigit() else release.last_good
    if not target:
        return Decision(Action.NONE, Reason.ROLLBACK_REQUESTED, f"{state.reason}: no revision to roll back to",
                        asked=asked)
    return Decision(Action.ROLLBACK, Reason.ROLLBACK_REQUESTED, state.reason, target_revision=target, asked=asked)


def _drifted(state: State, desired: Desired, observed: Observed) -> Decision:
    """Drift detection enabled: the drifted objects are re-applied; warn: only reported."""
    if desired.drift_mode == "enabled":
        return Decision(Action.CORRECT, Reason.DRIFT_DETECTED, state.reason, drifted=observed.drift)
    return Decision(Action.NONE, Reason.DRIFT_DETECTED, state.reason)


def _untested(_: State, __: Desired, observed: Observed) -> Decision:
    assert observed.release is not None  # an UNTESTED release is deployed
    return Decision(Action.TEST, Reason.TESTING, f"running the tests of revision {observed.release.revision}")


CHOICES: dict[ReleaseStatus, Choice] = {
    ReleaseStatus.SUSPENDED: lambda state, _, __: Decision(Action.NONE, Reason.SUSPENDED, state.reason),
    ReleaseStatus.ROLLBACK_ASKED: _rollback,
    ReleaseStatus.PIN_ASKED: lambda state, _, observed: Decision(
        Action.NONE, Reason.PINNED, state.reason, asked=observed.control.pin_request,
        target_revision=observed.release.revision if observed.release else 0),
    ReleaseStatus.PINNED: lambda state, _, __: Decision(Action.NONE, Reason.PINNED, state.reason),
    ReleaseStatus.AWAITING_APPROVAL: lambda state, _, __: Decision(Action.NONE, Reason.AWAITING_APPROVAL,
                                                                   state.reason),
    ReleaseStatus.OUTSIDE_WINDOW: lambda state, _, __: Decision(Action.NONE, Reason.OUTSIDE_WINDOW, state.reason),
    ReleaseStatus.ABSENT: _absent,
    ReleaseStatus.UNMANAGED: _unmanaged,
    ReleaseStatus.DELETING: lambda _, __, ___: Decision(Action.UNINSTALL, Reason.UNINSTALLING,
                                                        "uninstalling the release"),
    ReleaseStatus.LOCKED: lambda state, _, __: Decision(Action.UNLOCK, Reason.LOCKED,
                                                        f"{state.reason}; marking it failed so it can proceed"),
    ReleaseStatus.WAITING: lambda state, _, __: Decision(Action.NONE, Reason.DEPENDENCY_NOT_READY, state.reason),
    ReleaseStatus.RETRYING: _retrying,
    ReleaseStatus.FAILED: _remediate,
    ReleaseStatus.EXHAUSTED: lambda state, _, __: Decision(
        Action.STALL, Reason.RETRIES_EXCEEDED,
        f"{state.reason}; waiting for a change of spec or values; `helmop reconcile hr NAME --reset` (the "
        "helmop.dev/resetAt annotation) allows one more try"),
    ReleaseStatus.CHART_RENAMED: lambda state, _, __: Decision(
        Action.UNINSTALL, Reason.CHART_RENAMED,
        f"{state.reason}: uninstalling to install it anew (spec.upgrade.chartNameChangeStrategy Reinstall)"),
    ReleaseStatus.NEVER_DEPLOYED: lambda state, _, __: Decision(Action.INSTALL, Reason.INSTALLING,
                                                                f"{state.reason}; installing"),
    ReleaseStatus.FORCED: lambda state, _, __: Decision(Action.UPGRADE, Reason.UPGRADING, state.reason, force=True),
    ReleaseStatus.OUT_OF_SYNC: lambda state, _, observed: Decision(Action.UPGRADE, Reason.UPGRADING,
                                                                   f"{state.reason}; upgrading",
                                                                   force=observed.force_requested),
    ReleaseStatus.DRIFTED: _drifted,
    ReleaseStatus.UNTESTED: _untested,
    ReleaseStatus.IN_SYNC: lambda state, _, __: Decision(Action.NONE, Reason.UP_TO_DATE, state.reason),
}


class Stop(StrEnum):
    """Why a turn (the rounds of decide, act, observe again that one reconcile runs) ends with a decision."""

    SETTLED = "Settled"  # nothing to do: in sync, suspended, nothing to uninstall, drift only reported
    REFUSED = "Refused"  # the release is someone else's
    STALLED = "Stalled"  # retries used up: nothing until the spec or values change (or a reset)
    WAITING = "Waiting"  # for dependencies: looked at again after a while, or when one changes
    RETRY_LATER = "RetryLater"  # RetryOnFailure: tried again once the retryInterval has passed
    CLOSED = "Closed"  # a deployment window is closed: looked at again when it opens


def ends_turn(decision: Decision) -> Stop | None:
    """Why the turn ends with ``decision`` (None: its action runs, then the release is observed and decided
    on again). A failed action ends the turn too; helm-controller's loop stops after a remediation, helmop's
    goes on with the repaired release."""
    if decision.action is Action.STALL:
        return Stop.STALLED
    if decision.action is Action.REFUSE:
        return Stop.REFUSED
    if decision.action is not Action.NONE:
        return None
    if decision.reason is Reason.DEPENDENCY_NOT_READY:
        return Stop.WAITING
    if decision.reason is Reason.OUTSIDE_WINDOW:
        return Stop.CLOSED
    return Stop.RETRY_LATER if decision.reason is Reason.RETRYING else Stop.SETTLED
