"""One reconcile of a GitRepository: fetch into the mirror, resolve the ref, publish the revision.

When the revision changes, the HelmReleases and ConfigSyncs that read this repository are woken.
"""

from __future__ import annotations

import copy
import logging
import time
from typing import Any

from helmop.api import conditions as cond
from helmop.api.errors import SpecError
from helmop.api.kinds import GITREPOSITORY
from helmop.api.objects import Resource
from helmop.api.sources import parse_git_repository
from helmop.helm.inputs import InputError, git_auth
from helmop.sources.errors import SourceError
from helmop.sources.git import GitRef, check_ref

from .context import Context
from .outcome import DONE, FAILED, Outcome
from .status import report, with_ready, write_status

log = logging.getLogger(__name__)


def webhook_path(namespace: str, name: str) -> str:
    return f"/hooks/{namespace}/{name}"


async def reconcile(ctx: Context, body: dict[str, Any]) -> Outcome:
    """Returns a retry delay after a transient failure, else None (come back at the interval)."""
    this = Resource(body)
    namespace, name = this.namespace, this.name
    status = copy.deepcopy(body.get("status") or {})
    try:
        spec = parse_git_repository(body.get("spec") or {})
    except SpecError as exc:
        await report(ctx, GITREPOSITORY, body, status, False, exc.reason, str(exc), stalled=True)
        return DONE
    if spec.webhook_secret_ref:
        status["webhookPath"] = webhook_path(namespace, name)
    else:
        status.pop("webhookPath", None)
    if spec.suspend:
        await write_status(ctx, GITREPOSITORY, body, status)
        return DONE
    ctx.refer(("GitRepository", namespace, name), [(namespace, "Secret", spec.secret_ref)] if spec.secret_ref else [])
    try:
        ref = GitRef(spec.branch, spec.tag, spec.semver, spec.commit)
        check_ref(ref)
        auth = await git_auth(ctx.kube, namespace, body)
        ctx.secrets[("GitRepository", namespace, name)] = auth.secrets()
        started = time.monotonic()
        try:
            await ctx.git.fetch(spec.url, auth, timeout=spec.timeout)
        except SourceError:
            ctx.metrics.git_fetch.labels("failure").observe(time.monotonic() - started)
            raise
        ctx.metrics.git_fetch.labels("success").observe(time.monotonic() - started)
        revision, _sha = await ctx.git.resolve(spec.url, ref, auth)
    except (SourceError, InputError) as exc:
        await report(ctx, GITREPOSITORY, body, status, False, exc.reason, str(exc), stalled=not exc.transient)
        return FAILED if exc.transient else DONE
    previous = (status.get("artifact") or {}).get("revision")
    status["lastFetchedAt"] = cond.now()
    if previous != revision:
        status["artifact"] = {"revision": revision, "lastUpdateTime": cond.now()}
    message = f"stored artifact for revision {revision}"
    await write_status(ctx, GITREPOSITORY, body, with_ready(body, status, True, "Succeeded", message))
    if previous != revision:
        await ctx.events.normal(body, "NewArtifact", message)
        ctx.wake_referrers(namespace, "GitRepository", name)
    return DONE


async def finalize(ctx: Context, body: dict[str, Any]) -> Outcome:
    """Drop the mirror when no other GitRepository uses the same URL."""
    this = Resource(body)
    ctx.drop(("GitRepository", this.namespace, this.name))
    url = str((body.get("spec") or {}).get("url", ""))
    others = await ctx.kube.list(GITREPOSITORY.path())
    if url and not any((o.get("spec") or {}).get("url") == url and Resource(o).uid != this.uid
                       for o in others):
        ctx.git.forget(url)
        log.info("dropped the git cache of %s/%s", this.namespace, this.name)
    return DONE
