"""How a Preview's status changes: the records of the open pull requests as posted (sorted by number), the base's
revision, and Ready: True once every one is posted (whether its head renders or not: the comment says), False with
PostFailed while the git host did not take one (retried), or with the reason a turn could not list or fetch them."""

from __future__ import annotations

from helmop.api.status.preview import PreviewStatus, PullRequestPreview
from helmop.decisions.previews import NOT_POSTED

from . import outcome


def previewed(status: PreviewStatus, generation: int, base: str, revision: str,
              records: list[PullRequestPreview], left_out: int) -> PreviewStatus:
    records = sorted(records, key=lambda r: r.number)
    out = status.but(base_revision=revision, pull_requests=tuple(records))
    failed = [r for r in records if r.result == NOT_POSTED]
    if failed:
        return outcome(out, generation, False, "PostFailed", f"pull request #{failed[0].number}: {failed[0].message}")
    said = f"{len(records)} open pull request(s) into {base} previewed" if records else \
        f"no open pull request into {base}"
    return outcome(out, generation, True, "Succeeded", said + (f" ({left_out} more not: spec.maxPullRequests)"
                                                               if left_out else ""))
