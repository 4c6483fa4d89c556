"""People in the loop, as every turn meets them: who asked for a suspend, resume or reconcile (recorded for any
kind, before the kind acts), and for the kinds under change control (HelmReleases, ConfigSyncs) the requests
read, an approval's author checked, the deployment windows asked about the time, and what needs no action
(a pin ended, an approval recorded) written and said. The rules are :mod:`helmop.decisions.changecontrol`'s."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from helmop.api import requests
from helmop.api.changecontrol import ChangeControl, namespace_windows
from helmop.api.kinds import Kind
from helmop.api.objects import Resource
from helmop.api.status import Controlled, Status
from helmop.decisions import changecontrol as rules
from helmop.decisions.windows import gate
from helmop.infra.kube import KubeError

from .context import Context
from .status import write_status

S = TypeVar("S", bound=Status)
C = TypeVar("C", bound=Controlled)
ATTESTING = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/helmop-requests"
DEFAULTS = "helmop-windows"  # the ConfigMap of a namespace's default deployment windows
DEFAULTS_TTL = 30.0  # seconds a namespace's default windows are used as read


async def recorded(ctx: Context, kind: Kind, body: dict[str, Any], status: S) -> S:
    """Who asked for the suspend, resume or reconcile the object now shows (helmop.dev/requestedBy), recorded in
    status and said in an Event, once (not an outcome: `helmop reconcile` waits for the reconcile's)."""
    request = rules.new(requests.read(_annotations(body), requests.ASKED), status)
    if request is None:
        return status
    status = rules.handled(status, request)
    await write_status(ctx, kind, body, status, outcome=False)
    await ctx.services.events.normal(body, f"{request.action.value.title()}Requested",
                                     f"{request.action.value} asked {request.said()}")
    return status


def _asks(body: dict[str, Any]) -> rules.Asks:
    annotations = _annotations(body)
    return rules.Asks(rollback=requests.read(annotations, requests.ROLLBACK),
                      pin=requests.read(annotations, requests.PIN),
                      unpin=requests.read(annotations, requests.UNPIN),
                      approve=requests.read(annotations, requests.APPROVE))


async def settled(ctx: Context, kind: Kind, body: dict[str, Any], status: C, digest: str) -> tuple[C, rules.Asks]:
    """The requests on the object read; a pin ended and an approval recorded (written, said); an approval's
    author trusted only where the admission policy that attests it is in place (asked only when one is new)."""
    found = _asks(body)
    if rules.new(found.approve, status) is not None:
        found = replace(found, approvals_trusted=await _attested(ctx))
    status, said = rules.settle(status, found, digest)
    if said:
        await write_status(ctx, kind, body, status, outcome=False)
    for type_, reason, message in said:
        await ctx.services.events.post(body, type_, reason, message)
    return status, found


async def settings(ctx: Context, namespace: str, control: ChangeControl) -> rules.Settings:
    """The object's change control as of now: its windows (or its namespace's default ones) asked about the time.
    A namespace's defaults that cannot be read as windows are refused like the object's own (SpecError)."""
    windows = control.windows
    if not windows and control.namespace_default:
        found = await _namespace_defaults(ctx, namespace)
        windows = namespace_windows(found, f"ConfigMap {namespace}/{DEFAULTS}") if found else ()
    now = datetime.now(UTC)
    closed = gate(windows, now) if windows else None
    if closed is None:
        return rules.Settings(approval=control.approval)
    if closed.opens_at is None:
        return rules.Settings(approval=control.approval, closed=f"{closed.why}; no window opens within a year")
    opens = closed.opens_at.astimezone(UTC)
    return rules.Settings(approval=control.approval, opens_in=(opens - now).total_seconds(),
                          closed=f"{closed.why}; changes wait until {opens:%Y-%m-%dT%H:%M:%SZ}")


async def _namespace_defaults(ctx: Context, namespace: str) -> dict[str, Any] | None:
    """The namespace's ConfigMap of default windows (None: it has none), read at most every DEFAULTS_TTL seconds
    whatever the number of objects there (a change of it is seen within that time)."""
    cached = ctx.memory.namespace_defaults.get(namespace)
    if cached is not None and time.monotonic() - cached[0] < DEFAULTS_TTL:
        return cached[1]
    found = await ctx.services.kube.get(f"/api/v1/namespaces/{namespace}/configmaps/{DEFAULTS}")
    ctx.memory.namespace_defaults[namespace] = (time.monotonic(), found)
    return found


async def _attested(ctx: Context) -> bool:
    """Whether the ValidatingAdmissionPolicy binding that attests requests' authors (deploy/) is in place."""
    try:
        return await ctx.services.kube.get(ATTESTING) is not None
    except KubeError:
        return False  # not readable: not known to be there


def _annotations(body: dict[str, Any]) -> dict[str, Any]:
    return dict(Resource(body).metadata.get("annotations") or {})

