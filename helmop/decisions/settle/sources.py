"""How a source's status changes: a GitRepository's, a HelmRepository's, an OCIRepository's (failures:
:func:`helmop.decisions.settle.outcome`)."""

from __future__ import annotations

from typing import Any, TypeVar

from helmop.api.status.sources import (
    Artifact,
    BucketStatus,
    GitRepositoryStatus,
    HelmChartStatus,
    HelmRepositoryStatus,
    OCIRepositoryStatus,
)

from . import outcome

R = TypeVar("R", HelmRepositoryStatus, OCIRepositoryStatus)
V = TypeVar("V", GitRepositoryStatus, OCIRepositoryStatus)


def webhook(status: GitRepositoryStatus, path: str) -> GitRepositoryStatus:
    """The push webhook's path on the operator's webhook server ("": none)."""
    return status.but(webhook_path=path)


SOURCE_VERIFIED = "SourceVerified"


def verified(status: GitRepositoryStatus, generation: int, mode: str, message: str) -> GitRepositoryStatus:
    """spec.verify passed for the revision about to be published (``mode`` "": nothing asked: no condition)."""
    if not mode:
        return status.without(SOURCE_VERIFIED).but(source_verification_mode="")
    return status.with_condition(SOURCE_VERIFIED, True, "Succeeded", message, generation).but(
        source_verification_mode=mode)


def unverified(status: V, generation: int, reason: str, message: str) -> V:
    """spec.verify refused the new revision: the published one stays (Ready says the same, by its outcome)."""
    return status.with_condition(SOURCE_VERIFIED, False, reason, message, generation)


def signed(status: OCIRepositoryStatus, generation: int, message: str | None) -> OCIRepositoryStatus:
    """An OCIRepository's revision about to be published: verified (``message``), or nothing asked or the trust
    policy ignoring it (None: no condition, as Flux)."""
    if message is None:
        return status.without(SOURCE_VERIFIED)
    return status.with_condition(SOURCE_VERIFIED, True, "Succeeded", message, generation)


def fetched(status: GitRepositoryStatus, generation: int, revision: str, digest: str, at: str,
            **observed: Any) -> GitRepositoryStatus:
    """Fetched at ``at``, resolving to ``revision`` whose files have ``digest``: the artifact readers use (its
    time moves only when it changes), what it was made with (``observed``: the includes' artifacts, the
    ``observed*`` fields), Ready."""
    out = status.but(last_fetched_at=at, **observed)
    if status.artifact is None or (status.artifact.revision, status.artifact.digest) != (revision, digest):
        out = out.but(artifact=Artifact(revision=revision, digest=digest, last_update_time=at))
    return outcome(out, generation, True, "Succeeded", f"stored artifact for revision {revision}")


def chart_source(status: R, generation: int, url: str, revision: str, digest: str, at: str, message: str) -> R:
    """A HelmRepository or OCIRepository fetched at ``at``: its artifact (time moved only when the revision
    changes), Ready."""
    out = status.but(url=url)
    if status.artifact is None or status.artifact.revision != revision:
        out = out.but(artifact=Artifact(revision=revision, digest=digest, last_update_time=at))
    return outcome(out, generation, True, "Succeeded", message)


def oci_source(status: OCIRepositoryStatus, generation: int, url: str, revision: str, digest: str,
               metadata: dict[str, str], at: str, message: str, **observed: Any) -> OCIRepositoryStatus:
    """An OCIRepository fetched at ``at``: its artifact with the manifest's annotations (time moved only when the
    revision or the digest changes), what it was made with (``observed``), Ready."""
    out = status.but(url=url, **observed)
    if status.artifact is None or (status.artifact.revision, status.artifact.digest) != (revision, digest):
        out = out.but(artifact=Artifact(revision=revision, digest=digest, last_update_time=at, metadata=metadata))
    return outcome(out, generation, True, "Succeeded", message)


def bucket(status: BucketStatus, generation: int, url: str, revision: str, digest: str, size: int, at: str,
           message: str, ignore: str | None) -> BucketStatus:
    """A Bucket listed at ``at``: its artifact (time moved only when the revision or the digest changes), the
    ignore rules it was made with, Ready."""
    out = status.but(url=url, observed_ignore=ignore)
    if status.artifact is None or (status.artifact.revision, status.artifact.digest) != (revision, digest):
        out = out.but(artifact=Artifact(revision=revision, digest=digest, last_update_time=at, size=size))
    return outcome(out, generation, True, "Succeeded", message)


def helm_chart(status: HelmChartStatus, generation: int, revision: str, digest: str, at: str, message: str,
               **observed: Any) -> HelmChartStatus:
    """A HelmChart resolved at ``at``: its artifact (time moved only when the revision or the digest changes),
    what it was made of (``observed``), Ready."""
    out = status.but(**observed)
    if status.artifact is None or (status.artifact.revision, status.artifact.digest) != (revision, digest):
        out = out.but(artifact=Artifact(revision=revision, digest=digest, last_update_time=at))
    return outcome(out, generation, True, "Succeeded", message)
