"""The one table of the kinds the operator reconciles: for each, its status type, how it reads its spec, how
often it comes back when all is well, and its turn and clean-up (each ``(turn) -> Outcome``). The dispatcher
(:mod:`.handlers`) serves every row alike."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from helmop.api.images import FLUX_IMAGE_KINDS, HELMOP_IMAGES, ImageKinds
from helmop.api.kinds import (
    FINALIZER,
    FLUX,
    FLUX_FINALIZER,
    FLUX_RECEIVER,
    HELMOP,
    PREVIEW,
    PROJECT,
    RECEIVER,
    Family,
    Kind,
)
from helmop.api.objects import Resource
from helmop.api.status import Status
from helmop.api.status.app import AppStatus
from helmop.api.status.configsync import ConfigSyncStatus
from helmop.api.status.helmrelease import HelmReleaseStatus
from helmop.api.status.images import ImagePolicyStatus, ImageRepositoryStatus, ImageUpdateAutomationStatus
from helmop.api.status.preview import PreviewStatus
from helmop.api.status.project import ProjectStatus
from helmop.api.status.receiver import ReceiverStatus
from helmop.api.status.sources import (
    ArtifactGeneratorStatus,
    BucketStatus,
    GitRepositoryStatus,
    HelmChartStatus,
    HelmRepositoryStatus,
    OCIRepositoryStatus,
)
from helmop.api.tenancy import Tenancy
from helmop.decisions.specs import READERS, Reader

from . import (
    buckets,
    configsyncs,
    generators,
    gitrepositories,
    helmcharts,
    helmreleases,
    helmrepositories,
    imagepolicies,
    imagerepositories,
    imageupdates,
    ocirepositories,
    previews,
    projects,
    receivers,
)
from .apps import App
from .context import Context
from .outcome import DONE, Outcome
from .turn import Turn

Act = Callable[[Turn[Any, Any]], Awaitable[Outcome]]


class Acts(Protocol):
    """What a kind does, as its module (or an app kind's object) exports it: ``reconcile(turn)``, and
    ``finalize(turn)`` where it has something to clean up (a kind without leaves nothing behind but what the
    operator remembers of it, which the dispatcher forgets). Looked up at each call, not bound once."""

    async def reconcile(self, turn: Turn[Any, Any], /) -> Outcome: ...


def _suspend(turn: Turn[Any, Any]) -> bool:
    return getattr(turn.spec, "suspend", False) is True


@dataclass(frozen=True)
class Controller:
    """What one kind does. ``suspended``: whether a turn stops before acting (``spec.suspend``, or the kind's own
    rule); ``cleans_up_unread``: whether a deleted object whose spec is refused is cleaned up all the same (with
    ``turn.spec`` None), rather than let go as one that never made anything."""

    kind: Kind
    status: type[Status]
    interval: float
    acts: Acts
    reader: Reader | None = None  # default: the kind's in :data:`helmop.decisions.specs.READERS`
    suspended: Callable[[Turn[Any, Any]], bool] = _suspend
    cleans_up_unread: bool = False

    @property
    def finalizer(self) -> str:
        """Flux's kinds keep Flux's finalizer: a cluster moving over (or back) keeps one clean-up guarantee."""
        return FLUX_FINALIZER if self.kind.flux else FINALIZER

    async def reconcile(self, turn: Turn[Any, Any]) -> Outcome:
        return await self.acts.reconcile(turn)

    async def finalize(self, turn: Turn[Any, Any]) -> Outcome:
        finalize: Act | None = getattr(self.acts, "finalize", None)
        return DONE if finalize is None else await finalize(turn)

    def read(self, body: dict[str, Any], tenancy: Tenancy | None) -> Any:
        """The spec as this kind reads it (SpecError when it is refused); ``tenancy`` None: as a clean-up reads it,
        the model alone."""
        reader = self.reader or READERS[self.kind.kind]
        return reader(self.kind, Resource(body), tenancy)


def controllers(ctx: Context, app_kinds: list[App], *, clusterwide: bool = True,
                flux: bool = False) -> list[Controller]:
    """Every kind's controller: cluster-scoped kinds (Project) only for an operator that watches the whole cluster;
    Flux's kinds with ``flux`` (--flux-api)."""
    return [
        *_family(ctx, HELMOP), *(_family(ctx, FLUX) if flux else []),
        *_images(ctx, HELMOP_IMAGES), *(_images(ctx, FLUX_IMAGE_KINDS) if flux else []),
        *([Controller(PROJECT, ProjectStatus, ctx.settings.intervals.release, projects, cleans_up_unread=True)]
          if clusterwide else []),
        *(_app(ctx, app) for app in app_kinds),
        Controller(RECEIVER, ReceiverStatus, ctx.settings.intervals.receiver, receivers),
        *([Controller(FLUX_RECEIVER, ReceiverStatus, ctx.settings.intervals.receiver, receivers)] if flux else []),
        Controller(PREVIEW, PreviewStatus, ctx.settings.intervals.preview, previews),
    ]


def _family(ctx: Context, family: Family) -> list[Controller]:
    """The controllers of one family of kinds: the same code for helmop's and Flux's."""
    t = ctx.settings.intervals
    return [
        Controller(family.helmrelease, HelmReleaseStatus, t.release, helmreleases),
        Controller(family.gitrepository, GitRepositoryStatus, t.source, gitrepositories, cleans_up_unread=True),
        Controller(family.helmrepository, HelmRepositoryStatus, t.source, helmrepositories),
        Controller(family.ocirepository, OCIRepositoryStatus, t.source, ocirepositories),
        Controller(family.configsync, ConfigSyncStatus, t.source, configsyncs),
        Controller(family.bucket, BucketStatus, t.source, buckets),
        Controller(family.helmchart, HelmChartStatus, t.source, helmcharts),
        # Flux's source-watcher has no interval: an hour, and at once when a source publishes
        Controller(family.artifactgenerator, ArtifactGeneratorStatus, t.artifact_generator, generators,
                   suspended=generators.disabled, cleans_up_unread=True),
    ]


def _images(ctx: Context, kinds: ImageKinds) -> list[Controller]:
    """Image automation's controllers, helmop's or Flux's (policies are woken by their repository's scans, and
    come back every ten minutes without an interval of their own)."""
    return [
        Controller(kinds.repository, ImageRepositoryStatus, ctx.settings.intervals.source, imagerepositories),
        Controller(kinds.policy, ImagePolicyStatus, ctx.settings.intervals.image_policy, imagepolicies),
        Controller(kinds.automation, ImageUpdateAutomationStatus, ctx.settings.intervals.source, imageupdates),
    ]


def _app(ctx: Context, app: App) -> Controller:
    """An app kind's controller: its spec read as the HelmRelease it becomes."""
    return Controller(app.kind.resource, AppStatus, ctx.settings.intervals.release, app, reader=Reader(app.read),
                      cleans_up_unread=True)
