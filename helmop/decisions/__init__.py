"""The decision at the heart of a reconcile, as a pure function of plain data.

Given what the spec asks for (:class:`Desired`) and what is there (:class:`Observed`: the release
records from helm's storage and the last attempt from status), :func:`decide` returns exactly one
:class:`Action`, in the spirit of Flux's small atomic actions. No I/O happens here, so every rule is
unit-testable; the controllers gather the inputs, carry the action out, observe again and ask again
until the answer is "nothing to do" (or an action failed).

The rules, in order (docs/guides/helmrelease.md, "When things fail", says the same in words):

1. Deleting: uninstall the release if it is there and ours (a suspended HelmRelease leaves it).
2. Suspended: nothing. Someone else's release: refuse (a Flux HelmRelease adopts one that no helmop
   HelmRelease installed, as Flux does). A release stuck ``pending-*``: unlock it.
   A dependency (spec.dependsOn) not Ready: wait, running nothing.
3. The last attempt with this very configuration failed. With the strategy RetryOnFailure: tried again
   as it is once its retryInterval has passed (a failed release is upgraded; nothing is remediated and
   nothing stalls). Otherwise, when it left a failed release (or failed tests that are not ignored):
   remediate it — a failed install is uninstalled, a failed upgrade rolled back to the last successful
   revision (or uninstalled) — unless the retries are used up and the last failure is not to be remediated.
4. Retries used up for this configuration: stalled (``RetriesExceeded``) until the spec or values
   change, or ``helmop.dev/resetAt`` asks for a fresh count.
5. No release: install. A deployed release of a chart of another name is uninstalled first
   (upgrade.chartNameChangeStrategy Reinstall, Flux's default). A release never deployed successfully
   is installed again, not upgraded.
6. Deployed with this configuration: objects that drifted from it are re-applied (driftDetection
   enabled; warn only reports them); the tests run if they are enabled and have not run; else
   nothing (``helmop.dev/forceAt`` asks for one forced upgrade all the same).
7. Otherwise: upgrade.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from helmop.api.actions import Action
from helmop.api.durations import go_duration
from helmop.api.helmrelease import Remediation


class Reason(StrEnum):
    """Why a decision was made: the condition and Event reason it leads to."""

    SUSPENDED = "Suspended"
    RELEASE_ABSENT = "ReleaseAbsent"
    OWNED_ELSEWHERE = "ReleaseOwnedElsewhere"
    UNINSTALLING = "Uninstalling"
    LOCKED = "ReleaseLocked"
    DEPENDENCY_NOT_READY = "DependencyNotReady"
    RETRYING = "ProgressingWithRetry"
    CHART_RENAMED = "ChartNameChanged"
    INSTALL_REMEDIATION = "InstallRemediation"
    UPGRADE_REMEDIATION = "UpgradeRemediation"
    RETRIES_EXCEEDED = "RetriesExceeded"
    INSTALLING = "Installing"
    UPGRADING = "Upgrading"
    TESTING = "Testing"
    DRIFT_DETECTED = "DriftDetected"
    UP_TO_DATE = "UpToDate"


@dataclass(frozen=True)
class Release:
    """The newest revision of the release as helm's storage records it."""

    status: str
    owner: str
    digest: str  # the config digest label helmop put on it ("" if none)
    revision: int
    last_good: int = 0  # the newest earlier revision that was deployed successfully (0: none)
    tests: str = ""  # of this revision: "" (not run), "passed" or "failed"
    chart_name: str = ""  # of this revision's chart

    @property
    def pending(self) -> bool:
        return self.status.startswith("pending-")


