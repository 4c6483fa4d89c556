"""What a person asks of one of helmop's resources, as ``helmop reconcile|suspend|resume|rollback|pin|unpin|
approve`` and the web UI's buttons ask it: annotations and ``spec.suspend``, which the operator acts on, each
with who asked (as the API server names the asker) and why (helmop.api.requests)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from helmop.api import requests
from helmop.api.conditions import condition_of
from helmop.api.kinds import FORCE_AT, REQUESTED_AT, RESET_AT, Kind
from helmop.api.objects import Resource
from helmop.api.requests import Asked, Request
from helmop.api.status import Controlled, Status
from helmop.infra.kube import Kube, KubeError

from .statuses import read, status_of


def outcome(obj: dict[str, Any], handled: Callable[[Status], bool]) -> dict[str, Any] | None:
    """The object's Ready condition once the operator has acted on a request (``handled`` says so of its status)
    and is not still at work on it; None until then. What `helmop reconcile|rollback|...`, the MCP server's write
    tools and anything else that waits for an outcome read."""
    if not handled(read(Status, obj)) or condition_of(obj, "Reconciling").get("status") == "True":
        return None
    return condition_of(obj, "Ready")


def acted_on(request: Request) -> Callable[[Status], bool]:
    """Whether a status records ``request`` as acted on (its ``at`` under its annotation in handledRequests)."""
    return lambda status: status.handled_requests.get(requests.handled_as(request.action)) == request.at


def reconciled(stamp: str) -> Callable[[Status], bool]:
    """Whether a status records the reconcile asked for at ``stamp`` as handled."""
    return lambda status: status.last_handled_reconcile_at == stamp


class Refused(Exception):
    """Why the request was not made (for the person who asked)."""


async def whoami(kube: Kube) -> str:
    """The caller, as the API server names them (``kubectl auth whoami``; the kubeconfig's context's name when the
    server does not say): what a request records as its author."""
    try:
        review = await kube.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", {
            "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}, attempts=1)
    except KubeError:
        return kube.conn.context or "kubeconfig"
    return str(((review.get("status") or {}).get("userInfo") or {}).get("username") or "kubeconfig")


async def ask_reconcile(kube: Kube, kind: Kind, obj: dict[str, Any], *, reset: bool = False,
                        force: bool = False, reason: str = "", by: str = "") -> str:
    """Ask for a reconcile now; the stamp its outcome will carry (``status.lastHandledReconcileAt``).
    ``reset``: the failure counts start afresh (one more try); ``force``: one forced upgrade. ``by``: the asker
    (found with :func:`whoami` when not given)."""
    this = Resource(obj)
    if this.spec.get("suspend"):
        raise Refused(f"{kind.kind} {this.namespace}/{this.name} is suspended; resume it first")
    stamp = datetime.now(UTC).isoformat()
    action = Asked.FORCE if force else Asked.RESET if reset else Asked.RECONCILE
    asked = {REQUESTED_AT: stamp, **({RESET_AT: stamp} if reset else {}), **({FORCE_AT: stamp} if force else {}),
             requests.ASKED: requests.encode(Request(action, by or await whoami(kube), stamp, reason))}
    await _patch(kube, kind, this.namespace, this.name, {"metadata": {"annotations": asked}})
    return stamp


async def set_suspended(kube: Kube, kind: Kind, namespace: str, name: str, suspended: bool, *, reason: str = "",
                        by: str = "") -> None:
    stamp = datetime.now(UTC).isoformat()
    action = Asked.SUSPEND if suspended else Asked.RESUME
    annotations = {requests.ASKED: requests.encode(Request(action, by or await whoami(kube), stamp, reason))}
    if not suspended:  # resuming asks for a reconcile at once
        annotations[REQUESTED_AT] = stamp
    patch = {"spec": {"suspend": suspended}, "metadata": {"annotations": annotations}}
    await _patch(kube, kind, namespace, name, patch)


async def ask(kube: Kube, kind: Kind, namespace: str, name: str, action: Asked, *, reason: str = "",
              revision: str = "", by: str = "") -> Request:
    """A change-control request (rollback, pin, unpin, approve) written for the operator to act on (a new request
    wakes it, as a reconcile request does)."""
    request = Request(action, by or await whoami(kube), datetime.now(UTC).isoformat(), reason, revision)
    annotation = requests.annotation_of(action)
    await _patch(kube, kind, namespace, name, {"metadata": {"annotations": {annotation: requests.encode(request)}}})
    return request


def waiting_revision(obj: dict[str, Any]) -> str:
    """The revision an approval is asked for now (status.pendingRevision; "" when nothing waits)."""
    state = status_of(obj)
    return state.pending_revision if isinstance(state, Controlled) else ""


async def may_approve(kube: Kube, kind: Kind, namespace: str, name: str) -> bool:
    """Whether the caller holds RBAC's verb ``approve`` on the object (a SelfSubjectAccessReview): what the
    helmop-requests admission policy requires of an approval's author."""
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
              "spec": {"resourceAttributes": {"group": kind.group, "resource": kind.plural, "verb": "approve",
                                              "namespace": namespace, "name": name}}}
    answer = await kube.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review)
    return bool((answer.get("status") or {}).get("allowed"))


async def _patch(kube: Kube, kind: Kind, namespace: str, name: str, patch: dict[str, Any]) -> None:
    try:
        await kube.merge_patch(kind.path(namespace, name), patch)
    except KubeError as exc:
        raise Refused(exc.message) from None
