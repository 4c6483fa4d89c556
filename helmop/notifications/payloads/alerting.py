"""Webhooks and alerting tools: generic (the event itself), generic-hmac (signed), Prometheus Alertmanager,
Grafana annotations, PagerDuty (Events API v2), Opsgenie (its Alert API) and incident.io (an HTTP alert source)."""

from __future__ import annotations

import hashlib
import hmac
import re
from datetime import datetime
from urllib.parse import urlsplit

from helmop.api.notifications import ERROR, Event

from .request import (
    PROGRESSING,
    Request,
    Target,
    basic,
    heading,
    json_request,
    needs_address,
    needs_token,
    title,
    words,
)

COMPONENT = "helmop"  # Flux's generic webhook names the sender in Gotk-Component


def _auth(target: Target) -> dict[str, str]:
    """A token as a bearer token, else a username and password as basic authentication."""
    if target.token:
        return {"Authorization": f"Bearer {target.token}"}
    if target.username and target.password:
        return {"Authorization": basic(target.username, target.password)}
    return {}


def generic(event: Event, target: Target) -> list[Request]:
    return [json_request(needs_address(target), event.to_json(), {"Gotk-Component": COMPONENT, **target.headers})]


def generic_hmac(event: Event, target: Target) -> list[Request]:
    """The generic body, with ``X-Signature: sha256=<hex HMAC-SHA256 of the body>`` keyed by the Secret's token."""
    key = needs_token(target).encode()
    request = generic(event, target)[0]
    signature = hmac.new(key, request.body, hashlib.sha256).hexdigest()
    return [Request(request.url, request.body, {**request.headers, "X-Signature": f"sha256={signature}"})]


_LABEL = re.compile(r"[^a-zA-Z0-9_]")


def alertmanager(event: Event, target: Target) -> list[Request]:
    """One firing alert (POST /api/v2/alerts takes a list): the metadata as labels (names made valid Prometheus
    label names), the message (and a summary) as annotations, the event's time as startsAt."""
    metadata = dict(event.metadata)
    annotations = {"message": event.message, **({"summary": metadata.pop("summary")} if "summary" in metadata else {})}
    labels = {_LABEL.sub("_", k): v for k, v in metadata.items()}
    labels |= {"alertname": f"Helmop{event.kind}{event.reason[:1].upper()}{event.reason[1:]}",
               "severity": event.severity, "reason": event.reason, "kind": event.kind, "name": event.name,
               "namespace": event.namespace, "reportingcontroller": event.controller}
    return [json_request(needs_address(target), [{"labels": labels, "annotations": annotations,
                                                  "startsAt": event.timestamp}],
                         {**_auth(target), **target.headers})]


def grafana(event: Event, target: Target) -> list[Request]:
    """An annotation (POST /api/annotations): its time in epoch milliseconds, the object as text, tags a dashboard
    can select by (``helmop``, the sender, each metadata entry, kind, name, namespace)."""
    when = datetime.fromisoformat(event.timestamp.replace("Z", "+00:00"))
    tags = ["helmop", event.controller, *(f"{k.replace(':', '|')}: {v.replace(':', '|')}"
                                          for k, v in event.metadata.items()),
            f"kind: {event.kind}", f"name: {event.name}", f"namespace: {event.namespace}"]
    text = f"{event.kind.lower()}/{event.name}.{event.namespace}: {event.reason}: {event.message}"
    return [json_request(needs_address(target), {"time": int(when.timestamp() * 1000), "text": text, "tags": tags},
                         {**_auth(target), **target.headers})]


def pagerduty(event: Event, target: Target) -> list[Request]:
    """Events API v2 at the address's host: an error triggers an incident keyed by the object (dedup_key: its
    uid), anything else resolves it and is recorded as a change event (the service's timeline). The routing key
    is spec.channel."""
    parts = urlsplit(needs_address(target))
    base = f"{parts.scheme}://{parts.netloc}"
    summary = f"{words(event.reason)}: {title(event)}"
    details = {"message": event.message, "metadata": dict(event.metadata)}
    source = f"helmop {event.controller}".strip()
    if event.severity == ERROR:
        return [json_request(f"{base}/v2/enqueue", {
            "routing_key": target.channel, "event_action": "trigger", "dedup_key": event.uid,
            "payload": {"summary": summary[:1024], "source": source, "severity": "error",
                        "timestamp": event.timestamp, "component": event.name, "group": event.kind,
                        "custom_details": details}})]
    return [json_request(f"{base}/v2/enqueue", {"routing_key": target.channel, "event_action": "resolve",
                                                "dedup_key": event.uid}),
            json_request(f"{base}/v2/change/enqueue", {
                "routing_key": target.channel,
                "payload": {"summary": summary[:1024], "timestamp": event.timestamp, "source": source,
                            "custom_details": details}})]


def opsgenie(event: Event, target: Target) -> list[Request]:
    """An alert (POST /v2/alerts) with the API key as ``GenieKey``: the object as its message, the event's message
    as its description, the metadata and severity as details; its alias (Opsgenie's deduplication) a digest of the
    Provider, the object and the reason, so the same failure repeated is one alert."""
    key = f"{target.provider_uid}/{event.kind}/{event.namespace}/{event.name}/{event.reason}"
    alert = {"message": f"{event.kind}/{event.name}", "alias": hashlib.sha256(key.encode()).hexdigest()[:64],
             "description": event.message, "details": {**event.metadata, "severity": event.severity}}
    return [json_request(needs_address(target), alert,
                         {"Authorization": f"GenieKey {needs_token(target)}", **target.headers})]


def incidentio(event: Event, target: Target) -> list[Request]:
    """An alert event of an HTTP alert source: an error fires it, anything else resolves it (deduplicated by the
    object's uid); Progressing says neither and is not sent."""
    if event.reason == PROGRESSING:
        return []
    metadata = {**event.metadata, "severity": event.severity, "reason": event.reason,
                **({"reportingController": event.controller} if event.controller else {})}
    alert = {"title": f"{heading(event)}: {event.reason}",
             "status": "firing" if event.severity == ERROR else "resolved", "deduplication_key": event.uid,
             **({"description": event.message} if event.message else {}), "metadata": metadata}
    return [json_request(needs_address(target), alert,
                         {"Authorization": f"Bearer {needs_token(target)}", **target.headers})]


BUILDERS = {"generic": generic, "generic-hmac": generic_hmac, "alertmanager": alertmanager, "grafana": grafana,
            "pagerduty": pagerduty, "opsgenie": opsgenie, "incident.io": incidentio}
