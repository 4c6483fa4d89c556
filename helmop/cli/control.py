"""``helmop rollback|pin|unpin|approve``: a person's hold on a release or a ConfigSync, and approvals of changes.

Each writes its request (helmop.api.requests: who, when, why) for the operator to act on, then waits for the
operator to have acted on it and prints the outcome, as ``helmop reconcile`` does. Who may approve is RBAC's
verb ``approve`` on the object (checked here with a SelfSubjectAccessReview for a clear answer, and enforced by
the helmop-requests admission policy, which the operator requires before it trusts an approval).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from helmop.api.kinds import Kind
from helmop.api.requests import Asked, Request
from helmop.infra.kube import Kube, KubeError
from helmop.views import requests

from . import target, verbs, why
from .errors import Failed

CONTROLLED = ("HelmRelease", "ConfigSync", "Kustomization")  # helmop's and Flux's kinds under change control
HELM_RELEASES = ("HelmRelease",)  # what `rollback` rolls back


async def rollback(args: argparse.Namespace, where: target.Target) -> int:
    revision = str(args.to_revision) if args.to_revision else ""
    if args.to_revision is not None and args.to_revision < 1:
        raise Failed("--to-revision is a helm revision: 1 or more")
    return await _ask(args, where, Asked.ROLLBACK, HELM_RELEASES, revision=revision)


async def pin(args: argparse.Namespace, where: target.Target) -> int:
    return await _ask(args, where, Asked.PIN, CONTROLLED)


async def unpin(args: argparse.Namespace, where: target.Target) -> int:
    return await _ask(args, where, Asked.UNPIN, CONTROLLED)


async def approve(args: argparse.Namespace, where: target.Target) -> int:
    kind, name = await _object(args, where, CONTROLLED)
    obj = await _read(where.kube, kind, where.namespace, name)
    await _may_approve(where.kube, kind, where.namespace, name)
    revision = args.revision or requests.waiting_revision(obj)
    if not revision:
        raise Failed(f"{kind.kind} {where.namespace}/{name}: nothing waits for an approval (status.pendingRevision "
                     "is empty); give --revision DIGEST to approve a revision before it is asked for")
    action = Asked.APPROVE_NOW if args.now else Asked.APPROVE
    return await _wait(where.kube, kind, where.namespace, name,
                       await _write(where.kube, kind, where.namespace, name, action, args.reason, revision),
                       args.timeout)


async def _ask(args: argparse.Namespace, where: target.Target, action: Asked, kinds: tuple[str, ...], *,
               revision: str = "") -> int:
    kind, name = await _object(args, where, kinds)
    await _read(where.kube, kind, where.namespace, name)
    request = await _write(where.kube, kind, where.namespace, name, action, args.reason, revision)
    return await _wait(where.kube, kind, where.namespace, name, request, args.timeout)


async def _object(args: argparse.Namespace, where: target.Target, kinds: tuple[str, ...]) -> tuple[Kind, str]:
    text, name = why.split(args.kind, args.name)
    kind = await verbs.resolve_kind(where.kube, text)
    if kind.kind not in kinds:
        raise Failed(f"{args.verb} applies to {' and '.join(kinds)}s, not {kind.kind}")
    return kind, name


async def _read(kube: Kube, kind: Kind, namespace: str, name: str) -> dict[str, Any]:
    obj = await kube.get(kind.path(namespace, name))
    if obj is None:
        raise Failed(f"{kind.kind} {namespace}/{name} not found")
    return obj


async def _write(kube: Kube, kind: Kind, namespace: str, name: str, action: Asked, reason: str,
                 revision: str) -> Request:
    try:
        return await requests.ask(kube, kind, namespace, name, action, reason=reason or "", revision=revision)
    except requests.Refused as exc:
        raise Failed(str(exc)) from None


async def _may_approve(kube: Kube, kind: Kind, namespace: str, name: str) -> None:
    """Forbidden, said clearly, when the caller lacks the ``approve`` verb on the object."""
    try:
        allowed = await requests.may_approve(kube, kind, namespace, name)
    except KubeError as exc:
        raise Failed(f"could not ask whether you may approve: {exc.message}") from None
    if not allowed:
        raise Failed(f'forbidden: {await requests.whoami(kube)} cannot "approve" resource "{kind.plural}" in API '
                     f'group "{kind.group}" in the namespace "{namespace}" (RBAC verb approve on {kind.kind} {name})')


async def _wait(kube: Kube, kind: Kind, namespace: str, name: str, request: Request, timeout: float) -> int:
    """Until the operator has acted on ``request``: its outcome (Ready) printed; 0 when Ready, 1 when not."""
    print(f"► {request.action.value} asked of {kind.kind} {namespace}/{name}; waiting for the operator",
          file=sys.stdout, flush=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready = requests.outcome(await kube.get(kind.path(namespace, name)) or {}, requests.acted_on(request))
        if ready is not None:
            ok = ready.get("status") == "True"
            print(f"{'✔' if ok else '✗'} {ready.get('reason', '')}: {ready.get('message', '')}", flush=True)
            return 0 if ok else 1
        await asyncio.sleep(0.5)
    raise Failed(f"the operator did not act on the {request.action.value} of {kind.kind} {namespace}/{name} "
                 f"within {timeout:.0f}s")
