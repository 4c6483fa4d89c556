"""The first half of a HelmRelease's decision: which state the release is in, named, with its reason.

As Flux's helm-controller determines a release's state before it picks an action, :func:`classify` compares
what the spec asks for with what is there and names one :class:`ReleaseStatus`; :mod:`.choice` then maps the
state to the action. The checks run in order of precedence (docs/guides/helmrelease.md, "When things fail"):
the HelmRelease's own situation (deleted, suspended, waiting for dependencies) and whose release it is come
first, then the last failed attempt, then how the release differs from what is asked for.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from helmop.api.actions import Action
from helmop.api.helmrelease import Remediation

from .release import Desired, Observed, Release


class ReleaseStatus(StrEnum):
    """The state of a release as the HelmRelease sees it (the names follow helm-controller's where they mean
    the same)."""

    SUSPENDED = "Suspended"  # reconciliation is suspended: nothing is done, whatever the release
    ROLLBACK_ASKED = "RollbackRequested"  # a person asked for a rollback (then the release is pinned)
    PIN_ASKED = "PinRequested"  # a person asked to hold the release where it is
    PINNED = "Pinned"  # held by a person until the desired state moves on (drift toward it is still corrected)
    AWAITING_APPROVAL = "AwaitingApproval"  # a change waits for `helmop approve` (spec.approval.required)
    OUTSIDE_WINDOW = "OutsideWindow"  # a change waits for a deployment window to open
    ABSENT = "Absent"  # no release (or only an uninstalled one)
    UNMANAGED = "Unmanaged"  # a release this HelmRelease did not install
    DELETING = "Deleting"  # the HelmRelease is being deleted and its release is there
    LOCKED = "Locked"  # stuck pending-*
    WAITING = "Waiting"  # a dependency (spec.dependsOn) is not Ready
    RETRYING = "Retrying"  # the last attempt with this configuration failed; strategy RetryOnFailure
    FAILED = "Failed"  # the last attempt with this configuration left a failed release, to remediate
    EXHAUSTED = "RetriesExhausted"  # the last attempt with this configuration failed and no retries are left
    CHART_RENAMED = "ChartRenamed"  # the release runs a chart of another name (chartNameChangeStrategy Reinstall)
    NEVER_DEPLOYED = "NeverDeployed"  # no revision of the release was ever deployed successfully
    FORCED = "ForceRequested"  # helmop.dev/forceAt asks for an upgrade of a release with this configuration
    OUT_OF_SYNC = "OutOfSync"  # the configuration changed, or the release is not deployed
    DRIFTED = "Drifted"  # deployed as asked, but live objects differ from it (drift detection enabled or warn)
    UNTESTED = "Untested"  # deployed as asked; the tests are enabled and have not run
    IN_SYNC = "InSync"  # deployed as asked


@dataclass(frozen=True)
class State:
    status: ReleaseStatus
    reason: str  # for people; the decision's message starts with it


@dataclass(frozen=True)
class Attempt:
    """The last install or upgrade, as far as it bears on this configuration."""

    action: Action
    policy: Remediation  # spec.install or spec.upgrade's, after the action attempted
    failures: int  # with this configuration (0 after a change of spec or values, or a reset)

    @property
    def failed(self) -> str:
        return f"{self.action.value} failed ({self.failures}x)"


def last_attempt(desired: Desired, observed: Observed) -> Attempt:
    same = observed.last_attempted_digest == desired.config_digest and not observed.reset_requested
    installing = observed.last_action is Action.INSTALL
    failures = (observed.install_failures if installing else observed.upgrade_failures) if same else 0
    return Attempt(observed.last_action, desired.install if installing else desired.upgrade, failures)


def classify(desired: Desired, observed: Observed) -> State:
    """The state of the release, by the first rule that applies."""
    release = observed.release
    present = release if release is not None and release.status != "uninstalled" else None
    if desired.deleting:
        return _on_deletion(desired, present)
    if desired.suspended:
        return State(ReleaseStatus.SUSPENDED, "reconciliation is suspended")
    if present is not None and not _ours(desired, present):
        return State(ReleaseStatus.UNMANAGED, "a release with this name exists and was not installed by this "
                                              "HelmRelease; helmop will not take it over")
    if present is not None and present.pending:
        return State(ReleaseStatus.LOCKED, f"release is stuck in {present.status}")
    held = _held(observed, present)
    if held is not None:
        return held
    if desired.waiting_for:
        return State(ReleaseStatus.WAITING,
                     f"waiting for {', '.join(desired.waiting_for)} to be Ready (spec.dependsOn)")
    failed = _after_failure(last_attempt(desired, observed), present)
    if failed is not None:
        return _gated(failed, desired, observed)
    if present is None:
        return _gated(State(ReleaseStatus.ABSENT, "release not found"), desired, observed)
    return _gated(_against_spec(desired, observed, present), desired, observed)


CHANGES = (ReleaseStatus.ABSENT, ReleaseStatus.NEVER_DEPLOYED, ReleaseStatus.OUT_OF_SYNC, ReleaseStatus.FORCED,
           ReleaseStatus.CHART_RENAMED, ReleaseStatus.RETRYING)  # states whose action moves toward the spec


def _held(observed: Observed, present: Release | None) -> State | None:
    """A person's hold on the release: a rollback or pin asked for, or a pin in force (whose drift from the
    pinned revision is still looked for, and corrected as drift detection says)."""
    control = observed.control
    if present is None:
        if control.rollback is None and control.pin_request is None:
            return None
        return State(ReleaseStatus.ROLLBACK_ASKED, "nothing to roll back or pin: the release is not installed")
    if control.rollback is not None:
        to = control.rollback.revision or (str(present.last_good) if present.last_good else "")
        return State(ReleaseStatus.ROLLBACK_ASKED, f"rollback to revision {to or '(none deployed before)'} asked "
                                                   f"{control.rollback.said()}")
    if control.pin_request is not None:
        return State(ReleaseStatus.PIN_ASKED, f"pinned at revision {present.revision} {control.pin_request.said()}")
    if control.pin is None:
        return None
    if observed.drift:
        return State(ReleaseStatus.DRIFTED, "drift from the pinned revision: " + "; ".join(observed.drift))
    pin = control.pin
    return State(ReleaseStatus.PINNED, f"pinned at revision {pin.revision} by {pin.by or 'someone unknown'} at "
                                       f"{pin.at}" + (f": {pin.reason}" if pin.reason else "")
                 + "; it holds until the desired state changes or `helmop unpin`")


def _gated(state: State, desired: Desired, observed: Observed) -> State:
    """A change toward the spec waits for its approval, then for a deployment window (remediation of a failed
    attempt, drift correction and tests go at any time: they restore or check what was let through)."""
    if state.status not in CHANGES:
        return state
    control = observed.control
    if not control.approved:
        return State(ReleaseStatus.AWAITING_APPROVAL, f"{state.reason}; revision {desired.digest} awaits approval "
                                                      "(`helmop approve`)")
    if control.window:
        return State(ReleaseStatus.OUTSIDE_WINDOW, f"{state.reason}; {control.window}")
    return state


def drift_matters(desired: Desired, observed: Observed) -> bool:
    """Whether the live objects are worth comparing with the release before deciding: drift detection is
    on and the release is deployed by this HelmRelease with the desired configuration (where
    :func:`classify` looks at drift). The comparison costs API reads, so a reconcile makes it only then;
    it then decides once, with the drift it found."""
    release = observed.release
    pinned = observed.control.pin is not None and observed.control.rollback is None
    return (desired.drift_mode != "disabled" and not (desired.deleting or desired.suspended or desired.waiting_for)
            and release is not None and release.owner == desired.owner and release.status == "deployed"
            and (pinned or (release.digest == desired.config_digest and not observed.force_requested)))


def _ours(desired: Desired, release: Release) -> bool:
    """Installed by this HelmRelease; or by no helmop HelmRelease, for one of Flux's kinds, which take such a
    release over as Flux does (a cluster moving from Flux keeps its releases)."""
    return release.owner == desired.owner or (desired.adopts and not release.owner)


def _on_deletion(desired: Desired, present: Release | None) -> State:
    """A suspended HelmRelease leaves its release; only a release of its own is uninstalled."""
    if desired.suspended:
        return State(ReleaseStatus.SUSPENDED, "suspended: the release is left in place")
    if present is None:
        return State(ReleaseStatus.ABSENT, "no release to uninstall")
    if not _ours(desired, present):
        return State(ReleaseStatus.UNMANAGED, "the release was not installed by this HelmRelease; it is left in place")
    return State(ReleaseStatus.DELETING, "the HelmRelease is being deleted")


def _after_failure(attempt: Attempt, present: Release | None) -> State | None:
    """The state the last failed attempt with this configuration leaves (None: it did not fail, or it left
    nothing to act on). RetryOnFailure tries again, remediating nothing; else a failed release (or failed
    tests not ignored) is remediated while retries are left (or ``remediateLastFailure`` says so); with no
    retries left, the release stalls."""
    policy, failures = attempt.policy, attempt.failures
    if not failures:
        return None
    if policy.retry:
        return State(ReleaseStatus.RETRYING, attempt.failed)
    if present is not None and _failed(present, policy) and (
            not policy.exhausted(failures) or policy.remediate_last_failure):
        return State(ReleaseStatus.FAILED, attempt.failed)
    if policy.exhausted(failures):
        return State(ReleaseStatus.EXHAUSTED, f"{attempt.action.value} failed {failures} time(s) with this "
                                              "configuration and no retries are left")
    return None


def _failed(release: Release, policy: Remediation) -> bool:
    return release.status == "failed" or (release.tests == "failed" and not policy.ignore_test_failures)


def _against_spec(desired: Desired, observed: Observed, release: Release) -> State:
    """How a release of this HelmRelease's, neither locked nor failed in the last attempt, compares with the
    spec."""
    if _renamed(desired, release) and desired.reinstall_on_rename:
        return State(ReleaseStatus.CHART_RENAMED,
                     f"the chart is now {desired.chart_name}, the release runs {release.chart_name}")
    if release.status == "deployed" and release.digest == desired.config_digest and not observed.force_requested:
        return _deployed(desired, observed, release)
    if not release.last_good and release.status != "deployed":
        return State(ReleaseStatus.NEVER_DEPLOYED, f"release is {release.status} and was never deployed")
    if observed.force_requested and release.digest == desired.config_digest:
        return State(ReleaseStatus.FORCED, "a forced upgrade was asked for (helmop.dev/forceAt)")
    why = "configuration changed" if release.status == "deployed" else f"release is {release.status}"
    return State(ReleaseStatus.OUT_OF_SYNC, why)


def _renamed(desired: Desired, release: Release) -> bool:
    """The chart's name changed (both names known)."""
    return bool(release.chart_name and desired.chart_name and release.chart_name != desired.chart_name)


def _deployed(desired: Desired, observed: Observed, release: Release) -> State:
    """A release deployed with the desired configuration: drift (where detection is on), then the tests."""
    if observed.drift and desired.drift_mode in ("enabled", "warn"):
        return State(ReleaseStatus.DRIFTED, "drift: " + "; ".join(observed.drift))
    if desired.tests and not release.tests:
        return State(ReleaseStatus.UNTESTED, f"revision {release.revision} has not been tested")
    return State(ReleaseStatus.IN_SYNC, f"release is deployed at revision {release.revision}")
