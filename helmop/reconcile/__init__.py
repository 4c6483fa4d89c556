"""The decision at the heart of a reconcile, as a pure function of plain data.

Given what the spec asks for (:class:`Desired`) and what is there (:class:`Observed`: the release
record from helm's storage and the last attempt from status), :func:`decide` returns exactly one
:class:`Action`, in the spirit of Flux's small atomic actions. No I/O happens here, so every rule is
unit-testable; the controllers gather the inputs and carry the action out.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Action(Enum):
    NONE = "none"
    INSTALL = "install"
    UPGRADE = "upgrade"
    UNINSTALL = "uninstall"
    UNLOCK = "unlock"  # mark a release stuck in pending-* as failed, then decide again
    REFUSE = "refuse"  # the release belongs to someone else


@dataclass(frozen=True)
class Release:
    """The newest revision of the release as helm's storage records it."""

    status: str
    owner: str
    digest: str  # the config digest label helmop put on it ("" if none)
    revision: int

    @property
    def pending(self) -> bool:
        return self.status.startswith("pending-")


@dataclass(frozen=True)
class Desired:
    config_digest: str  # digest label form (see helm.storage.digest_token)
    owner: str
    suspended: bool = False
    deleting: bool = False
    install_retries: int = 0
    upgrade_retries: int = 0


@dataclass(frozen=True)
class Observed:
    release: Release | None
    last_attempted_digest: str = ""  # label form, from status
    failures: int = 0  # consecutive failures with last_attempted_digest
    retry_requested: bool = False  # a new helmop.dev/requestedAt value since the last attempt


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str
    message: str


def decide(desired: Desired, observed: Observed) -> Decision:
    release = observed.release
    present = release is not None and release.status != "uninstalled"
    ours = present and release is not None and release.owner == desired.owner
    if desired.deleting:
        if desired.suspended:
            return Decision(Action.NONE, "Suspended", "suspended: the release is left in place")
        if not present:
            return Decision(Action.NONE, "ReleaseAbsent", "no release to uninstall")
        if not ours:
            return Decision(Action.NONE, "ReleaseOwnedElsewhere", "the release was not installed by this "
                                                                  "HelmRelease; it is left in place")
        return Decision(Action.UNINSTALL, "Uninstalling", "uninstalling the release")
    if desired.suspended:
        return Decision(Action.NONE, "Suspended", "reconciliation is suspended")
    if present and not ours:
        return Decision(Action.REFUSE, "ReleaseOwnedElsewhere",
                        "a release with this name exists and was not installed by this HelmRelease; "
                        "helmop will not take it over")
    if present and release is not None and release.pending:
        return Decision(Action.UNLOCK, "ReleaseLocked", f"release is stuck in {release.status}; "
                                                        "marking it failed so it can proceed")
    same_attempt = observed.last_attempted_digest == desired.config_digest
    if not present:
        if same_attempt and observed.failures > desired.install_retries and not observed.retry_requested:
            return Decision(Action.NONE, "InstallFailed", "install failed; waiting for a change of spec or "
                                                          "values, or a helmop.dev/requestedAt annotation")
        return Decision(Action.INSTALL, "Installing", "release not found; installing")
    assert release is not None
    if release.status == "deployed" and release.digest == desired.config_digest:
        return Decision(Action.NONE, "UpToDate", f"release is deployed at revision {release.revision}")
    if same_attempt and observed.failures > desired.upgrade_retries and not observed.retry_requested:
        return Decision(Action.NONE, "UpgradeFailed", "upgrade failed; waiting for a change of spec or values, "
                                                      "or a helmop.dev/requestedAt annotation")
    why = "configuration changed" if release.status == "deployed" else f"release is {release.status}"
    return Decision(Action.UPGRADE, "Upgrading", f"{why}; upgrading")
