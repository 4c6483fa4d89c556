"""How a ConfigSync's status changes (outcomes: :func:`helmop.decisions.settle.outcome`)."""

from __future__ import annotations

from helmop.api.status.configsync import AppliedObject, ConfigSyncStatus


def attempted(status: ConfigSyncStatus, revision: str) -> ConfigSyncStatus:
    return status.but(last_attempted_revision=revision)


def inventoried(status: ConfigSyncStatus, inventory: list[AppliedObject]) -> ConfigSyncStatus:
    """What this ConfigSync applied (now or before): what it prunes from next time."""
    return status.but(inventory=tuple(inventory))


def applied(status: ConfigSyncStatus, revision: str, inventory: list[AppliedObject]) -> ConfigSyncStatus:
    """``revision`` applied in full (and what left git pruned)."""
    return inventoried(status, inventory).but(last_applied_revision=revision)
