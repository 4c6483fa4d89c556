"""One reconcile of a Receiver, as Flux's notification-controller makes it: the spec checked (Flux's rules, every CEL
expression compiled, no entry in another namespace under --no-cross-namespace-refs), the token read from its
Secret (again when the Secret changes, and at the interval), and the webhook path it makes written in the status
with Ready. The requests are served by every replica's webhook server (:mod:`helmop.infra.receivers`), which finds
a Receiver by that path."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from helmop.api.errors import SpecError
from helmop.api.kinds import Kind
from helmop.api.objects import Resource
from helmop.api.receivers import ReceiverSpec, parse_receiver, webhook_path
from helmop.api.status import READY
from helmop.api.status.receiver import ReceiverStatus
from helmop.decisions.health import check_expression
from helmop.decisions.settle import receiver as settle

from .context import Context
from .outcome import DONE, FAILED, Outcome
from .status import read_status, report, write_status


async def reconcile(ctx: Context, kind: Kind, body: dict[str, Any]) -> Outcome:
    """``kind``: helmop's Receiver or Flux's."""
    this = Resource(body)
    status = read_status(kind, ReceiverStatus, body)
    try:
        spec = _checked(ctx, kind, this)
    except SpecError as exc:
        await report(ctx, kind, body, status, False, exc.reason, str(exc), stalled=True)
        return DONE
    if spec.suspend:
        await write_status(ctx, kind, body, status)
        return DONE
    key = (kind.key, this.namespace, this.name)
    ctx.memory.refer(key, [(this.namespace, "Secret", spec.secret_ref)] if spec.secret_ref else [])
    token = await _token(ctx, this.namespace, spec.secret_ref)
    if isinstance(token, str):  # why there is none
        if await write_status(ctx, kind, body, settle.no_token(status, this.generation, token)):
            await ctx.services.events.warning(body, "TokenNotFound", token)
        return FAILED
    ctx.memory.secrets[key] = [token.decode("utf-8", "replace")] if token else []
    path = webhook_path(token, this.name, this.namespace)
    settled = settle.initialized(status, this.generation, path)
    if await write_status(ctx, kind, body, settled) and (status.webhook_path != path or not status.is_true(READY)):
        await ctx.services.events.normal(body, "Succeeded", f"Receiver initialized for path: {path}")
    return DONE


async def finalize(_ctx: Context, _kind: Kind, _body: dict[str, Any]) -> Outcome:
    """Nothing to clean up: the webhook path goes with the object."""
    return DONE


def _checked(ctx: Context, kind: Kind, this: Resource) -> ReceiverSpec:
    spec = parse_receiver(this.spec, flux=kind.flux)
    for field, expression in spec.expressions():
        try:
            check_expression(expression, field)
        except SpecError as exc:
            raise SpecError("InvalidCELExpression", str(exc)) from None
    for i, target in enumerate(spec.resources):
        ctx.tenancy.check_reference(this.namespace, target.namespace, f"spec.resources[{i}].namespace")
    return spec


async def _token(ctx: Context, namespace: str, secret: str) -> bytes | str:
    """The Secret's token (empty for generic-oidc, which has none), or why it cannot be read."""
    if not secret:
        return b""
    found = await ctx.services.kube.get(f"/api/v1/namespaces/{namespace}/secrets/{secret}")
    if found is None:
        return f"the Secret {namespace}/{secret} is not there"
    raw = (found.get("data") or {}).get("token")
    try:
        return base64.b64decode(raw, validate=True) if isinstance(raw, str) else \
            f"the Secret {namespace}/{secret} has no token key"
    except binascii.Error:
        return f"the Secret {namespace}/{secret}'s token is not base64"
