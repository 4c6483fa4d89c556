"""How each type of Receiver authenticates a webhook request and reads its payload, as Flux's notification-controller
does: HMAC signatures (go-github's ``<sha1|sha256|sha512>=<hex>`` form) and tokens compared in constant time, the
payload checked against the shape its sender documents, the sender's event read from its header. Pure.

The signature or token is checked before anything else of the request is looked at, and a request that fails it
is told nothing but 401. Neither a token nor a signature is ever part of a message. generic-oidc and gcr carry a
token an issuer signed, checked with its keys (:mod:`.jwts`); :func:`gcr_payload` and :func:`google_identity` are
gcr's rest.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from .bounded import json_within

MAX_DEPTH = 64  # of a JSON body: Flux's senders nest theirs a few levels
GOOGLE_ISSUERS = ("accounts.google.com", "https://accounts.google.com")
_HASHES = {"sha1": hashlib.sha1, "sha256": hashlib.sha256, "sha512": hashlib.sha512}
_HEX = re.compile(r"[0-9a-fA-F]+")
_CDEVENT_TYPE = re.compile(r"dev\.cdevents\.[a-z]+\.[a-z]+\.[0-9]+\.[0-9]+\.[0-9]+(-draft)?")


class Refused(Exception):
    """A request not acted on: ``status`` answers it, ``said`` is what the caller is told (for 401, nothing of why),
    the exception's text is what the log says."""

    def __init__(self, status: int, why: str, said: str = "") -> None:
        super().__init__(why)
        self.status = status
        self.said = said or {401: "unauthorized"}.get(status, why)


def unauthorized(why: str) -> Refused:
    return Refused(401, why)


@dataclass(frozen=True)
class Delivery:
    """A request as received: its headers (looked up whatever their case) and body."""

    headers: Mapping[str, str]
    body: bytes

    def header(self, name: str) -> str:
        return str(self.headers.get(name) or "")


@dataclass(frozen=True)
class Accepted:
    """An authenticated request: the event its sender names ("" for types without events) and the payload
    ``resourceFilter`` reads as ``req`` (the body, but for a form-encoded GitHub delivery and gcr's message)."""

    event: str
    payload: bytes


def hmac_valid(signature: str, body: bytes, token: bytes) -> bool:
    """Whether ``signature`` (``sha1=``, ``sha256=`` or ``sha512=`` and the hex HMAC) is ``body``'s with ``token``."""
    name, sep, given = signature.partition("=")
    digest = _HASHES.get(name)
    if not sep or digest is None or not _HEX.fullmatch(given) or len(given) % 2:
        return False
    return hmac.compare_digest(bytes.fromhex(given), hmac.new(token, body, digest).digest())


def same(given: str, token: bytes) -> bool:
    """Whether a header's value is the token (constant time; an absent header never is)."""
    return bool(given) and hmac.compare_digest(given.encode("utf-8", "surrogateescape"), token)


def check(kind: str, delivery: Delivery, token: bytes) -> Accepted:
    """The request authenticated and read as a ``kind`` Receiver (all but generic-oidc and gcr); Refused (401 when
    it does not authenticate, 400 when its payload is not what its sender sends)."""
    return _CHECKS[kind](delivery, token)


def _generic(delivery: Delivery, _token: bytes) -> Accepted:
    return Accepted("", delivery.body)


def _generic_hmac(delivery: Delivery, token: bytes) -> Accepted:
    if not hmac_valid(delivery.header("X-Signature"), delivery.body, token):
        raise unauthorized("the X-Signature header is not the body's HMAC with the token")
    return Accepted("", delivery.body)


def _hub(delivery: Delivery, token: bytes, sender: str) -> bytes:
    """go-github's ValidatePayload: the signature (X-Hub-Signature-256, else X-Hub-Signature) over the raw body;
    the payload is the body, or its ``payload`` field when form-encoded."""
    signature = delivery.header("X-Hub-Signature-256") or delivery.header("X-Hub-Signature")
    if not hmac_valid(signature, delivery.body, token):
        raise unauthorized(f"the {sender} signature is not the body's HMAC with the token")
    media = media_type(delivery.header("Content-Type"))
    if media == "application/json":
        return delivery.body
    if media == "application/x-www-form-urlencoded":
        form = parse_qs(delivery.body.decode("utf-8", "replace"), keep_blank_values=True, max_num_fields=1000)
        return (form.get("payload") or [""])[0].encode()
    raise Refused(400, f"a {sender} webhook is sent as application/json or form-encoded, not {media[:60]!r}")


def _github(delivery: Delivery, token: bytes) -> Accepted:
    return Accepted(delivery.header("X-GitHub-Event"), _hub(delivery, token, "GitHub"))


def _bitbucket(delivery: Delivery, token: bytes) -> Accepted:
    return Accepted(delivery.header("X-Event-Key"), _hub(delivery, token, "Bitbucket"))


def _gitlab(delivery: Delivery, token: bytes) -> Accepted:
    if not same(delivery.header("X-Gitlab-Token"), token):
        raise unauthorized("the X-Gitlab-Token header is not the token")
    return Accepted(delivery.header("X-Gitlab-Event"), delivery.body)


def _harbor(delivery: Delivery, token: bytes) -> Accepted:
    if not same(delivery.header("Authorization"), token):
        raise unauthorized("the Authorization header is not the token")
    return Accepted("", delivery.body)


