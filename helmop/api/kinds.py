"""helmop's kinds and its annotations: the names every layer refers to, defined once.

Pure data. REST paths are built here (not requests: the callers do the I/O), so a kind's group,
version and plural are never spelled out anywhere else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

GROUP = "helmop.dev"
APPS_GROUP = "apps.helmop.dev"
VERSION = "v1alpha1"
FLUX_GROUPS = ".fluxcd.io"  # the suffix of Flux's API groups (toolkit's, and source-watcher's extensions)

# Asks for a reconcile now (`helmop reconcile` sets it to a timestamp; status.lastHandledReconcileAt
# echoes the value once the reconcile has an outcome).
REQUESTED_AT = "helmop.dev/requestedAt"
# A new value resets a HelmRelease's failure counts (one more try); forces one upgrade (even when up to date).
RESET_AT = "helmop.dev/resetAt"
FORCE_AT = "helmop.dev/forceAt"
FINALIZER = "helmop.dev/finalizer"
# Which operator replica set handles a resource (`helmop run --shard NAME`); unlabelled: the default one.
SHARD_LABEL = "helmop.dev/shard"


_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")  # RFC 1123 label: what a namespace is named
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def is_namespace_name(text: str) -> bool:
    return bool(_LABEL.match(text))


def is_object_name(text: str) -> bool:
    """A DNS subdomain (RFC 1123), the name of most objects, helmop's kinds included."""
    return len(text) <= 253 and bool(_SUBDOMAIN.match(text))


def key_of(api_version: str, kind: str) -> str:
    """What names a kind in the operator's memory: the kind itself (helmop's, app kinds), qualified by the group
    for Flux's (a Flux HelmRelease and a helmop one of the same name are two objects)."""
    group = api_version.rpartition("/")[0]
    return f"{kind}.{group}" if group.endswith(FLUX_GROUPS) else kind


@dataclass(frozen=True)
class Kind:
    kind: str
    group: str
    version: str
    plural: str
    short_names: tuple[str, ...] = ()
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def key(self) -> str:
        return key_of(self.api_version, self.kind)

    @property
    def flux(self) -> bool:
        """One of Flux's kinds (served with --flux-api): Flux's status shape, finalizer and annotations."""
        return self.group.endswith(FLUX_GROUPS)

    def origin_labels(self, namespace: str, name: str) -> dict[str, str]:
        """The labels a Flux kind's controller puts on every object it applies (``<group>/name`` and
        ``<group>/namespace``: Flux's pruning, ``flux trace`` and dashboards select by them); none for helmop's
        kinds, nor for a name a label value cannot hold (over 63 characters)."""
        if not self.flux or len(name) > 63:
            return {}
        return {f"{self.group}/name": name, f"{self.group}/namespace": namespace}

    def path(self, namespace: str | None = None, name: str = "") -> str:
        """The REST path of the collection (in ``namespace``, or across all) or of one object; a cluster-scoped
        kind's ignore ``namespace``."""
        base = f"/apis/{self.group}/{self.version}"
        where = (f"{base}/namespaces/{namespace}/{self.plural}" if namespace and self.namespaced
                 else f"{base}/{self.plural}")
        return f"{where}/{name}" if name else where


HELMRELEASE = Kind("HelmRelease", GROUP, VERSION, "helmreleases", ("hr",))
GITREPOSITORY = Kind("GitRepository", GROUP, VERSION, "gitrepositories", ("gitrepo",))
HELMREPOSITORY = Kind("HelmRepository", GROUP, VERSION, "helmrepositories", ("helmrepo",))
OCIREPOSITORY = Kind("OCIRepository", GROUP, VERSION, "ocirepositories", ("ocirepo",))
BUCKET = Kind("Bucket", GROUP, VERSION, "buckets")
HELMCHART = Kind("HelmChart", GROUP, VERSION, "helmcharts", ("hc",))
EXTERNALARTIFACT = Kind("ExternalArtifact", GROUP, VERSION, "externalartifacts", ("ea",))
ARTIFACTGENERATOR = Kind("ArtifactGenerator", GROUP, VERSION, "artifactgenerators", ("ag",))
CONFIGSYNC = Kind("ConfigSync", GROUP, VERSION, "configsyncs", ("csync",))
JENKINS = Kind("Jenkins", APPS_GROUP, VERSION, "jenkins", ("jk",))
PROJECT = Kind("Project", GROUP, VERSION, "projects", ("proj",), namespaced=False)
# Notifications: where events go (a Provider) and which go there (an Alert), with Flux's field names
PROVIDER = Kind("Provider", GROUP, VERSION, "providers", ("prov",))
ALERT = Kind("Alert", GROUP, VERSION, "alerts", ("alert",))
# An incoming webhook that asks objects to reconcile at once (Flux's Receiver)
RECEIVER = Kind("Receiver", GROUP, VERSION, "receivers")
# Image automation: tags scanned, one chosen by a policy, written back to git (Flux's image controllers' kinds)
IMAGEREPOSITORY = Kind("ImageRepository", GROUP, VERSION, "imagerepositories", ("imgrepo",))
IMAGEPOLICY = Kind("ImagePolicy", GROUP, VERSION, "imagepolicies", ("imgpol",))
IMAGEUPDATEAUTOMATION = Kind("ImageUpdateAutomation", GROUP, VERSION, "imageupdateautomations", ("imgupd",))
IMAGES = (IMAGEREPOSITORY, IMAGEPOLICY, IMAGEUPDATEAUTOMATION)
# What each open pull request of a config repository would change, posted on it (helmop's own: no Flux kind)
PREVIEW = Kind("Preview", GROUP, VERSION, "previews", ("prv",))
BUILTIN = (HELMRELEASE, GITREPOSITORY, HELMREPOSITORY, OCIREPOSITORY, BUCKET, HELMCHART, EXTERNALARTIFACT,
           ARTIFACTGENERATOR, CONFIGSYNC, JENKINS, PROJECT, PROVIDER, ALERT, RECEIVER, *IMAGES, PREVIEW)


