"""Webhooks and alerting tools: generic (the event itself), generic-hmac (signed), Prometheus Alertmanager,
Grafana annotations, PagerDuty (Events API v2)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from datetime import datetime
from urllib.parse import urlsplit

from helmop.api.notifications import ERROR, Event

from .request import Request, Target, json_request, needs_address, needs_token, title, words

COMPONENT = "helmop"  # Flux's generic webhook names the sender in Gotk-Component


def _auth(target: Target) -> dict[str, str]:
    """A token as a bearer token, else a username and password as basic authentication."""
    if target.token:
        return {"Authorization": f"Bearer {target.token}"}
    if target.username and target.password:
        pair = base64.b64encode(f"{target.username}:{target.password}".encode()).decode()
        return {"Authorization": f"Basic {pair}"}
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


BUILDERS = {"generic": generic, "generic-hmac": generic_hmac, "alertmanager": alertmanager, "grafana": grafana,
            "pagerduty": pagerduty}