@dataclass(frozen=True)
class Desired:
    """What the spec and its inputs ask for; the status fields a reconcile records come from here too."""

    config_digest: str  # digest label form (see helm.releases.digest_token)
    owner: str
    # a release no helmop HelmRelease installed (no owner label) counts as this one's: Flux's kinds take an
    # existing release over as Flux does (a cluster moving from Flux keeps its releases)
    adopts: bool = False
    generation: int = 0  # of the spec
    digest: str = ""  # the full configuration digest (status form)
    chart_version: str = ""
    chart: str = ""  # name@version, for people
    release: str = ""  # namespace/name of the helm release, for people
    release_name: str = ""
    reset_at: str = ""  # helmop.dev/resetAt, as it is now
    force_at: str = ""  # helmop.dev/forceAt
    suspended: bool = False
    deleting: bool = False
    install: Remediation = field(default_factory=Remediation)
    upgrade: Remediation = field(default_factory=Remediation)
    tests: bool = False
    waiting_for: tuple[str, ...] = ()  # dependencies (namespace/name) not Ready for their current generation
    drift_mode: str = "disabled"  # enabled | warn | disabled
    chart_name: str = ""
    reinstall_on_rename: bool = True  # upgrade.chartNameChangeStrategy Reinstall (InPlaceUpdate: upgraded)


@dataclass(frozen=True)
class Observed:
    release: Release | None
    last_attempted_digest: str = ""  # label form, from status
    last_action: Action = Action.INSTALL  # lastAttemptedReleaseAction (install when nothing was attempted)
    install_failures: int = 0  # with last_attempted_digest
    upgrade_failures: int = 0
    reset_requested: bool = False  # a new helmop.dev/resetAt: count failures afresh
    force_requested: bool = False  # a new helmop.dev/forceAt: one forced upgrade
    drift: tuple[str, ...] = ()  # objects and fields that differ from the release ("Kind/name: /path")
    retry_in: float = 0.0  # RetryOnFailure: seconds until the failed action may be tried again


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: Reason
    message: str
    remediation: bool = False  # the action repairs a failed release (condition Remediated)
    target_revision: int = 0  # ROLLBACK: the revision to go back to
    force: bool = False  # UPGRADE: asked for by forceAt
    drifted: tuple[str, ...] = ()  # CORRECT: the drifted objects, "Kind/name: what differs"


def drift_matters(desired: Desired, observed: Observed) -> bool:
    """Whether the live objects are worth comparing with the release before deciding: drift detection is
    on and the release is deployed by this HelmRelease with the desired configuration (where rule 6 is
    reached). The comparison costs API reads, so a reconcile makes it only then; :func:`decide` then
    decides once, with the drift it found."""
    release = observed.release
    return (desired.drift_mode != "disabled" and not (desired.deleting or desired.suspended or desired.waiting_for)
            and release is not None and release.owner == desired.owner and release.status == "deployed"
            and release.digest == desired.config_digest and not observed.force_requested)


def _remediate(last_action: Action, policy: Remediation, release: Release, why: str) -> Decision:
    if last_action is Action.INSTALL:
        return Decision(Action.UNINSTALL, Reason.INSTALL_REMEDIATION, f"{why}; uninstalling the failed install",
                        remediation=True)
    if policy.strategy == "rollback" and release.last_good:
        return Decision(Action.ROLLBACK, Reason.UPGRADE_REMEDIATION,
                        f"{why}; rolling back to revision {release.last_good}", remediation=True,
                        target_revision=release.last_good)
    return Decision(Action.UNINSTALL, Reason.UPGRADE_REMEDIATION, f"{why}; uninstalling the failed release",
                    remediation=True)


def _retry(verb: str, failures: int, policy: Remediation, release: Release | None, retry_in: float) -> Decision:
    """RetryOnFailure: the failed action again, as it is, once its interval has passed (a release that failed
    is upgraded, as Flux retries a failed install with an upgrade)."""
    if retry_in > 0:
        return Decision(Action.NONE, Reason.RETRYING, f"{verb} failed ({failures}x); retrying after "
                                                      f"{go_duration(policy.retry_interval)}")
    if release is None:
        return Decision(Action.INSTALL, Reason.INSTALLING, f"{verb} failed ({failures}x); installing again "
                                                           "(RetryOnFailure)")
    return Decision(Action.UPGRADE, Reason.UPGRADING, f"{verb} failed ({failures}x); upgrading the {release.status} "
                                                      f"release again (RetryOnFailure)")


