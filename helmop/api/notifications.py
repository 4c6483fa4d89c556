"""Notifications, as Flux's notification API (v1beta3) says them: a Provider is where events go (a chat, an
on-call tool, a git host's commit statuses), an Alert which events go there; and the event itself, Flux's JSON
(fluxcd/pkg apis/event/v1beta1). Pure: what the operator checks of a spec and decides of an event.

Alerts' inclusion and exclusion lists are RE2 expressions (Go's syntax, as Flux's): matching is linear in the
message, so a tenant's expression cannot hold the operator's loop (Python's ``re`` backtracks).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from .durations import parse_duration
from .errors import SpecError
from .fields import refuse_workload_identity, text
from .kinds import family_of
from .names import check_references
from .patterns import compile_pattern

# What each type sends (helmop.notifications has a payload module per family of services)
MESSAGE_TYPES = ("generic", "generic-hmac", "slack", "msteams", "discord", "rocket", "googlechat", "webex", "telegram",
                 "lark", "matrix", "zulip", "zoom", "alertmanager", "grafana", "pagerduty", "opsgenie", "incident.io",
                 "datadog", "sentry", "otel", "githubdispatch")
COMMIT_STATUS_TYPES = ("github", "gitlab", "gitea", "bitbucket", "bitbucketserver", "azuredevops")
CHANGE_REQUEST_TYPES = ("githubpullrequestcomment", "gitlabmergerequestcomment", "giteapullrequestcomment")
TYPES = MESSAGE_TYPES + COMMIT_STATUS_TYPES + CHANGE_REQUEST_TYPES
# Flux's types that need another protocol or a cloud identity: refused by name, saying why (a Provider that
# silently sent nothing would be worse than none)
REFUSED_TYPES = {
    "nats": "publishes over NATS's own protocol, which helmop does not speak",
    "googlepubsub": "publishes with Google Cloud's Pub/Sub client as a Google identity (JSON credentials or "
                    "workload identity), which helmop does not obtain",
    "azureeventhub": "sends over AMQP to an Azure Event Hub as a SAS or managed identity, which helmop does not "
                     "speak",
}
CHANGE_REQUEST = "change_request"  # the metadata (an object's event.toolkit.fluxcd.io/change_request) naming a PR
TIMEOUT = 15.0  # seconds for one request, when spec.timeout says none (Flux's)
_LONGEST = 2048  # address, channel, username, proxy (Flux's bounds)
_PATTERNS = 64  # inclusionList and exclusionList entries
_METADATA = 64  # eventMetadata entries
EVENT_ANNOTATION = "event.toolkit.fluxcd.io/"  # an object's own event metadata (annotations with this prefix)
REVISION, ORIGIN_REVISION = "revision", "originRevision"  # controller metadata keys, after "<group>/"
COMMIT = "commit"  # an object's own metadata (event.toolkit.fluxcd.io/commit): the commit a status marks
INFO, ERROR = "info", "error"
SUMMARY = 255  # characters of spec.summary


@dataclass(frozen=True)
class ProviderSpec:
    type: str
    address: str = ""
    channel: str = ""
    username: str = ""
    timeout: float = TIMEOUT
    proxy: str = ""
    secret_ref: str = ""
    cert_secret_ref: str = ""
    proxy_secret_ref: str = ""
    suspend: bool = False
    commit_status_expr: str = ""

    @property
    def commit_status(self) -> bool:
        return self.type in COMMIT_STATUS_TYPES

    @property
    def repository(self) -> bool:
        """Whether the address names a git repository (a clone or web address, ssh too), not an endpoint."""
        return self.type in (*COMMIT_STATUS_TYPES, *CHANGE_REQUEST_TYPES, "githubdispatch")


def _text(spec: Mapping[str, Any], name: str, limit: int = _LONGEST) -> str:
    value = spec.get(name, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise SpecError("InvalidSpec", f"spec.{name} must be a string")
    if len(value) > limit:
        raise SpecError("InvalidSpec", f"spec.{name} is longer than {limit} characters")
    return value


def _ref(spec: Mapping[str, Any], name: str) -> str:
    ref = spec.get(name)
    if ref is None:
        return ""
    if not isinstance(ref, dict) or not isinstance(ref.get("name"), str) or not ref["name"]:
        raise SpecError("InvalidSpec", f"spec.{name}.name must name a Secret of the Provider's namespace")
    return str(ref["name"])


def check_url(text: str, field: str) -> None:
    """SpecError unless ``text`` is an http(s) URL with a host."""
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SpecError("InvalidAddress", f"{field} must be an http:// or https:// URL with a host")


def parse_provider(spec: Mapping[str, Any]) -> ProviderSpec:
    check_references(spec)
    kind = _text(spec, "type")
    if kind in REFUSED_TYPES:
        raise SpecError("UnsupportedProviderType", f"spec.type {kind!r} {REFUSED_TYPES[kind]}; helmop sends to "
                                                   "HTTP(S) services only")
    if kind not in TYPES:
        raise SpecError("InvalidSpec", f"spec.type must be one of {', '.join(TYPES)}")
    refuse_workload_identity(spec, "a token", ", Flux's for azuredevops, azureeventhub and googlepubsub")
    address, proxy = _text(spec, "address"), _text(spec, "proxy")
    if address:
        check_url(address, "spec.address")
    if proxy:
        check_url(proxy, "spec.proxy")
    try:
        timeout = parse_duration(str(spec["timeout"])) if spec.get("timeout") else TIMEOUT
    except ValueError as exc:
        raise SpecError("InvalidSpec", f"spec.timeout: {exc}") from None
    expr = _text(spec, "commitStatusExpr", 4096)
    if expr and kind not in COMMIT_STATUS_TYPES:
        raise SpecError("InvalidSpec", f"spec.commitStatusExpr is only for the {', '.join(COMMIT_STATUS_TYPES)} "
                                       "types")
    return ProviderSpec(type=kind, address=address, channel=_text(spec, "channel"), username=_text(spec, "username"),
                        timeout=min(max(timeout, 0.1), 300.0), proxy=proxy, secret_ref=_ref(spec, "secretRef"),
                        cert_secret_ref=_ref(spec, "certSecretRef"), proxy_secret_ref=_ref(spec, "proxySecretRef"),
                        suspend=bool(spec.get("suspend")), commit_status_expr=expr)


@dataclass(frozen=True)
class Event:
    """One event as Flux's controllers send it (the JSON of :meth:`to_json`); ``labels`` are the involved object's
    (what an event source's matchLabels select by), not sent."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str
    severity: str  # info | error
    reason: str
    message: str
    metadata: Mapping[str, str] = field(default_factory=dict)
    resource_version: str = ""
    timestamp: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    controller: str = "helmop"
    instance: str = ""

    def revision(self) -> str:
        """The git revision the event is about, in Flux's order: the object's own ``commit`` (its annotation
        event.toolkit.fluxcd.io/commit), its origin revision, its revision; "" when none."""
        group = self.api_version.rpartition("/")[0]
        return (self.metadata.get(COMMIT) or self.metadata.get(f"{group}/{ORIGIN_REVISION}")
                or self.metadata.get(f"{group}/{REVISION}", ""))

    def meta(self, key: str) -> str:
        """A metadata value by its bare key, or the controller's ``<group>/key``."""
        group = self.api_version.rpartition("/")[0]
        return self.metadata.get(key) or self.metadata.get(f"{group}/{key}", "")

    def to_json(self) -> dict[str, Any]:
        return {"involvedObject": {"apiVersion": self.api_version, "kind": self.kind, "namespace": self.namespace,
                                   "name": self.name, "uid": self.uid,
                                   **({"resourceVersion": self.resource_version} if self.resource_version else {})},
                "severity": self.severity, "timestamp": self.timestamp, "message": self.message,
                "reason": self.reason, "metadata": dict(self.metadata), "reportingController": self.controller,
                **({"reportingInstance": self.instance} if self.instance else {})}


def event_of(obj: Mapping[str, Any], event_type: str, reason: str, message: str, *, instance: str = "",
             origin: str = "", now: datetime | None = None) -> Event:
    """The event a Kubernetes Event of ``obj`` (``event_type`` Normal or Warning) makes: severity error for a
    Warning; controller metadata ``<group>/revision`` from the object's status (the revision tried: a chart
    version, a git revision, an artifact's) and, for a release whose chart is in a GitRepository, ``origin`` (the
    revision its chart was read at) as ``<group>/originRevision``; its own ``event.toolkit.fluxcd.io/`` annotations
    as metadata."""
    meta = obj.get("metadata") or {}
    api_version = text(obj, "apiVersion")
    own = {k.removeprefix(EVENT_ANNOTATION): str(v) for k, v in (meta.get("annotations") or {}).items()
           if k.startswith(EVENT_ANNOTATION) and k != EVENT_ANNOTATION}
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Event(api_version=api_version, kind=text(obj, "kind"), namespace=text(meta, "namespace"),
                 name=text(meta, "name"), uid=text(meta, "uid"),
                 severity=ERROR if event_type == "Warning" else INFO, reason=reason, message=message,
                 metadata={**own, **_controller_metadata(obj, api_version.rpartition("/")[0], origin)},
                 resource_version=text(meta, "resourceVersion"),
                 timestamp=stamp, labels=dict(meta.get("labels") or {}), instance=instance)


def _controller_metadata(obj: Mapping[str, Any], group: str, origin: str) -> dict[str, str]:
    """``<group>/revision`` (the revision tried) and, for a release whose chart is in a GitRepository,
    ``<group>/originRevision``."""
    status = obj.get("status") or {}
    revision = status.get("lastAttemptedRevision") or ((status.get("artifact") or {}).get("revision")) or ""
    controller = {f"{group}/{REVISION}": str(revision)} if revision else {}
    if origin and _from_git(obj):
        controller[f"{group}/{ORIGIN_REVISION}"] = origin
    return controller


def _from_git(obj: Mapping[str, Any]) -> bool:
    """Whether a release's chart comes from a GitRepository (helmop's spec.chart.sourceRef, Flux's
    spec.chart.spec.sourceRef)."""
    chart = (obj.get("spec") or {}).get("chart")
    if not isinstance(chart, dict):
        return False
    ref = chart.get("sourceRef") or (chart.get("spec") or {}).get("sourceRef")
    return isinstance(ref, dict) and ref.get("kind") == "GitRepository"


@dataclass(frozen=True)
class EventSource:
    kind: str
    name: str  # "*": every object of the kind
    namespace: str
    match_labels: Mapping[str, str] = field(default_factory=dict)
    api_version: str = ""

    def selects(self, event: Event) -> bool:
        return (event.kind == self.kind and event.namespace == self.namespace
                and self.name in ("*", event.name)
                and (not self.api_version or self.api_version == event.api_version)
                and all(event.labels.get(k) == v for k, v in self.match_labels.items()))


@dataclass(frozen=True)
class AlertSpec:
    provider: str
    severity: str
    sources: tuple[EventSource, ...]
    inclusion: tuple[Any, ...] = ()  # compiled RE2 expressions
    exclusion: tuple[Any, ...] = ()
    metadata: Mapping[str, str] = field(default_factory=dict)
    summary: str = ""
    suspend: bool = False
    flux: bool = False  # one of Flux's Alerts: it selects the events of Flux's kinds

    def accepts(self, event: Event) -> bool:
        """Whether ``event`` goes to this Alert's provider (the Alert not suspended is the caller's to check)."""
        if self.severity == ERROR and event.severity != ERROR:
            return False
        if family_of(event.api_version.rpartition("/")[0]).flux != self.flux:
            return False
        if not any(source.selects(event) for source in self.sources):
            return False
        if self.inclusion and not any(p.search(event.message) for p in self.inclusion):
            return False
        return not any(p.search(event.message) for p in self.exclusion)

    def decorated(self, event: Event) -> Event:
        """``event`` with this Alert's metadata, in Flux's order of precedence: the object's own annotations, then
        spec.eventMetadata, then spec.summary, then the controller's (``<group>/...``), each over the one before."""
        own = {k: v for k, v in event.metadata.items() if "/" not in k}
        controller = {k: v for k, v in event.metadata.items() if "/" in k}
        summary = {"summary": self.summary} if self.summary else {}
        return replace(event, metadata={**own, **self.metadata, **summary, **controller})


def _patterns(spec: Mapping[str, Any], name: str) -> tuple[Any, ...]:
    texts = spec.get(name) or []
    if not isinstance(texts, list) or len(texts) > _PATTERNS:
        raise SpecError("InvalidSpec", f"spec.{name} must be a list of at most {_PATTERNS} regular expressions")
    return tuple(compile_pattern(text, f"spec.{name}[{i}]") for i, text in enumerate(texts))


def parse_alert(spec: Mapping[str, Any], namespace: str, *, flux: bool = False) -> AlertSpec:
    """An Alert's spec; an event source naming no namespace is the Alert's own."""
    check_references(spec)
    provider = _ref(spec, "providerRef")
    if not provider:
        raise SpecError("InvalidSpec", "spec.providerRef.name must name a Provider of the Alert's namespace")
    severity = spec.get("eventSeverity") or INFO
    if severity not in (INFO, ERROR):
        raise SpecError("InvalidSpec", "spec.eventSeverity must be info or error")
    entries = spec.get("eventSources")
    if not isinstance(entries, list) or not entries:
        raise SpecError("InvalidSpec", "spec.eventSources must list at least one kind and name ('*' for all)")
    sources = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not entry.get("kind") or not entry.get("name"):
            raise SpecError("InvalidSpec", f"spec.eventSources[{i}] must have a kind and a name ('*' for all)")
        labels = entry.get("matchLabels") or {}
        if not isinstance(labels, dict):
            raise SpecError("InvalidSpec", f"spec.eventSources[{i}].matchLabels must be a map")
        sources.append(EventSource(kind=str(entry["kind"]), name=str(entry["name"]),
                                   namespace=str(entry.get("namespace") or namespace),
                                   match_labels={str(k): str(v) for k, v in labels.items()},
                                   api_version=str(entry.get("apiVersion") or "")))
    metadata = spec.get("eventMetadata") or {}
    if not isinstance(metadata, dict) or len(metadata) > _METADATA:
        raise SpecError("InvalidSpec", f"spec.eventMetadata must be a map of at most {_METADATA} entries")
    summary = _text(spec, "summary", SUMMARY)
    return AlertSpec(provider=provider, severity=severity, sources=tuple(sources),
                     inclusion=_patterns(spec, "inclusionList"), exclusion=_patterns(spec, "exclusionList"),
                     metadata={str(k): str(v)[:_LONGEST] for k, v in metadata.items()}, summary=summary,
                     suspend=bool(spec.get("suspend")), flux=flux)
