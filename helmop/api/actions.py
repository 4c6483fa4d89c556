"""The names of what can be done to a release, one spelling for the decision, helm and status."""

from __future__ import annotations

from enum import Enum


class Action(Enum):
    NONE = "none"
    INSTALL = "install"
    UPGRADE = "upgrade"
    TEST = "test"
    CORRECT = "correct"  # re-apply the objects that drifted from the release (no new helm revision)
    ROLLBACK = "rollback"
    UNINSTALL = "uninstall"
    UNLOCK = "unlock"  # mark a release stuck in pending-* as failed, then decide again
    REFUSE = "refuse"  # the release belongs to someone else
    STALL = "stall"  # retries used up: wait for a change

    @classmethod
    def deploy(cls, recorded: str) -> Action:
        """The install or upgrade a status records (``lastAttemptedReleaseAction``); install when none."""
        return cls.UPGRADE if recorded == cls.UPGRADE.value else cls.INSTALL
