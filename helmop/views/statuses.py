"""An object's status as its typed model (``helmop.api.status``), whichever controller wrote it: a Flux kind's
status is read in Flux's shape (``api.flux.status.inward``), as the operator reads it. What ``helmop get``,
``trace``, ``tree`` and the web UI show of a status is read from these values, never by key from the body."""

from __future__ import annotations

from typing import Any, TypeVar

from helmop.api.flux.status import inward
from helmop.api.kinds import FLUX_GROUPS, GROUP
from helmop.api.objects import Resource
from helmop.api.status import Status, parse
from helmop.api.status.app import AppStatus
from helmop.api.status.configsync import ConfigSyncStatus
from helmop.api.status.helmrelease import HelmReleaseStatus
from helmop.api.status.images import ImagePolicyStatus, ImageRepositoryStatus, ImageUpdateAutomationStatus
from helmop.api.status.preview import PreviewStatus
from helmop.api.status.project import ProjectStatus
from helmop.api.status.receiver import ReceiverStatus
from helmop.api.status.sources import (
    Artifact,
    ArtifactGeneratorStatus,
    BucketStatus,
    ExternalArtifactStatus,
    GitRepositoryStatus,
    HelmChartStatus,
    HelmRepositoryStatus,
    OCIRepositoryStatus,
)

S = TypeVar("S", bound=Status)

# The kinds of helmop's group and of Flux's: one model per kind name (a Flux Kustomization's is a ConfigSync's)
MODELS: dict[str, type[Status]] = {
    "HelmRelease": HelmReleaseStatus, "ConfigSync": ConfigSyncStatus, "Kustomization": ConfigSyncStatus,
    "GitRepository": GitRepositoryStatus, "HelmRepository": HelmRepositoryStatus,
    "OCIRepository": OCIRepositoryStatus, "Bucket": BucketStatus, "HelmChart": HelmChartStatus,
    "ExternalArtifact": ExternalArtifactStatus, "ArtifactGenerator": ArtifactGeneratorStatus,
    "Receiver": ReceiverStatus, "Project": ProjectStatus, "ImageRepository": ImageRepositoryStatus,
    "ImagePolicy": ImagePolicyStatus, "ImageUpdateAutomation": ImageUpdateAutomationStatus, "Preview": PreviewStatus,
}
PUBLISHERS = (GitRepositoryStatus, HelmRepositoryStatus, OCIRepositoryStatus, BucketStatus, HelmChartStatus,
              ExternalArtifactStatus)  # the statuses with an artifact


def _group(obj: dict[str, Any]) -> str:
    return Resource(obj).api_version.rpartition("/")[0]


def read(of: type[S], obj: dict[str, Any]) -> S:
    """The status of ``obj`` as ``of`` (empty when it has none, or one that does not fit)."""
    raw = Resource(obj).status
    return parse(of, inward(Resource(obj).kind, raw) if _group(obj).endswith(FLUX_GROUPS) else raw)


def model(obj: dict[str, Any]) -> type[Status] | None:
    """The status model of ``obj``'s kind: helmop's and Flux's kinds by name, any other custom resource's as an
    app's (Jenkins, app kinds: what their HelmRelease reports, mirrored); None for Kubernetes' own kinds."""
    group = _group(obj)
    if group == GROUP or group.endswith(FLUX_GROUPS):
        return MODELS.get(Resource(obj).kind, Status)
    if "." not in group or group.endswith(".k8s.io"):
        return None
    return AppStatus


def status_of(obj: dict[str, Any]) -> Status | None:
    of = model(obj)
    return None if of is None else read(of, obj)


def artifact_of(status: Status | None) -> Artifact | None:
    """What a source publishes (None: not a source, or nothing yet)."""
    return status.artifact if isinstance(status, PUBLISHERS) else None
