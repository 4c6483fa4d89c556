"""The status of sources: the artifact each publishes to its readers, in Flux's shape."""

from __future__ import annotations

import msgspec

from . import Status, Struct


class Artifact(Struct, frozen=True):
    """What a source publishes. ``revision`` is Flux's (``main@sha1:<commit>``, ``sha256:<index digest>``,
    ``<tag>@sha256:<manifest digest>``...); ``digest`` is that of the content (a git artifact's files as shaped
    by ignore, includes and submodules; an OCI artifact's layer; a Bucket's or a generated artifact's archive);
    ``path`` and ``size`` where an archive is kept (Flux serves it at ``url``: helmop serves none, readers
    read the source themselves)."""

    revision: str
    digest: str = ""
    last_update_time: str = ""
    path: str = ""
    url: str = ""  # where its maker serves it (another controller's ExternalArtifact)
    size: int = 0
    metadata: dict[str, str] = msgspec.field(default_factory=dict)


class NameRef(Struct, frozen=True):
    name: str


class ObservedInclude(Struct, frozen=True):
    repository: NameRef
    from_path: str = ""
    to_path: str = ""


class GitRepositoryStatus(Status, frozen=True):
    last_fetched_at: str = ""
    webhook_path: str = ""
    source_verification_mode: str = ""  # what spec.verify checked of the published revision ("": nothing)
    artifact: Artifact | None = None
    included_artifacts: tuple[Artifact, ...] = ()  # each include's artifact, as the published one was made of
    observed_ignore: str | None = None
    observed_recurse_submodules: bool = False
    observed_include: tuple[ObservedInclude, ...] = ()
    observed_sparse_checkout: tuple[str, ...] = ()


class HelmRepositoryStatus(Status, frozen=True):
    url: str = ""  # the index's URL (without credentials)
    artifact: Artifact | None = None


class LayerSelector(Struct, frozen=True):
    media_type: str = ""
    operation: str = ""


class OCIRepositoryStatus(Status, frozen=True):
    url: str = ""
    artifact: Artifact | None = None
    observed_ignore: str | None = None  # what the published artifact was made with
    observed_layer_selector: LayerSelector | None = None


class BucketStatus(Status, frozen=True):
    url: str = ""  # the bucket's endpoint and name
    artifact: Artifact | None = None
    observed_ignore: str | None = None


class HelmChartStatus(Status, frozen=True):
    url: str = ""
    artifact: Artifact | None = None
    observed_source_artifact_revision: str = ""  # the source's revision the chart was made of
    observed_chart_name: str = ""
    observed_values_files: tuple[str, ...] = ()  # with ignoreMissingValuesFiles: the values files found


class ExternalArtifactStatus(Status, frozen=True):
    artifact: Artifact | None = None


class GeneratedArtifact(Struct, frozen=True):
    """An ExternalArtifact an ArtifactGenerator made."""

    name: str
    namespace: str
    digest: str = ""
    filename: str = ""


class ArtifactGeneratorStatus(Status, frozen=True):
    inventory: tuple[GeneratedArtifact, ...] = ()
    observed_sources_digest: str = ""  # of its sources' artifacts, as the published ones were made of
