"""Phase one of an apply stage, for each object: read it when it was not there before (an earlier stage's CRD serves
it now), take over what kubectl wrote of it (the dry run and the apply then say what this ConfigSync's manager
makes of it) and dry-run its apply. What is seen is decided by :func:`helmop.decisions.syncplan.staged`."""

from __future__ import annotations

from typing import Any

from helmop.decisions.sync import ObjectId
from helmop.decisions.syncplan import MANAGER, Failure, Seen, Step, prepared
from helmop.infra.kube import Kube, KubeError

from .observe import path_of

JSON_PATCH = "application/json-patch+json"


async def seen(kube: Kube, oid: ObjectId, obj: dict[str, Any], live: dict[str, Any] | None) -> Seen:
    """``obj`` (``live``: as read before the sync, None when it was absent) as it is now and dry-run."""
    step = Step.READ
    try:
        path = await path_of(kube, oid)
        live = live if live is not None else await kube.get(path)
        skipped, patch = prepared(obj, live)
        if skipped:
            return Seen(live, skipped)
        if patch and live is not None:
            step = Step.TAKE_OVER
            live = await kube.request("PATCH", path, patch, params={"fieldManager": MANAGER},
                                      content_type=JSON_PATCH)
        step = Step.DRY_RUN
        return Seen(live, dry_run=await kube.apply(path, obj, MANAGER, dry_run=True))
    except KubeError as exc:
        return Seen(live, failure=Failure(step, exc.status, exc.reason, exc.message))
