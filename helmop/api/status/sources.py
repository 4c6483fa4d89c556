"""A GitRepository's status: the revision fetched and published to its readers."""

from __future__ import annotations

from . import Status, Struct


class Artifact(Struct, frozen=True):
    revision: str  # <branch-or-tag>@sha1:<commit>
    last_update_time: str = ""


class GitRepositoryStatus(Status, frozen=True):
    last_fetched_at: str = ""
    webhook_path: str = ""
    artifact: Artifact | None = None
