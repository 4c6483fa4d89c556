"""One turn of a Preview, shaped as a HelmRelease's: its spec read, its world observed once (:mod:`.observe`: the
GitRepository, the Provider, the base branch, the open pull requests into it, their heads fetched), a pure plan of
which pull requests to post on (:func:`helmop.decisions.previews.plan`: those whose head moved since their last
comment, or never commented on), the acts one file each (:mod:`.render`, :mod:`.post`), and a typed status
(:mod:`helmop.decisions.settle.preview`). Nothing is applied to the cluster; deleted, a Preview leaves its comments
as they are (they say what each pull request changed when last previewed)."""

from __future__ import annotations

import secrets

from helmop.api.kinds import GITREPOSITORY, PROVIDER
from helmop.api.objects import ObjectKey
from helmop.api.previews import PreviewSpec
from helmop.api.status.preview import PreviewStatus
from helmop.decisions.previews import NOT_POSTED, plan
from helmop.decisions.settle import preview as settle

from ..outcome import DONE, FAILED, Outcome
from ..turn import Turn
from .observe import World, observed
from .post import posted
from .render import previewed


async def reconcile(turn: Turn[PreviewSpec, PreviewStatus]) -> Outcome:
    spec, namespace = turn.spec, turn.namespace
    turn.refer([ObjectKey(GITREPOSITORY.key, namespace, spec.source), ObjectKey(PROVIDER.key, namespace, spec.provider),
                *turn.secrets_named(spec.decryption_secret)])
    seen = await observed(turn.ctx, turn.this, spec)
    turn.read_secrets(seen.secrets)
    return await _previewed(turn, seen)


async def _previewed(turn: Turn[PreviewSpec, PreviewStatus], seen: World) -> Outcome:
    """The pull requests the plan names rendered and posted, one after the other; the status settled."""
    spec = turn.spec
    decided = plan(turn.status, turn.generation, list(seen.open), spec.max_pull_requests)
    salt = secrets.token_bytes(32)  # the Secrets' digests of this turn
    records = list(decided.kept)
    for pr in decided.post:
        record = await posted(turn.this, seen, await previewed(turn.ctx, seen, spec, pr, salt))
        records.append(record)
        if record.result == NOT_POSTED:
            await turn.events.warning("PostFailed", f"pull request #{pr.number}: {record.message}")
        else:
            said = f"not rendered: {record.message}" if record.message else \
                f"{record.added} added, {record.changed} changed, {record.removed} removed"
            await turn.events.normal("Previewed", f"pull request #{pr.number} at {pr.head[:12]}: {said}")
    await turn.write(settle.previewed(turn.status, turn.generation, seen.base, seen.base_revision, records,
                                      decided.left_out))
    return FAILED if any(r.result == NOT_POSTED for r in records) else DONE
