"""Receivers' webhooks, ``/hook/<digest>`` on the operator's webhook server, answered as Flux's notification-controller
answers them. Each step is taken before the next costs anything:

1. 404 unless a Receiver's ``status.webhookPath`` is the path (an index kept by a watch: no API call, and nothing
   said of which Receivers exist);
2. 429 once that Receiver's token bucket is empty (``BURST`` requests at once, then ``RATE`` a second);
3. 413 for a body over ``MAX_BODY`` (Flux's bound);
4. 503 while the Receiver is suspended or not Ready, or its spec or Secret cannot be read;
5. 401 unless the request authenticates as its type says (and nothing more is said), 403 when a generic-oidc
   token's validations fail (with their messages), 400 when its payload is not its sender's or its event is not
   one the Receiver handles;
6. the objects asked to reconcile (:mod:`.hooktargets`): 200, or 500 when some could not be.

Neither the token, nor a signature, nor a bearer token is logged or answered; the path itself is not logged either
(for a generic Receiver, it is all a caller needs).
"""

from __future__ import annotations

import base64
import binascii
import logging
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from helmop.api.addresses import Policy
from helmop.api.conditions import condition_of
from helmop.api.errors import SpecError
from helmop.api.flux import spec as flux_spec
from helmop.api.hookchecks import (
    GOOGLE_ISSUERS,
    Accepted,
    Delivery,
    Refused,
    check,
    gcr_payload,
    google_identity,
    is_json,
    parse,
    unauthorized,
)
from helmop.api.jwts import TokenRefused, UnknownKey, bearer, unverified_issuer, verify
from helmop.api.kinds import Kind
from helmop.api.objects import ObjectKey, Resource
from helmop.api.receivers import Issuer, ReceiverSpec, parse_receiver
from helmop.api.tenancy import Tenancy

from .hookpaths import HookPaths
from .hooktargets import request_reconciles
from .kube import Kube, KubeError
from .metrics import Metrics
from .oidc import Issuers, IssuerUnavailable
from .worker import Worker, WorkerTimeout

log = logging.getLogger(__name__)
MAX_BODY = 3 << 20
BURST, RATE = 20, 1.0  # a Receiver's requests at once, and per second after
GOOGLE = "https://accounts.google.com"  # whose keys sign a gcr Receiver's tokens
RESULTS = {200: "accepted", 400: "refused", 401: "unauthorized", 403: "forbidden", 404: "unknown", 413: "too_large",
           429: "limited", 500: "failed", 503: "unavailable"}


@dataclass
class Bucket:
    """A token bucket: ``BURST`` requests, refilled at ``RATE`` a second."""

    tokens: float = float(BURST)
    at: float = 0.0

    def take(self, now: float) -> bool:
        if self.at:
            self.tokens = min(float(BURST), self.tokens + (now - self.at) * RATE)
        self.at = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