@dataclass(frozen=True)
class Family:
    """Kinds that name each other by kind alone (a HelmRelease's sourceRef, a dependsOn): helmop's own, or
    Flux's (served with --flux-api). Each is reconciled by the same code; a family's objects refer only to
    objects of the same family."""

    name: str
    helmrelease: Kind
    gitrepository: Kind
    helmrepository: Kind
    ocirepository: Kind
    configsync: Kind  # helmop's ConfigSync, Flux's Kustomization
    bucket: Kind
    helmchart: Kind
    externalartifact: Kind
    artifactgenerator: Kind  # makes ExternalArtifacts (Flux's source-watcher)

    @property
    def flux(self) -> bool:
        return self.name == "flux"

    @property
    def sources(self) -> tuple[Kind, ...]:
        return (self.gitrepository, self.helmrepository, self.ocirepository, self.bucket, self.helmchart,
                self.externalartifact)

    @property
    def kinds(self) -> tuple[Kind, ...]:
        return (self.helmrelease, *self.sources, self.artifactgenerator, self.configsync)

    def source(self, kind: str) -> Kind | None:
        return next((k for k in self.sources if k.kind == kind), None)


HELMOP = Family("helmop", HELMRELEASE, GITREPOSITORY, HELMREPOSITORY, OCIREPOSITORY, CONFIGSYNC, BUCKET, HELMCHART,
                EXTERNALARTIFACT, ARTIFACTGENERATOR)

FLUX_HELM, FLUX_SOURCE = "helm.toolkit.fluxcd.io", "source.toolkit.fluxcd.io"
FLUX_KUSTOMIZE = "kustomize.toolkit.fluxcd.io"
FLUX_SOURCE_EXTENSIONS = "source.extensions.fluxcd.io"
FLUX_NOTIFICATION = "notification.toolkit.fluxcd.io"
FLUX_PROVIDER = Kind("Provider", FLUX_NOTIFICATION, "v1beta3", "providers")
FLUX_ALERT = Kind("Alert", FLUX_NOTIFICATION, "v1beta3", "alerts")
FLUX_IMAGE = "image.toolkit.fluxcd.io"
FLUX_IMAGES = (Kind("ImageRepository", FLUX_IMAGE, "v1", "imagerepositories"),
               Kind("ImagePolicy", FLUX_IMAGE, "v1", "imagepolicies"),
               Kind("ImageUpdateAutomation", FLUX_IMAGE, "v1", "imageupdateautomations"))
FLUX_RECEIVER = Kind("Receiver", FLUX_NOTIFICATION, "v1", "receivers")
FLUX = Family(
    "flux",
    Kind("HelmRelease", FLUX_HELM, "v2", "helmreleases", ("hr",)),
    Kind("GitRepository", FLUX_SOURCE, "v1", "gitrepositories", ("gitrepo",)),
    Kind("HelmRepository", FLUX_SOURCE, "v1", "helmrepositories", ("helmrepo",)),
    Kind("OCIRepository", FLUX_SOURCE, "v1", "ocirepositories", ("ocirepo",)),
    Kind("Kustomization", FLUX_KUSTOMIZE, "v1", "kustomizations", ("ks",)),
    Kind("Bucket", FLUX_SOURCE, "v1", "buckets"),
    Kind("HelmChart", FLUX_SOURCE, "v1", "helmcharts", ("hc",)),
    Kind("ExternalArtifact", FLUX_SOURCE, "v1", "externalartifacts", ("ea",)),
    Kind("ArtifactGenerator", FLUX_SOURCE_EXTENSIONS, "v1beta1", "artifactgenerators", ("ag",)),
)


def family_of(group: str) -> Family:
    """The family an object of API group ``group`` belongs to (an app kind's: helmop's)."""
    return FLUX if group.endswith(FLUX_GROUPS) else HELMOP


# Flux's finalizer and reconcile request, honoured on Flux's kinds (a cluster moving over keeps its habits)
FLUX_FINALIZER = "finalizers.fluxcd.io"
FLUX_REQUESTED_AT = "reconcile.fluxcd.io/requestedAt"
FLUX_RESET_AT = "reconcile.fluxcd.io/resetAt"
FLUX_FORCE_AT = "reconcile.fluxcd.io/forceAt"
