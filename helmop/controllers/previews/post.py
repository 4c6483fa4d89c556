"""A pull request's preview posted: its one comment of this Preview created or edited in place, then its head marked
(success when it rendered, whatever it changes; failure when it does not, or a release of it does not: the comment
still shows the rest), through the Provider's git host. What the turn read of secrets (the Provider's token, the
repository's credentials) is masked in what is posted, besides the Secret values the renderings masked."""

from __future__ import annotations

from helmop.api.objects import Resource
from helmop.api.redaction import redact
from helmop.api.status import now
from helmop.api.status.preview import PullRequestPreview
from helmop.decisions.previews import NOT_POSTED
from helmop.infra.kube import KubeError
from helmop.notifications.previews import PayloadError, Undeliverable

from .observe import World
from .render import Previewed


async def posted(this: Resource, seen: World, preview: Previewed) -> PullRequestPreview:
    """The record of what was posted (NotPosted, with why, when the host did not take it: tried again)."""
    changes = preview.changes
    counts = changes.counts if changes is not None else {}
    rendered = changes is not None and not changes.unrendered
    record = PullRequestPreview(number=preview.number, head_commit=preview.head, base_commit=preview.base,
                                added=counts.get("added", 0), changed=counts.get("changed", 0),
                                removed=counts.get("removed", 0), result="Rendered" if rendered else "Unbuildable",
                                message=redact(preview.problem, seen.secrets)[:1024])
    text = redact(preview.text(seen.base, f"Preview {this.namespace}/{this.name}"), seen.secrets)
    if changes is None:
        state, said = "failure", "does not render"
    else:  # a release not rendered fails the head too: its objects were not compared
        state, said = ("failure", f"{len(changes.unrendered)} not rendered") if changes.unrendered else (
            "success", changes.summary)
    try:
        await seen.host.comment(preview.number, f"Preview/{this.namespace}/{this.name}", text)
        await seen.host.mark(preview.head, state, f"helmop preview: {said}")
    except (PayloadError, Undeliverable, KubeError) as exc:
        why = redact(exc.message if isinstance(exc, KubeError) else str(exc), seen.secrets)
        return record.but(result=NOT_POSTED, message=f"not posted: {why}"[:1024])
    return record.but(posted_at=now())