class Receivers:
    """Every Receiver this operator serves, and the requests sent to them."""

    def __init__(self, kube: Kube, kinds: list[Kind], namespaces: list[str], *, tenancy: Tenancy, metrics: Metrics,
                 policy: Policy, cel_timeout: float) -> None:
        self.kube, self.tenancy, self.metrics = kube, tenancy, metrics
        self.paths = HookPaths(kube, kinds, namespaces)
        self.issuers = Issuers(policy)
        self.cel = Worker(timeout=cel_timeout)
        self.buckets: dict[ObjectKey, Bucket] = {}

    async def run(self) -> None:
        await self.paths.run()

    async def close(self) -> None:
        await self.cel.close()

    async def handle(self, request: web.Request) -> web.Response:
        found = self.paths.find(request.path)
        if found is None:
            self.metrics.receiver_requests.labels("", "", RESULTS[404]).inc()
            return web.json_response({"error": "not found"}, status=404)
        kind, body = found
        this = Resource(body)
        labels = (kind.key, f"{this.namespace}/{this.name}")
        try:
            if not self._bucket(ObjectKey(kind.key, this.namespace, this.name)).take(time.monotonic()):
                raise Refused(429, f"more than {BURST} requests at once, or {RATE:g} a second", "too many requests")
            asked = await self._accepted(kind, body, Delivery(request.headers, await _read(request)))
        except Refused as exc:
            log.info("%s %s/%s: a webhook request refused (%d): %s", kind.kind, this.namespace, this.name, exc.status,
                     exc)
            self.metrics.receiver_requests.labels(*labels, RESULTS.get(exc.status, "refused")).inc()
            headers = {"Retry-After": "1"} if exc.status == 429 else None
            return web.json_response({"error": exc.said}, status=exc.status, headers=headers)
        log.info("%s %s/%s: a webhook request accepted, %d object(s) asked to reconcile", kind.kind, this.namespace,
                 this.name, asked)
        self.metrics.receiver_requests.labels(*labels, RESULTS[200]).inc()
        return web.json_response({"ok": True})

    def _bucket(self, key: ObjectKey) -> Bucket:
        if key not in self.buckets:  # a new one: those of Receivers gone go
            self.buckets = {k: b for k, b in self.buckets.items() if k in self.paths.bodies}
        return self.buckets.setdefault(key, Bucket())

    async def _accepted(self, kind: Kind, body: dict[str, Any], delivery: Delivery) -> int:
        """The request authenticated and acted on: how many objects were asked to reconcile."""
        this = Resource(body)
        spec = _servable(kind, body)
        token, secret = await self._secret(this.namespace, spec)
        accepted, claims = await self._authenticated(spec, delivery, token, secret)
        if not spec.handles(accepted.event):
            raise Refused(400, f"the {accepted.event[:80]!r} event is not one this Receiver handles (spec.events)")
        variables: dict[str, Any] = {}
        if spec.resource_filter or any(t.filter for t in spec.resources):
            variables["req"] = parse(accepted.payload, "request") if is_json(delivery.header("Content-Type")) else {}
            if claims is not None:
                variables["claims"] = claims
        asked, problems = await request_reconciles(self.kube, self.cel, self.tenancy, this.namespace, spec, variables)
        if problems:
            raise Refused(500, "; ".join(problems), "some objects could not be asked to reconcile")
        return asked

    async def _secret(self, namespace: str, spec: ReceiverSpec) -> tuple[bytes, dict[str, bytes]]:
        """The token and the rest of the Secret's data (none for generic-oidc)."""
        if not spec.secret_ref:
            return b"", {}
        try:
            secret = await self.kube.get(f"/api/v1/namespaces/{namespace}/secrets/{spec.secret_ref}")
        except KubeError as exc:
            raise Refused(503, f"its Secret {spec.secret_ref} could not be read: {exc}", "not ready") from None
        try:
            data = {k: base64.b64decode(v) for k, v in ((secret or {}).get("data") or {}).items()}
        except (binascii.Error, TypeError):
            data = {}
        if "token" not in data:
            raise Refused(503, f"its Secret {spec.secret_ref} is gone or has no token", "not ready")
        return data["token"], data

    async def _authenticated(self, spec: ReceiverSpec, delivery: Delivery, token: bytes,
                             secret: dict[str, bytes]) -> tuple[Accepted, dict[str, Any] | None]:
        """What the request says, once it authenticates as the Receiver's type says; the token's claims for
        generic-oidc."""
        if spec.type == "generic-oidc":
            return Accepted("", delivery.body), await self._oidc(spec, delivery)
        if spec.type == "gcr":
            email, audience = secret.get("email", b"").decode(), secret.get("audience", b"").decode()
            if not email or not audience:
                raise Refused(503, "a gcr Receiver's Secret needs its email and audience keys", "not ready")
            claims = await self._verified(_bearer(delivery), GOOGLE, GOOGLE_ISSUERS, audience)
            google_identity(claims, email)
            return Accepted("", gcr_payload(delivery.body)), None
        return check(spec.type, delivery, token), None

    async def _oidc(self, spec: ReceiverSpec, delivery: Delivery) -> dict[str, Any]:
        """The claims of a token of one of spec.oidcProviders, verified, its validations true."""
        token = _bearer(delivery)
        try:
            issuer_url = unverified_issuer(token)
        except TokenRefused as exc:
            raise unauthorized(str(exc)) from None
        issuer = next((i for i in spec.issuers if i.url == issuer_url), None)
        if issuer is None:
            raise unauthorized("no oidcProvider is the token's issuer")
        claims = await self._verified(token, issuer.url, (issuer.url,), issuer.audience)
        failed = await self._validations(issuer, claims)
        if failed:
            raise Refused(403, "token validation failed: " + "; ".join(failed))
        return claims

    async def _validations(self, issuer: Issuer, claims: dict[str, Any]) -> list[str]:
        """The messages of the validations that are not true of ``claims``."""
        try:
            held = await self.cel.validations([(v.name, v.expression) for v in issuer.variables],
                                              [c.expression for c in issuer.validations], claims)
        except WorkerTimeout:
            held = None
        if held is None:
            return ["the variables could not be evaluated"]
        return [c.message for c, ok in zip(issuer.validations, held, strict=True) if not ok]

    async def _verified(self, token: str, keys_of: str, issuers: tuple[str, ...], audience: str) -> dict[str, Any]:
        """The claims of ``token``, verified with the keys of ``keys_of`` (fetched again once if it names a key they
        lack) as one of ``issuers``'s for ``audience``."""
        try:
            for rotated in (False, True):
                keys = await self.issuers.keys(keys_of, rotated=rotated)
                try:
                    return verify(token, keys.keys, issuers=issuers, audience=audience, allowed=keys.algorithms,
                                  now=time.time())
                except UnknownKey:
                    if rotated:
                        raise
            raise AssertionError("the loop returns or raises")
        except TokenRefused as exc:
            raise unauthorized(str(exc)) from None
        except IssuerUnavailable as exc:
            raise Refused(503, str(exc), "the issuer's keys could not be read") from None


def _servable(kind: Kind, body: dict[str, Any]) -> ReceiverSpec:
    """The Receiver's spec, if it serves requests now (Refused 503 otherwise: suspended, not Ready, a spec that
    cannot be acted on)."""
    raw = body.get("spec") or {}
    try:
        if kind.flux:
            flux_spec.check(kind, raw)
        spec = parse_receiver(raw, flux=kind.flux)
    except SpecError as exc:
        raise Refused(503, f"its spec cannot be acted on: {exc}", "not ready") from None
    if spec.suspend:
        raise Refused(503, "it is suspended", "suspended")
    if condition_of(body, "Ready").get("status") != "True":
        raise Refused(503, "it is not Ready", "not ready")
    return spec


def _bearer(delivery: Delivery) -> str:
    try:
        return bearer(delivery.header("Authorization"))
    except TokenRefused as exc:
        raise unauthorized(str(exc)) from None


async def _read(request: web.Request) -> bytes:
    """The body, or Refused 413 once it is over MAX_BODY (what is sent beyond is not read)."""
    if (request.content_length or 0) > MAX_BODY:
        raise Refused(413, f"a body over {MAX_BODY >> 20} MiB", "the body is too large")
    body = bytearray()
    async for chunk in request.content.iter_chunked(64 << 10):
        body += chunk
        if len(body) > MAX_BODY:
            raise Refused(413, f"a body over {MAX_BODY >> 20} MiB", "the body is too large")
    return bytes(body)
