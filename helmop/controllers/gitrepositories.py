"""One reconcile of a GitRepository: fetch into the mirror, resolve the ref, publish the revision.

When the revision changes, the HelmReleases and ConfigSyncs that read this repository are woken.
"""

from __future__ import annotations

import copy
import logging
import time
from typing import Any

from helmop.api import conditions as cond
from helmop.api.helmrelease import GROUP, VERSION, SpecError
from helmop.api.sources import GIT_PLURAL, parse_git_repository
from helmop.sources.errors import SourceError
from helmop.sources.git import GitRef

from . import metrics
from .context import Context
from .helmreleases import REQUESTED_AT
from .inputs import InputError, git_auth
from .kube import KubeError

log = logging.getLogger(__name__)


def webhook_path(namespace: str, name: str) -> str:
    return f"/hooks/{namespace}/{name}"


async def write_status(ctx: Context, body: dict[str, Any], plural: str, status: dict[str, Any]) -> None:
    """Merge-patch ``status`` if it changed (shared by the source controllers)."""
    if status == body.get("status"):
        return
    meta = body["metadata"]
    try:
        await ctx.kube.request("PATCH", f"/apis/{GROUP}/{VERSION}/namespaces/{meta['namespace']}/{plural}/"
                                        f"{meta['name']}/status", {"status": status},
                               content_type="application/merge-patch+json")
    except KubeError as exc:
        if exc.status != 404:
            raise
    body["status"] = status


def with_ready(body: dict[str, Any], status: dict[str, Any], ready: bool, reason: str, message: str,
               *, stalled: bool = False) -> dict[str, Any]:
    generation = body["metadata"].get("generation", 0)
    requested = (body["metadata"].get("annotations") or {}).get(REQUESTED_AT)
    if requested:
        status = {**status, "lastHandledReconcileAt": requested}
    conditions = cond.set_condition(status.get("conditions") or [], cond.READY, ready, reason, message, generation)
    conditions = cond.remove_condition(conditions, cond.RECONCILING)
    if stalled:
        conditions = cond.set_condition(conditions, cond.STALLED, True, reason, message, generation)
    else:
        conditions = cond.remove_condition(conditions, cond.STALLED)
    return {**status, "conditions": conditions, "observedGeneration": generation}


async def reconcile(ctx: Context, body: dict[str, Any]) -> float | None:
    """Returns a retry delay after a transient failure, else None (come back at the interval)."""
    meta = body["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    status = copy.deepcopy(body.get("status") or {})
    try:
        spec = parse_git_repository(body.get("spec") or {})
    except SpecError as exc:
        await report(ctx, body, GIT_PLURAL, status, False, exc.reason, str(exc), stalled=True)
        return None
    if spec.webhook_secret_ref:
        status["webhookPath"] = webhook_path(namespace, name)
    else:
        status.pop("webhookPath", None)
    if spec.suspend:
        await write_status(ctx, body, GIT_PLURAL, status)
        return None
    ctx.refer(("GitRepository", namespace, name), [(namespace, "Secret", spec.secret_ref)] if spec.secret_ref else [])
    ctx.git.timeout = spec.timeout
    try:
        auth = await git_auth(ctx.kube, namespace, body)
        started = time.monotonic()
        try:
            await ctx.git.fetch(spec.url, auth)
        except SourceError:
            metrics.GIT_FETCH.labels("failure").observe(time.monotonic() - started)
            raise
        metrics.GIT_FETCH.labels("success").observe(time.monotonic() - started)
        revision, _sha = await ctx.git.resolve(spec.url, GitRef(spec.branch, spec.tag, spec.semver, spec.commit))
    except (SourceError, InputError) as exc:
        transient = getattr(exc, "transient", False)
        await report(ctx, body, GIT_PLURAL, status, False, exc.reason, str(exc), stalled=not transient)
        return 15.0 if transient else None
    previous = (status.get("artifact") or {}).get("revision")
    status["lastFetchedAt"] = cond.now()
    if previous != revision:
        status["artifact"] = {"revision": revision, "lastUpdateTime": cond.now()}
    message = f"stored artifact for revision {revision}"
    await write_status(ctx, body, GIT_PLURAL, with_ready(body, status, True, "Succeeded", message))
    if previous != revision:
        await ctx.events.normal(body, "NewArtifact", message)
        ctx.wake_referrers(namespace, "GitRepository", name)
    return None


async def report(ctx: Context, body: dict[str, Any], plural: str, status: dict[str, Any], ready: bool, reason: str,
                 message: str, *, stalled: bool = False, event: bool = True) -> None:
    """Write the Ready condition (and Stalled) and post the matching Event (shared by the source kinds)."""
    await write_status(ctx, body, plural, with_ready(body, status, ready, reason, message, stalled=stalled))
    if event:
        await (ctx.events.normal if ready else ctx.events.warning)(body, reason, message)


async def finalize(ctx: Context, body: dict[str, Any]) -> None:
    """Drop the mirror when no other GitRepository uses the same URL."""
    meta = body["metadata"]
    ctx.drop(("GitRepository", meta["namespace"], meta["name"]))
    url = str((body.get("spec") or {}).get("url", ""))
    others = await ctx.kube.list(f"/apis/{GROUP}/{VERSION}/{GIT_PLURAL}")
    if url and not any((o.get("spec") or {}).get("url") == url and o["metadata"]["uid"] != meta.get("uid")
                       for o in others):
        ctx.git.forget(url)
        log.info("dropped the git cache of %s/%s", meta["namespace"], meta["name"])
