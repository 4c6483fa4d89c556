"""What ``helmop mcp``'s write tools do (only with ``--read-write``): the requests ``helmop reconcile|suspend|resume|
rollback|pin|unpin|approve`` make (``helmop.views.requests``), in the caller's name as the API server gives it
(a SelfSubjectReview) and with the caller's rights: the API server refuses what the caller may not do, and the
helmop-requests admission policy what is written in another's name. Each waits a bounded time for the operator's
outcome and says it, or says that it has not come yet (the request stands)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from helmop.api.kinds import Kind
from helmop.api.requests import Asked
from helmop.api.status import Status
from helmop.views import requests

from .. import verbs
from ..errors import Failed
from .reads import Caller, bounded, read_object

MAX_WAIT = 300.0  # seconds a tool waits for the operator's outcome at most
CONTROLLED = ("HelmRelease", "ConfigSync", "Kustomization")  # under change control (pins, approvals)


async def _outcome(caller: Caller, kind: Kind, namespace: str, name: str, handled: Callable[[Status], bool],
                   wait: float) -> dict[str, Any]:
    """The Ready condition once the operator has handled the request (``handled``), within ``wait`` seconds."""
    deadline = time.monotonic() + max(0.0, min(wait, MAX_WAIT))
    while True:
        obj = await caller.kube.get(kind.path(namespace, name)) or {}
        ready = requests.outcome(obj, handled)
        if ready is not None:
            return {"handled": True, "ready": {k: ready.get(k, "") for k in ("status", "reason", "message")}}
        if time.monotonic() >= deadline:
            return {"handled": False, "note": f"the operator has not acted on it within {wait:g}s; the request stands"}
        await asyncio.sleep(0.5)


def _refused(exc: requests.Refused) -> Failed:
    return Failed(str(exc))


async def reconcile(caller: Caller, kind: str, namespace: str, name: str, *, reason: str, reset: bool, force: bool,
                    wait: float) -> dict[str, Any]:
    found, obj = await read_object(caller, kind, namespace, name)
    if (reset or force) and found.kind != "HelmRelease":
        raise Failed("reset and force apply to HelmReleases")
    try:
        stamp = await requests.ask_reconcile(caller.kube, found, obj, reset=reset, force=force, reason=reason)
    except requests.Refused as exc:
        raise _refused(exc) from None
    where = namespace or caller.namespace
    outcome = await _outcome(caller, found, where, name, requests.reconciled(stamp), wait)
    return bounded({"asked": "reconcile", "object": f"{found.kind}/{where}/{name}", **outcome})


async def set_suspended(caller: Caller, kind: str, namespace: str, name: str, suspended: bool, *,
                        reason: str) -> dict[str, Any]:
    found = verbs.kind_of(kind)  # helmop's and Flux's kinds: an app resource's spec is its chart's values
    where = namespace or caller.namespace
    try:
        await requests.set_suspended(caller.kube, found, where, name, suspended, reason=reason)
    except requests.Refused as exc:
        raise _refused(exc) from None
    return {"asked": "suspend" if suspended else "resume", "object": f"{found.kind}/{where}/{name}", "done": True}


async def held(caller: Caller, kind: str, namespace: str, name: str, action: Asked, *, reason: str, revision: str,
               wait: float) -> dict[str, Any]:
    """A rollback, pin, unpin or approval, as ``helmop rollback|pin|unpin|approve`` asks it."""
    found, obj = await read_object(caller, kind, namespace, name)
    kinds = ("HelmRelease",) if action == Asked.ROLLBACK else CONTROLLED
    if found.kind not in kinds:
        raise Failed(f"{action.value} applies to {' and '.join(kinds)}s, not {found.kind}")
    where = namespace or caller.namespace
    if action in (Asked.APPROVE, Asked.APPROVE_NOW):
        revision = await _approvable(caller, found, where, name, obj, revision)
    try:
        request = await requests.ask(caller.kube, found, where, name, action, reason=reason, revision=revision)
    except requests.Refused as exc:
        raise _refused(exc) from None
    outcome = await _outcome(caller, found, where, name, requests.acted_on(request), wait)
    return bounded({"asked": action.value, "by": request.by, "object": f"{found.kind}/{where}/{name}", **outcome})


async def _approvable(caller: Caller, kind: Kind, namespace: str, name: str, obj: dict[str, Any],
                      revision: str) -> str:
    """The revision to approve (the one waiting, unless given); refused, clearly, without RBAC's verb approve."""
    if not await requests.may_approve(caller.kube, kind, namespace, name):
        raise Failed(f'forbidden: {await requests.whoami(caller.kube)} may not "approve" {kind.plural}.{kind.group} '
                     f"{namespace}/{name} (RBAC verb approve on the object)")
    waiting = requests.waiting_revision(obj)
    if not (revision or waiting):
        raise Failed(f"{kind.kind} {namespace}/{name}: nothing waits for an approval (status.pendingRevision is "
                     "empty); give the revision to approve one before it is asked for")
    return revision or waiting
