"""A ConfigSync's status: the revisions tried and applied, and what it applied (what it prunes from)."""

from __future__ import annotations

from . import Controlled, Struct


class AppliedObject(Struct, frozen=True):
    api_version: str
    kind: str
    name: str
    namespace: str = ""
    uid: str = ""  # as applied: an object re-created by someone else is not pruned


class ConfigSyncStatus(Controlled, frozen=True):
    cluster: str = ""  # the remote cluster applied to ("": the operator's own)
    last_applied_revision: str = ""
    last_attempted_revision: str = ""
    inventory: tuple[AppliedObject, ...] = ()
