"""A GitRepository's status: the revision fetched and published to its readers."""

from __future__ import annotations

from . import Status, Struct


class Artifact(Struct, frozen=True):
    revision: str  # <branch-or-tag>@sha1:<commit>
    last_update_time: str = ""


class GitRepositoryStatus(Status, frozen=True):
    last_fetched_at: str = ""
    webhook_path: str = ""
    source_verification_mode: str = ""  # what spec.verify checked of the published revision ("": nothing)
    artifact: Artifact | None = None


class ChartArtifact(Struct, frozen=True):
    """What a chart source fetched: its revision (``sha256:<digest>`` of a Helm index, ``<tag>@sha256:<digest>``
    of an OCI artifact) and the digest of the content."""

    revision: str
    digest: str = ""
    last_update_time: str = ""


class HelmRepositoryStatus(Status, frozen=True):
    url: str = ""  # the index's URL (without credentials)
    artifact: ChartArtifact | None = None


class OCIRepositoryStatus(Status, frozen=True):
    url: str = ""
    artifact: ChartArtifact | None = None
