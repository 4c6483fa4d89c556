"""Observability services: Datadog (an event of its Events API), Sentry (an error event, or a transaction for
anything else, in an envelope to the DSN's project) and OpenTelemetry (a span over OTLP/HTTP, JSON-encoded as the
OTLP specification lets every collector take it)."""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from helmop.api.notifications import ERROR, Event

from .request import MAX_BODY, PayloadError, Request, Target, basic, json_request, needs_address, needs_token

OTEL_SCHEMA = "https://opentelemetry.io/schemas/1.34.0"


def _seconds(event: Event) -> float:
    return datetime.fromisoformat(event.timestamp.replace("Z", "+00:00")).timestamp()


def datadog(event: Event, target: Target) -> list[Request]:
    """POST /api/v1/events on the address's site, with the API key as DD-API-KEY: the object's events as Datadog's
    Kubernetes integration titles them, tagged (in lowercase) with the object, the reason and the metadata."""
    parts = urlsplit(needs_address(target))
    tags = [f"flux_reporting_controller:{event.controller}", f"flux_reason:{event.reason}",
            f"kube_kind:{event.kind}", f"kube_name:{event.name}", f"kube_namespace:{event.namespace}",
            *(f"{k}:{v}" for k, v in event.metadata.items())]
    body = {"title": f"Events from the {event.kind} {event.name}/{event.namespace}", "text": event.message,
            "tags": [tag.lower() for tag in tags], "source_type_name": "fluxcd",
            "date_happened": int(_seconds(event)), "alert_type": "error" if event.severity == ERROR else "info"}
    return [json_request(urlunsplit((parts.scheme, parts.netloc, "/api/v1/events", "", "")), body,
                         {"DD-API-KEY": needs_token(target), **target.headers})]


def _dsn(address: str) -> tuple[str, str]:
    """(the envelope endpoint, the X-Sentry-Auth header) of a DSN: SCHEME://KEY@HOST[/PATH]/PROJECT."""
    parts = urlsplit(address)
    path, _, project = parts.path.rstrip("/").rpartition("/")
    if not parts.username or not project or not parts.hostname:
        raise PayloadError("a sentry provider's address must be a DSN: https://KEY@HOST/PROJECT")
    host = parts.hostname + (f":{parts.port}" if parts.port else "")
    auth = f"Sentry sentry_version=7, sentry_client=helmop/1, sentry_key={parts.username}"
    if parts.password:
        auth += f", sentry_secret={parts.password}"
    return urlunsplit((parts.scheme, host, f"{path}/api/{project}/envelope/", "", "")), auth


def _sentry_event(event: Event, environment: str) -> dict[str, Any]:
    """An error as a Sentry event (its metadata as a context); anything else as a transaction of one span, tagged
    with the object and the metadata (what Sentry's performance views chart)."""
    at = _seconds(event)
    common = {"event_id": secrets.token_hex(16), "timestamp": at, "platform": "other", "message": event.message,
              "transaction": f"{event.kind}: {event.namespace}/{event.name}",
              **({"environment": environment} if environment else {})}
    if event.severity == ERROR:
        return {**common, "level": "error", "server_name": event.controller,
                "contexts": {"metadata": dict(event.metadata)}}
    tags = {"flux_involved_object_kind": event.kind, "flux_involved_object_namespace": event.namespace,
            "flux_involved_object_name": event.name, "flux_reporting_controller": event.controller,
            "flux_reporting_instance": event.instance, "flux_reason": event.reason, **event.metadata}
    span = {"trace_id": secrets.token_hex(16), "span_id": secrets.token_hex(8), "op": "event",
            "start_timestamp": at, "timestamp": at, "tags": tags}
    return {**common, "type": "transaction", "start_timestamp": at, "tags": tags, "spans": [span],
            "contexts": {"trace": {"trace_id": span["trace_id"], "span_id": span["span_id"], "op": "event"}}}


def sentry(event: Event, target: Target) -> list[Request]:
    """An envelope (POST /api/{project}/envelope/) of one item, as Sentry's SDKs send it; spec.channel is the
    environment."""
    url, auth = _dsn(needs_address(target))
    item = _sentry_event(event, target.channel)
    payload = json.dumps(item, separators=(",", ":"), ensure_ascii=False).encode()
    kind = "transaction" if item.get("type") == "transaction" else "event"
    header = {"event_id": item["event_id"], "sent_at": datetime.now(UTC).isoformat(timespec="seconds")}
    body = b"\n".join([json.dumps(header).encode(), json.dumps({"type": kind, "length": len(payload)}).encode(),
                       payload]) + b"\n"
    if len(body) > MAX_BODY:
        raise PayloadError(f"the payload is {len(body)} bytes, over the {MAX_BODY} a notification may be")
    return [Request(url, body, {"Content-Type": "application/x-sentry-envelope", "X-Sentry-Auth": auth,
                                **target.headers})]


def _attribute(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def _otel_auth(target: Target) -> dict[str, str]:
    """A bearer token (the token, or the password without a username), else basic authentication."""
    token = target.token or (target.password if not target.username else "")
    if token:
        return {"Authorization": f"Bearer {token}"}
    return {"Authorization": basic(target.username, target.password)} if target.password else {}


def otel(event: Event, target: Target) -> list[Request]:
    """One span (OTLP/HTTP, ``ExportTraceServiceRequest`` as JSON) to the address as given (a collector's
    ``/v1/traces``): the service is the Alert (namespace/name, its uid as the instance), the trace id is the Alert's
    uid and the revision hashed (Flux's), so a source's event and the deployments of that revision are one trace.
    HelmRepository events are not spans (Flux's)."""
    if event.kind == "HelmRepository":
        return []
    namespace, name, uid = target.alert
    app, digest = event.meta("app-version"), event.meta("oci-digest")
    revision = f"{app}@{digest}" if app and digest else event.meta("revision") or "unknown"
    error = event.severity == ERROR
    span = {"traceId": hashlib.sha256(f"{uid}:{revision}".encode()).hexdigest()[:32],
            "spanId": secrets.token_hex(8), "name": f"{event.kind}: {event.namespace}/{event.name}", "kind": 1,
            "startTimeUnixNano": str(int(_seconds(event) * 1e9)), "endTimeUnixNano": str(time.time_ns()),
            "attributes": [_attribute("object.uid", event.uid), _attribute("object.kind", event.kind),
                           _attribute("object.name", event.name), _attribute("object.namespace", event.namespace),
                           *(_attribute(k, v) for k, v in event.metadata.items())],
            "status": {"code": 2, "message": event.message} if error else {"code": 1}}
    resource = {"attributes": [_attribute("service.name", f"{namespace}/{name}"),
                               _attribute("service.namespace", namespace), _attribute("service.instance.id", uid)]}
    traces = {"resourceSpans": [{"resource": resource, "schemaUrl": OTEL_SCHEMA,
                                 "scopeSpans": [{"scope": {"name": "helmop"}, "spans": [span]}]}]}
    return [json_request(needs_address(target), traces, {**_otel_auth(target), **target.headers})]


BUILDERS = {"datadog": datadog, "sentry": sentry, "otel": otel}
