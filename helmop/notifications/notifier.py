"""The Alerts and Providers of the cluster, kept in memory, and the events of helmop's objects sent through them.

Every Event helmop posts about one of its objects is offered here (:meth:`Notifier.observe`, called by the
event recorder, synchronously and without I/O): it is turned into Flux's event, rate-limited (the same object,
reason, message and revision at most once per ``settings.notifications.rate_limit``), matched against the Alerts in
memory, and queued on each matching Alert's Provider. The Provider's queue resolves its Secrets, builds the
service's requests and sends them (``outbox``; a pull request comment is a conversation of requests); each delivery
is an Event on the Provider (NotificationSent, or a Warning NotificationFailed saying why) and a count in
``helmop_notifications_total``. A release tells it the revision its chart was read at (:meth:`Notifier.sourced`):
the commit its events mark when that chart is in git.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from helmop.api.addresses import Policy
from helmop.api.kinds import ALERT, FLUX_ALERT, FLUX_PROVIDER, PROVIDER, key_of
from helmop.api.notifications import AlertSpec, Event, ProviderSpec, event_of
from helmop.api.objects import ObjectKey
from helmop.api.redaction import redact
from helmop.api.settings import Notifications
from helmop.infra.events import Recorder
from helmop.infra.kube import KubeError
from helmop.infra.metrics import Metrics
from helmop.infra.worker import Worker, WorkerTimeout

from . import payloads
from .outbox import Outbox, Sender, Undeliverable
from .payloads import Request
from .targets import default_status_id, host, resolve

# (flux, namespace, name): an Alert refers to the Provider of its own family and namespace
Ref = tuple[bool, str, str]
_OWN = {(k.api_version, k.kind) for k in (PROVIDER, ALERT, FLUX_PROVIDER, FLUX_ALERT)}
_REMEMBERED = 10000  # events remembered for rate limiting, and releases' source revisions


@dataclass(frozen=True)
class Subscription:
    """An Alert as kept: its spec, and the object (the ``alert`` of a commitStatusExpr)."""

    spec: AlertSpec
    body: dict[str, Any]


@dataclass(frozen=True)
class Destination:
    spec: ProviderSpec
    body: dict[str, Any]


class Notifier:
    def __init__(self, recorder: Recorder, metrics: Metrics, cel: Worker, settings: Notifications, policy: Policy, *,
                 secrets_of: Callable[[ObjectKey], list[str]] = lambda _key: []) -> None:
        self.recorder = recorder
        self.kube = recorder.kube
        self.metrics = metrics
        self.cel = cel
        self.settings = settings
        self.secrets_of = secrets_of  # what the object's last reconcile read from Secrets: masked in what is sent
        self.sender = Sender(policy, settings.backoff, settings.retry_for)
        self.alerts: dict[Ref, Subscription] = {}
        self.providers: dict[Ref, Destination] = {}
        self.outboxes: dict[Ref, Outbox] = {}
        self._sent: OrderedDict[tuple[str, ...], float] = OrderedDict()
        self._origins: OrderedDict[ObjectKey, str] = OrderedDict()

    # --- what the controllers keep up to date ---------------------------------------------------------

    def set_alert(self, ref: Ref, spec: AlertSpec | None, body: dict[str, Any]) -> None:
        """An Alert as it now is (None: gone, or a spec that cannot be acted on)."""
        if spec is None:
            self.alerts.pop(ref, None)
        else:
            self.alerts[ref] = Subscription(spec, body)

    def set_provider(self, ref: Ref, spec: ProviderSpec | None, body: dict[str, Any]) -> None:
        if spec is None:
            self.providers.pop(ref, None)
            self.outboxes.pop(ref, None)  # what it still holds is skipped: the Provider is gone
        else:
            self.providers[ref] = Destination(spec, body)

    def sourced(self, key: ObjectKey, revision: str) -> None:
        """The revision a release's chart was read at (its source's; "": not read): the commit its events mark,
        even when the GitRepository has moved on since."""
        if not revision:
            self._origins.pop(key, None)
            return
        self._origins[key] = revision
        self._origins.move_to_end(key)
        while len(self._origins) > _REMEMBERED:
            self._origins.popitem(last=False)

    # --- events in ----------------------------------------------------------------------------------

    def observe(self, obj: dict[str, Any], event_type: str, reason: str, message: str) -> None:
        """An Event helmop posted about ``obj``: queued on the Providers of the Alerts that select it."""
        if (obj.get("apiVersion"), obj.get("kind")) in _OWN or not self.alerts:
            return
        meta = obj.get("metadata") or {}
        key = ObjectKey(key_of(str(obj.get("apiVersion", "")), str(obj.get("kind", ""))),
                        str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        secrets = self.secrets_of(key)
        event = event_of(obj, event_type, reason, redact(message, secrets) if secrets else message,
                         instance=self.recorder.instance, origin=self._origins.get(key, ""))
        if secrets:
            event = _masked_metadata(event, secrets)
        if self._limited(event):
            return
        for (flux, namespace, _), subscription in list(self.alerts.items()):
            alert = subscription.spec
            if alert.suspend or not alert.accepts(event):
                continue
            ref = (flux, namespace, alert.provider)
            outbox = self.outboxes.get(ref)
            if outbox is None:
                outbox = self.outboxes[ref] = Outbox(self.settings.queue, partial(self._count, ref, "dropped"))
            outbox.put(partial(self._deliver, ref, alert.decorated(event), subscription))

    def _limited(self, event: Event) -> bool:
        """Whether the same event (object, reason, message, revision) went out less than the rate limit ago."""
        key = (event.api_version, event.kind, event.namespace, event.name, event.reason, event.message,
               event.revision())
        now = time.monotonic()
        last = self._sent.get(key)
        if last is not None and now - last < self.settings.rate_limit:
            return True
        self._sent[key] = now
        self._sent.move_to_end(key)
        while len(self._sent) > _REMEMBERED:
            self._sent.popitem(last=False)
        return False

    # --- deliveries -----------------------------------------------------------------------------------

    async def _deliver(self, ref: Ref, event: Event, subscription: Subscription) -> None:
        destination = self.providers.get(ref)
        if destination is None or destination.spec.suspend:
            self._count(ref, "skipped", destination.spec.type if destination else "")
            return
        spec, about = destination.spec, f"{event.kind} {event.namespace}/{event.name} {event.reason}"
        secrets: list[str] = []
        try:
            resolved = await resolve(self.kube, ref[1], spec, await self._status_id(event, destination, subscription),
                                     provider_uid=_identity(destination.body)[2],
                                     alert=_identity(subscription.body))
            secrets = resolved.secrets

            async def send(request: Request) -> str:
                return await self.sender.send(request, resolved.connection,
                                              partial(self._count, ref, "retried", spec.type))

            sent = await payloads.deliver(event, resolved.target, send)
        except (payloads.PayloadError, Undeliverable, KubeError) as exc:
            self._count(ref, "failed", spec.type)
            why = redact(exc.message if isinstance(exc, KubeError) else str(exc), secrets)
            await self.recorder.warning(destination.body, "NotificationFailed", f"{about}: not sent: {why}")
            return
        if not sent:  # nothing to say to this service about this event (a commit status without a commit)
            self._count(ref, "skipped", spec.type)
            return
        self._count(ref, "sent", spec.type)
        await self.recorder.normal(destination.body, "NotificationSent",
                                   f"{about} ({event.severity}) sent to {host(resolved.target.address)}")

    async def _status_id(self, event: Event, destination: Destination, subscription: Subscription) -> str:
        """The name of a commit status: spec.commitStatusExpr of (event, provider, alert), or Flux's default."""
        spec = destination.spec
        if not spec.commit_status:
            return ""
        if not spec.commit_status_expr:
            return default_status_id(event.kind, event.name, destination.body)
        try:
            text = await self.cel.text(spec.commit_status_expr, {"event": event.to_json(), "provider": destination.body,
                                                                 "alert": subscription.body})
        except WorkerTimeout as exc:
            raise payloads.PayloadError(f"spec.commitStatusExpr {exc}") from None
        if not text:
            raise payloads.PayloadError("spec.commitStatusExpr did not make a string of this event")
        return text[:255]

    def _count(self, ref: Ref, result: str, kind: str = "") -> None:
        if not kind:
            destination = self.providers.get(ref)
            kind = destination.spec.type if destination else ""
        self.metrics.notifications.labels(f"{ref[1]}/{ref[2]}", kind, result).inc()

    async def close(self) -> None:
        for outbox in self.outboxes.values():
            await outbox.close()
        await self.sender.close()


def _identity(body: dict[str, Any]) -> tuple[str, str, str]:
    """An object's namespace, name and uid."""
    meta = body.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or ""), str(meta.get("uid") or "")


def _masked_metadata(event: Event, secrets: list[str]) -> Event:
    return replace(event, metadata={k: redact(v, secrets) for k, v in event.metadata.items()})