def decide(desired: Desired, observed: Observed) -> Decision:
    release = observed.release
    present = release is not None and release.status != "uninstalled"
    ours = present and release is not None and (release.owner == desired.owner
                                                or (desired.adopts and not release.owner))
    if desired.deleting:
        if desired.suspended:
            return Decision(Action.NONE, Reason.SUSPENDED, "suspended: the release is left in place")
        if not present:
            return Decision(Action.NONE, Reason.RELEASE_ABSENT, "no release to uninstall")
        if not ours:
            return Decision(Action.NONE, Reason.OWNED_ELSEWHERE, "the release was not installed by this "
                                                                  "HelmRelease; it is left in place")
        return Decision(Action.UNINSTALL, Reason.UNINSTALLING, "uninstalling the release")
    if desired.suspended:
        return Decision(Action.NONE, Reason.SUSPENDED, "reconciliation is suspended")
    if present and not ours:
        return Decision(Action.REFUSE, Reason.OWNED_ELSEWHERE,
                        "a release with this name exists and was not installed by this HelmRelease; "
                        "helmop will not take it over")
    if present and release is not None and release.pending:
        return Decision(Action.UNLOCK, Reason.LOCKED, f"release is stuck in {release.status}; "
                                                        "marking it failed so it can proceed")
    if desired.waiting_for:
        return Decision(Action.NONE, Reason.DEPENDENCY_NOT_READY,
                        f"waiting for {', '.join(desired.waiting_for)} to be Ready (spec.dependsOn)")
    same = observed.last_attempted_digest == desired.config_digest and not observed.reset_requested
    installing = observed.last_action is Action.INSTALL
    policy = desired.install if installing else desired.upgrade
    failures = (observed.install_failures if installing else observed.upgrade_failures) if same else 0
    verb = observed.last_action.value
    if failures and policy.retry:
        return _retry(verb, failures, policy, release if present else None, observed.retry_in)
    if failures and present and release is not None:
        failed = release.status == "failed" or (release.tests == "failed" and not policy.ignore_test_failures)
        if failed and (not policy.exhausted(failures) or policy.remediate_last_failure):
            return _remediate(observed.last_action, policy, release, f"{verb} failed ({failures}x)")
    if failures and policy.exhausted(failures):
        return Decision(Action.STALL, Reason.RETRIES_EXCEEDED,
                        f"{verb} failed {failures} time(s) with this configuration and no retries are left; "
                        "waiting for a change of spec or values; `helmop reconcile hr NAME --reset` (the "
                        "helmop.dev/resetAt annotation) allows one more try")
    if (present and release is not None and release.chart_name and desired.chart_name
            and release.chart_name != desired.chart_name and desired.reinstall_on_rename):
        return Decision(Action.UNINSTALL, Reason.CHART_RENAMED,
                        f"the chart is now {desired.chart_name}, the release runs {release.chart_name}: uninstalling "
                        "to install it anew (spec.upgrade.chartNameChangeStrategy Reinstall)")
    if not present or release is None:
        return Decision(Action.INSTALL, Reason.INSTALLING, "release not found; installing")
    if release.status == "deployed" and release.digest == desired.config_digest and not observed.force_requested:
        if observed.drift and desired.drift_mode == "enabled":
            return Decision(Action.CORRECT, Reason.DRIFT_DETECTED, "drift: " + "; ".join(observed.drift),
                            drifted=observed.drift)
        if observed.drift and desired.drift_mode == "warn":
            return Decision(Action.NONE, Reason.DRIFT_DETECTED, "drift: " + "; ".join(observed.drift))
        if desired.tests and not release.tests:
            return Decision(Action.TEST, Reason.TESTING, f"running the tests of revision {release.revision}")
        return Decision(Action.NONE, Reason.UP_TO_DATE, f"release is deployed at revision {release.revision}")
    if not release.last_good and release.status != "deployed":
        return Decision(Action.INSTALL, Reason.INSTALLING, f"release is {release.status} and was never deployed; "
                                                      "installing")
    if observed.force_requested and release.digest == desired.config_digest:
        return Decision(Action.UPGRADE, Reason.UPGRADING, "a forced upgrade was asked for (helmop.dev/forceAt)",
                        force=True)
    why = "configuration changed" if release.status == "deployed" else f"release is {release.status}"
    return Decision(Action.UPGRADE, Reason.UPGRADING, f"{why}; upgrading", force=observed.force_requested)
