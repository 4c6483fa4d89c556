"""How a source's status changes: a GitRepository's, a HelmRepository's, an OCIRepository's (failures:
:func:`helmop.reconcile.settle.outcome`)."""

from __future__ import annotations

from typing import TypeVar

from helmop.api.status.sources import (
    Artifact,
    ChartArtifact,
    GitRepositoryStatus,
    HelmRepositoryStatus,
    OCIRepositoryStatus,
)

from . import outcome

R = TypeVar("R", HelmRepositoryStatus, OCIRepositoryStatus)


def webhook(status: GitRepositoryStatus, path: str) -> GitRepositoryStatus:
    """The push webhook's path on the operator's webhook server ("": none)."""
    return status.but(webhook_path=path)


def fetched(status: GitRepositoryStatus, generation: int, revision: str, at: str) -> GitRepositoryStatus:
    """Fetched at ``at``, resolving to ``revision``: the artifact readers use (its time moves only when it
    changes), Ready."""
    out = status.but(last_fetched_at=at)
    if status.artifact is None or status.artifact.revision != revision:
        out = out.but(artifact=Artifact(revision=revision, last_update_time=at))
    return outcome(out, generation, True, "Succeeded", f"stored artifact for revision {revision}")


def chart_source(status: R, generation: int, url: str, revision: str, digest: str, at: str, message: str) -> R:
    """A HelmRepository or OCIRepository fetched at ``at``: its artifact (time moved only when the revision
    changes), Ready."""
    out = status.but(url=url)
    if status.artifact is None or status.artifact.revision != revision:
        out = out.but(artifact=ChartArtifact(revision=revision, digest=digest, last_update_time=at))
    return outcome(out, generation, True, "Succeeded", message)
