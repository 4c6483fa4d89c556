"""What a person asks of one of helmop's resources, as ``helmop reconcile|suspend|resume`` and the web UI's
buttons ask it: annotations and ``spec.suspend``, which the operator acts on."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from helmop.api.kinds import FORCE_AT, REQUESTED_AT, RESET_AT, Kind
from helmop.api.objects import Resource
from helmop.infra.kube import Kube, KubeError


class Refused(Exception):
    """Why the request was not made (for the person who asked)."""


async def ask_reconcile(kube: Kube, kind: Kind, obj: dict[str, Any], *, reset: bool = False,
                        force: bool = False) -> str:
    """Ask for a reconcile now; the stamp its outcome will carry (``status.lastHandledReconcileAt``).
    ``reset``: the failure counts start afresh (one more try); ``force``: one forced upgrade."""
    this = Resource(obj)
    if this.spec.get("suspend"):
        raise Refused(f"{kind.kind} {this.namespace}/{this.name} is suspended; resume it first")
    stamp = datetime.now(UTC).isoformat()
    asked = {REQUESTED_AT: stamp, **({RESET_AT: stamp} if reset else {}), **({FORCE_AT: stamp} if force else {})}
    await _patch(kube, kind, this.namespace, this.name, {"metadata": {"annotations": asked}})
    return stamp


async def set_suspended(kube: Kube, kind: Kind, namespace: str, name: str, suspended: bool) -> None:
    patch: dict[str, Any] = {"spec": {"suspend": suspended}}
    if not suspended:  # resuming asks for a reconcile at once
        patch["metadata"] = {"annotations": {REQUESTED_AT: datetime.now(UTC).isoformat()}}
    await _patch(kube, kind, namespace, name, patch)


async def _patch(kube: Kube, kind: Kind, namespace: str, name: str, patch: dict[str, Any]) -> None:
    try:
        await kube.merge_patch(kind.path(namespace, name), patch)
    except KubeError as exc:
        raise Refused(exc.message) from None
