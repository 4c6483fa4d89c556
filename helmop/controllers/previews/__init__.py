"""One turn of a Preview, shaped as a HelmRelease's: its spec read, its world observed once (:mod:`.observe`: the
GitRepository, the Provider, the base branch, the open pull requests into it, their heads fetched), a pure plan of
which pull requests to post on (:func:`helmop.decisions.previews.plan`: those whose head moved since their last
comment, or never commented on), the acts one file each (:mod:`.render`, :mod:`.post`), and a typed status
(:mod:`helmop.decisions.settle.preview`). Nothing is applied to the cluster; deleted, a Preview leaves its comments
as they are (they say what each pull request changed when last previewed)."""

from __future__ import annotations

import secrets
from typing import Any

from helmop.api.errors import SpecError
from helmop.api.kinds import GITREPOSITORY, PREVIEW, PROVIDER
from helmop.api.objects import Resource
from helmop.api.previews import PreviewSpec, parse_preview
from helmop.api.status.preview import PreviewStatus
from helmop.decisions.previews import NOT_POSTED, plan
from helmop.decisions.settle import preview as settle

from ..context import Context
from ..outcome import DONE, FAILED, Outcome
from ..status import read_status, report, write_status
from .observe import Observed, Unobservable, observed
from .post import posted
from .render import previewed


async def reconcile(ctx: Context, body: dict[str, Any]) -> Outcome:
    this = Resource(body)
    status = read_status(PREVIEW, PreviewStatus, body)
    try:
        spec = parse_preview(this.spec)
    except SpecError as exc:
        await report(ctx, PREVIEW, body, status, False, exc.reason, str(exc), stalled=True)
        return DONE
    if spec.suspend:
        await write_status(ctx, PREVIEW, body, status)
        return DONE
    key = (PREVIEW.key, this.namespace, this.name)
    ctx.memory.refer(key, [(this.namespace, GITREPOSITORY.key, spec.source), (this.namespace, PROVIDER.key,
                                                                              spec.provider)]
                     + ([(this.namespace, "Secret", spec.decryption_secret)] if spec.decryption_secret else []))
    try:
        seen = await observed(ctx, this, spec)
    except Unobservable as exc:
        await report(ctx, PREVIEW, body, status, False, exc.reason, str(exc), stalled=not exc.transient)
        return FAILED if exc.transient else DONE
    ctx.memory.secrets[key] = seen.secrets
    return await _previewed(ctx, body, status, spec, seen)


async def _previewed(ctx: Context, body: dict[str, Any], status: PreviewStatus, spec: PreviewSpec,
                     seen: Observed) -> Outcome:
    """The pull requests the plan names rendered and posted, one after the other; the status settled."""
    this = Resource(body)
    decided = plan(status, this.generation, list(seen.open), spec.max_pull_requests)
    salt = secrets.token_bytes(32)  # the Secrets' digests of this turn
    records = list(decided.kept)
    for pr in decided.post:
        record = await posted(this, seen, await previewed(ctx, seen, spec, pr, salt))
        records.append(record)
        if record.result == NOT_POSTED:
            await ctx.services.events.warning(body, "PostFailed", f"pull request #{pr.number}: {record.message}")
        else:
            said = f"not rendered: {record.message}" if record.message else \
                f"{record.added} added, {record.changed} changed, {record.removed} removed"
            await ctx.services.events.normal(body, "Previewed", f"pull request #{pr.number} at {pr.head[:12]}: "
                                                                f"{said}")
    settled = settle.previewed(status, this.generation, seen.base, seen.base_revision, records, decided.left_out)
    await write_status(ctx, PREVIEW, body, settled)
    return FAILED if any(r.result == NOT_POSTED for r in records) else DONE


async def finalize(ctx: Context, body: dict[str, Any]) -> Outcome:
    """Nothing to clean up: the comments stay as last posted."""
    this = Resource(body)
    ctx.memory.drop((PREVIEW.key, this.namespace, this.name))
    return DONE
