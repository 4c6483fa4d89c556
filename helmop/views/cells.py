"""The cells people read about one of helmop's resources, the same in ``helmop get`` and the web UI: what it
deployed last (revision), where it deploys from (source) and to which cluster (cluster), and kubectl's way of
saying how long ago."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from helmop.api.conditions import WAITING, condition_of
from helmop.api.kinds import FLUX_GROUPS, GROUP
from helmop.api.objects import Resource
from helmop.api.status.app import AppStatus
from helmop.api.status.configsync import ConfigSyncStatus
from helmop.api.status.helmrelease import HelmReleaseStatus
from helmop.api.status.images import ImagePolicyStatus, ImageUpdateAutomationStatus

from .statuses import artifact_of, status_of


def revision(obj: dict[str, Any]) -> str:
    """What the resource deployed, applied, published or chose last."""
    status = status_of(obj)
    artifact = artifact_of(status)
    if artifact is not None:
        return artifact.revision
    if isinstance(status, HelmReleaseStatus):  # Flux's status has no lastAppliedRevision: its last snapshot
        return status.last_applied_revision or (status.history[0].chart_version if status.history else "")
    if isinstance(status, ConfigSyncStatus):
        return status.last_applied_revision
    if isinstance(status, AppStatus):
        return status.chart_version
    if isinstance(status, ImagePolicyStatus):
        return f"{status.latest_ref.name}:{status.latest_ref.tag}" if status.latest_ref else ""
    if isinstance(status, ImageUpdateAutomationStatus):
        return status.last_push_commit
    return ""


def source(obj: dict[str, Any]) -> str:
    """Where a resource takes what it deploys from (wide output)."""
    this = Resource(obj)
    spec, ref = this.spec, this.source_ref
    chart = spec.get("chart") or {}
    repository = chart.get("repository") or {}
    if repository:
        return f"{repository.get('url', '')} {repository.get('name', '')}@{repository.get('version') or '*'}".strip()
    shared = chart.get("spec") or {}
    if shared:
        return f"{ref.get('kind', '')}/{ref.get('name', '')} {shared.get('chart', '')}@{shared.get('version') or '*'}"
    if ref and spec.get("chartRef"):
        return f"{ref.get('kind', '')}/{ref.get('name', '')}"
    if ref:
        path = chart.get("path") or spec.get("path") or "."
        return f"{ref.get('kind', 'GitRepository')}/{ref.get('name', '')}:{path}"
    return str(spec.get("url") or spec.get("namespace") or "")


LOCAL = "local"  # the operator's own cluster, in the cluster cell and its filters
DELIVERING = ("HelmRelease", "ConfigSync", "Kustomization")  # the kinds that act on a cluster (spec.kubeConfig)


def cluster(obj: dict[str, Any]) -> str:
    """The cluster a HelmRelease, ConfigSync or Flux Kustomization delivers to: ``status.cluster`` (the kubeconfig
    Secret's helmop.dev/cluster label, else the API server's host:port), ``local`` for the operator's own; ""
    for any other kind. Flux's status schema has no such field (and an object not yet reconciled has none): the
    name of the Secret (or ConfigMap) in ``spec.kubeConfig`` stands in."""
    this = Resource(obj)
    group = this.api_version.rpartition("/")[0]
    if this.kind not in DELIVERING or not (group == GROUP or group.endswith(FLUX_GROUPS)):
        return ""
    status = status_of(obj)
    named = status.cluster if isinstance(status, HelmReleaseStatus | ConfigSyncStatus) else ""
    ref = this.spec.get("kubeConfig")
    if not isinstance(ref, dict) or not ref:
        return named or LOCAL  # (a status naming a remote the spec no longer does: until the next reconcile)
    given = ref.get("secretRef") or ref.get("configMapRef") or {}
    return named or (str(given.get("name") or "") if isinstance(given, dict) else "") or "?"


def is_remote(obj: dict[str, Any]) -> bool:
    return cluster(obj) not in ("", LOCAL)


def last_request(obj: dict[str, Any]) -> str:
    """The last person's request the operator acted on, and who made it: "rollback by alice 5m" ("-": none)."""
    handled = (obj.get("status") or {}).get("lastHandledRequest")
    if not isinstance(handled, dict) or not handled.get("action"):
        return "-"
    try:  # ``at`` is the asker's, as written: any text
        age = since(handled.get("at"))
    except (ValueError, TypeError):
        age = "at " + str(handled.get("at"))[:40]
    return f"{handled['action']} by {handled.get('by') or '?'} {age}"


def since(stamp: Any, now: datetime | None = None) -> str:
    """kubectl's AGE and LAST SEEN: the time since ``stamp`` in its largest unit or two (5d3h, 4m10s)."""
    if not stamp:
        return "<unknown>"
    seconds = int(((now or datetime.now(UTC)) - datetime.fromisoformat(str(stamp))).total_seconds())
    for unit, size, smaller, small_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60), ("m", 60, "s", 1)):
        if seconds >= size:
            rest = (seconds % size) // small_size
            return f"{seconds // size}{unit}" + (f"{rest}{smaller}" if rest and seconds < 10 * size else "")
    return f"{max(seconds, 0)}s"


def last_seen(event: dict[str, Any]) -> str:
    """When an Event was last seen (kubectl's LAST SEEN): an events.k8s.io Event may carry only eventTime."""
    return str(event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp") or "")


HEALTHS = ("failed", "progressing", "ready", "suspended")  # the order a person wants to see them in


def health(obj: dict[str, Any]) -> str:
    """One word for where a resource stands: suspended, ready, failed (not Ready and not working on it) or
    progressing (working on it, not yet judged, or waiting for something else: a dependency, its source, an
    approval or a deployment window)."""
    if Resource(obj).spec.get("suspend"):
        return "suspended"
    ready = condition_of(obj, "Ready")
    if ready.get("status") == "True":
        return "ready"
    if ready.get("status") == "False" and ready.get("reason") not in WAITING \
            and condition_of(obj, "Reconciling").get("status") != "True":
        return "failed"
    return "progressing"
