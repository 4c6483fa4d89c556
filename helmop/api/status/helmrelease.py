"""A HelmRelease's status: what helmop last did with the release, the revisions helm keeps, its objects."""

from __future__ import annotations

from . import Controlled, Struct


class ReadinessCheck(Struct, frozen=True):
    """Who judged the last install or upgrade ready: helmop, helm (its own --wait) or none."""

    by: str
    reason: str = ""


class Snapshot(Struct, frozen=True):
    """One release revision as helm's storage records it."""

    revision: int = 0
    chart_name: str = ""
    chart_version: str = ""
    app_version: str = ""
    config_digest: str = ""
    status: str = ""
    first_deployed: str = ""
    last_deployed: str = ""
    tests: str = ""  # passed | failed ("": not run)
    action: str = ""  # what made it: install | upgrade | rollback | uninstall


class InventoryEntry(Struct, frozen=True):
    id: str  # <namespace>_<name>_<group>_<kind>, as Flux writes it
    v: str  # apiVersion


class Inventory(Struct, frozen=True):
    entries: tuple[InventoryEntry, ...] = ()


class HelmReleaseStatus(Controlled, frozen=True):
    last_attempted_generation: int = 0
    last_attempted_revision: str = ""
    last_attempted_config_digest: str = ""
    last_attempted_release_action: str = ""  # install | upgrade
    last_applied_revision: str = ""
    release_name: str = ""
    readiness_check: ReadinessCheck | None = None
    history: tuple[Snapshot, ...] = ()  # newest first
    install_failures: int = 0
    upgrade_failures: int = 0
    last_handled_reset_at: str = ""
    last_handled_force_at: str = ""
    inventory: Inventory | None = None  # None: never recorded (a release installed before helmop kept one)
    cluster: str = ""  # the remote cluster released to ("": the operator's own)
