"""Providers and Alerts: each checked as it changes and kept in the notifier's memory, its verdict in its Ready
condition (with an Event when that changes); deleted, forgotten. A spec that cannot be acted on is kept out of
memory: an Alert refused sends nothing, a Provider refused is sent nothing."""

from __future__ import annotations

from typing import Any

from helmop.api import conditions as cond
from helmop.api.addresses import AddressRefused
from helmop.api.errors import SpecError
from helmop.api.flux import spec as flux_spec
from helmop.api.kinds import Kind
from helmop.api.notifications import AlertSpec, ProviderSpec, parse_alert, parse_provider
from helmop.api.objects import Resource
from helmop.api.status import Status
from helmop.decisions.health import check_expression
from helmop.decisions.settle import outcome
from helmop.infra.addresses import check_url

from . import fluxversions
from .context import Context
from .status import read_status, write_status


async def seen(ctx: Context, kind: Kind, body: dict[str, Any], event: str) -> None:
    this = Resource(body)
    ref = (kind.flux, this.namespace, this.name)
    notifier = ctx.services.notifier
    provider = kind.kind == "Provider"
    if event == "DELETED" or this.deleted_at:
        (notifier.set_provider if provider else notifier.set_alert)(ref, None, body)
        return
    try:
        if kind.flux:
            body = await fluxversions.read(ctx, kind, body)
            flux_spec.check(kind, body.get("spec") or {})
        if provider:
            provider_spec = _provider(ctx, body)
            notifier.set_provider(ref, provider_spec, body)
            said = f"sends to a {provider_spec.type} service" + (" (suspended)" if provider_spec.suspend else "")
        else:
            alert = _alert(ctx, kind, body)
            notifier.set_alert(ref, alert, body)
            said = (f"sends {alert.severity} events of {len(alert.sources)} source(s) to Provider {alert.provider}"
                    + (" (suspended)" if alert.suspend else ""))
    except SpecError as exc:
        (notifier.set_provider if provider else notifier.set_alert)(ref, None, body)
        await _report(ctx, kind, body, False, exc.reason, str(exc))
        return
    await _report(ctx, kind, body, True, "Succeeded", said)


def _provider(ctx: Context, body: dict[str, Any]) -> ProviderSpec:
    spec = parse_provider(body.get("spec") or {})
    if spec.commit_status_expr:
        check_expression(spec.commit_status_expr, "spec.commitStatusExpr")
    # an address literal is refused now; a name, each time it resolves
    for field, url in (("spec.address", spec.address), ("spec.proxy", spec.proxy)):
        try:
            if url and not (spec.repository and field == "spec.address"):
                check_url(ctx.services.notifier.sender.policy, url)
        except AddressRefused as exc:
            raise SpecError("AddressRefused", f"{field}: {exc}") from None
    return spec


def _alert(ctx: Context, kind: Kind, body: dict[str, Any]) -> AlertSpec:
    namespace = Resource(body).namespace
    alert = parse_alert(body.get("spec") or {}, namespace, flux=kind.flux)
    for i, source in enumerate(alert.sources):  # under --no-cross-namespace-refs: the Alert's own namespace only
        ctx.tenancy.check_reference(namespace, source.namespace, f"spec.eventSources[{i}].namespace")
    return alert


async def _report(ctx: Context, kind: Kind, body: dict[str, Any], ready: bool, reason: str, message: str) -> None:
    """The verdict in the Ready condition (Stalled with it when refused); an Event when it changed."""
    status = read_status(kind, Status, body)
    settled = outcome(status, Resource(body).generation, ready, reason, message, stalled=not ready)
    if await write_status(ctx, kind, body, settled):
        await ctx.services.events.post(body, cond.event_type(ready, reason), reason, message)
