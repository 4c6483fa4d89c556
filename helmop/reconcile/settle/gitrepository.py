"""How a GitRepository's status changes (failures: :func:`helmop.reconcile.settle.outcome`)."""

from __future__ import annotations

from helmop.api.status.sources import Artifact, GitRepositoryStatus

from . import outcome


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