def _nexus(delivery: Delivery, token: bytes) -> Accepted:
    expected = hmac.new(token, delivery.body, hashlib.sha1).hexdigest()  # compared as hex text, as Flux does
    if not same(delivery.header("X-Nexus-Webhook-Signature"), expected.encode()):
        raise unauthorized("the X-Nexus-Webhook-Signature header is not the body's HMAC-SHA1 with the token")
    _shaped(delivery.body, {"action": str, "repositoryName": str}, "Nexus")
    return Accepted("", delivery.body)


def _shape(schema: Mapping[str, Any], sender: str) -> Callable[[Delivery, bytes], Accepted]:
    """A type whose only check is its payload's shape (DockerHub, Quay, ACR: their webhooks are not signed)."""

    def check_shape(delivery: Delivery, _token: bytes) -> Accepted:
        _shaped(delivery.body, schema, sender)
        return Accepted("", delivery.body)

    return check_shape


def _cdevents(delivery: Delivery, _token: bytes) -> Accepted:
    """A CDEvent (v0.4): its context and subject as the specification requires them (each event type's own content
    schema is not checked); its event is the Ce-Type header, as Flux filters it."""
    event = parse(delivery.body, "CDEvent")
    context, subject = event.get("context"), event.get("subject")
    fields = ("version", "id", "source", "type", "timestamp")
    if not isinstance(context, dict) or not all(isinstance(context.get(f), str) and context[f] for f in fields):
        raise Refused(400, "a CDEvent's context needs version, id, source, type and timestamp")
    if not _CDEVENT_TYPE.fullmatch(context["type"]):
        raise Refused(400, f"{context['type'][:80]!r} is not a CDEvent type (dev.cdevents.<subject>.<predicate>.<v>)")
    if not isinstance(subject, dict) or not isinstance(subject.get("id"), str) or \
            not isinstance(subject.get("content", {}), dict):
        raise Refused(400, "a CDEvent's subject needs an id and its content")
    return Accepted(delivery.header("Ce-Type"), delivery.body)


def parse(body: bytes, sender: str) -> dict[str, Any]:
    """A JSON object body, its nesting bounded; Refused (400) otherwise."""
    try:
        data = json_within(body, max_depth=MAX_DEPTH, what=f"the {sender} payload")
    except ValueError as exc:
        raise Refused(400, str(exc)) from None
    if not isinstance(data, dict):
        raise Refused(400, f"the {sender} payload is not a JSON object")
    return data


def _shaped(body: bytes, schema: Mapping[str, Any], sender: str) -> None:
    """Refused (400) unless ``body`` is a JSON object whose fields named in ``schema`` have its types (str, a nested
    schema, or [str]) where present, as Go decodes a payload into a struct."""
    def fits(value: Any, want: Any) -> bool:
        if value is None:
            return True
        if isinstance(want, dict):
            return isinstance(value, dict) and all(fits(value.get(k), w) for k, w in want.items())
        if isinstance(want, list):
            return isinstance(value, list) and all(isinstance(v, str) for v in value)
        return isinstance(value, want)

    if not fits(parse(body, sender), schema):
        raise Refused(400, f"the payload is not a {sender} webhook payload")


def media_type(header: str) -> str:
    return header.split(";", 1)[0].strip().lower()


def is_json(content_type: str) -> bool:
    """Whether a request's Content-Type says JSON, as Flux reads it for ``req`` (any of a comma-separated list)."""
    return any(media_type(part) == "application/json" for part in content_type.split(","))


def gcr_payload(body: bytes) -> bytes:
    """The event a Google Pub/Sub push wraps (base64 JSON in message.data): action, digest and tag, re-encoded,
    which is what ``req`` is for a gcr Receiver."""
    message = parse(body, "Pub/Sub").get("message")
    data = message.get("data") if isinstance(message, dict) else None
    try:
        inner = parse(base64.b64decode(data if isinstance(data, str) else "", validate=True), "GCR")
    except binascii.Error:
        raise Refused(400, "the Pub/Sub message's data is not base64") from None
    fields = {k: inner.get(k) for k in ("action", "digest", "tag")}
    if not all(v is None or isinstance(v, str) for v in fields.values()):
        raise Refused(400, "the payload is not a GCR webhook payload")
    return json.dumps({k: v or "" for k, v in fields.items()}, separators=(",", ":")).encode()


def google_identity(claims: Mapping[str, Any], email: str) -> None:
    """Refused (401) unless Google's verified token is the service account's the Secret names (gcr)."""
    if claims.get("iss") not in GOOGLE_ISSUERS:
        raise unauthorized("the token is not Google's")
    if claims.get("email") != email or claims.get("email_verified") is not True:
        raise unauthorized("the token is not the Secret's service account's, or its email is not verified")


_CHECKS: dict[str, Callable[[Delivery, bytes], Accepted]] = {
    "generic": _generic, "generic-hmac": _generic_hmac, "github": _github, "gitlab": _gitlab,
    "bitbucket": _bitbucket, "harbor": _harbor, "nexus": _nexus, "cdevents": _cdevents,
    "dockerhub": _shape({"push_data": {"tag": str}, "repository": {"repo_url": str}}, "DockerHub"),
    "quay": _shape({"docker_url": str, "updated_tags": [str]}, "Quay"),
    "acr": _shape({"action": str, "target": {"repository": str, "tag": str}}, "ACR"),
}
