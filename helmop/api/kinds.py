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

    def path(self, namespace: str | None = None, name: str = "") -> str:
        """The REST path of the collection (in ``namespace``, or across all) or of one object; a cluster-scoped
        kind's ignore ``namespace``."""
        base = f"/apis/{self.group}/{self.version}"
        where = (f"{base}/namespaces/{namespace}/{self.plural}" if namespace and self.namespaced
                 else f"{base}/{self.plural}")
        return f"{where}/{name}" if name else where


HELMRELEASE = Kind("HelmRelease", GROUP, VERSION, "helmreleases", ("hr",))
GITREPOSITORY = Kind("GitRepository", GROUP, VERSION, "gitrepositories", ("gitrepo",))
CONFIGSYNC = Kind("ConfigSync", GROUP, VERSION, "configsyncs", ("csync",))
JENKINS = Kind("Jenkins", APPS_GROUP, VERSION, "jenkins", ("jk",))
PROJECT = Kind("Project", GROUP, VERSION, "projects", ("proj",), namespaced=False)
BUILTIN = (HELMRELEASE, GITREPOSITORY, CONFIGSYNC, JENKINS, PROJECT)
