"""What a HelmRelease's decision reads and returns, as plain data: what the spec asks for (:class:`Desired`),
what is there (:class:`Observed`: helm's newest record of the release and the last attempt from status), and
the one action chosen (:class:`Decision`) with its :class:`Reason`."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from helmop.api.actions import Action
from helmop.api.helmrelease import Remediation
from helmop.api.requests import Request

from .changecontrol import Control


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
    PINNED = "Pinned"
    ROLLBACK_REQUESTED = "RollbackRequested"
    AWAITING_APPROVAL = "AwaitingApproval"
    OUTSIDE_WINDOW = "OutsideWindow"


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
    control: Control = field(default_factory=Control)  # pins, requests, approval and windows


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: Reason
    message: str
    remediation: bool = False  # the action repairs a failed release (condition Remediated)
    target_revision: int = 0  # ROLLBACK: the revision to go back to
    force: bool = False  # UPGRADE: asked for by forceAt
    drifted: tuple[str, ...] = ()  # CORRECT: the drifted objects, "Kind/name: what differs"
    asked: Request | None = None  # the person's request this decision carries out (a rollback, a pin)
