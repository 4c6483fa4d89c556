"""One reconcile of a Receiver, as Flux's notification-controller makes it: its spec read as
:mod:`helmop.decisions.specs` does (Flux's rules, every CEL expression compiled, no entry in another namespace under
--no-cross-namespace-refs), the token read from its
Secret (again when the Secret changes, and at the interval), and the webhook path it makes written in the status
with Ready. The requests are served by every replica's webhook server (:mod:`helmop.infra.receivers`), which finds
a Receiver by that path."""

from __future__ import annotations

import base64
import binascii

from helmop.api.receivers import ReceiverSpec, webhook_path
from helmop.api.status import READY
from helmop.api.status.receiver import ReceiverStatus
from helmop.decisions.settle import receiver as settle

from .context import Context
from .outcome import DONE, FAILED, Outcome
from .turn import Turn


async def reconcile(turn: Turn[ReceiverSpec, ReceiverStatus]) -> Outcome:
    """helmop's Receiver or Flux's."""
    spec, status = turn.spec, turn.status
    turn.refer_secrets(spec.secret_ref)
    token = await _token(turn.ctx, turn.namespace, spec.secret_ref)
    if isinstance(token, str):  # why there is none
        if await turn.write(settle.no_token(status, turn.generation, token)):
            await turn.events.warning("TokenNotFound", token)
        return FAILED
    turn.read_secrets([token.decode("utf-8", "replace")] if token else [])
    path = webhook_path(token, turn.name, turn.namespace)
    if await turn.write(settle.initialized(status, turn.generation, path)) and (
            status.webhook_path != path or not status.is_true(READY)):
        await turn.events.normal("Succeeded", f"Receiver initialized for path: {path}")
    return DONE


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
