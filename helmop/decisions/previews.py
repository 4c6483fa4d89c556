"""Which open pull requests a Preview posts on in a turn: a pull request is previewed again only when its head moved
(a new push), its last comment was not posted, or the Preview's spec changed since; the others keep what they have
(the base branch moving does not change a preview: each head is compared with its merge base). Records of pull
requests no longer open (or no longer into the base branch) are dropped. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from helmop.api.status.preview import PreviewStatus, PullRequestPreview

NOT_POSTED = "NotPosted"


@dataclass(frozen=True)
class Open:
    """An open pull request into the base branch, its head as fetched."""

    number: int
    head: str


@dataclass(frozen=True)
class Plan:
    post: tuple[Open, ...]  # render and post, the most recently updated first
    kept: tuple[PullRequestPreview, ...]  # posted already for the head they have
    closed: tuple[int, ...]  # records dropped
    left_out: int  # open ones beyond spec.maxPullRequests


def plan(status: PreviewStatus, generation: int, found: list[Open], most: int) -> Plan:
    considered = found[:most]
    records = {r.number: r for r in status.pull_requests}
    same_spec = status.observed_generation == generation

    def current(pr: Open) -> PullRequestPreview | None:
        record = records.get(pr.number)
        fresh = record is not None and record.head_commit == pr.head and record.result != NOT_POSTED
        return record if same_spec and fresh else None

    kept = tuple(r for r in (current(pr) for pr in considered) if r is not None)
    post = tuple(pr for pr in considered if current(pr) is None)
    closed = tuple(sorted(set(records) - {pr.number for pr in considered}))
    return Plan(post, kept, closed, len(found) - len(considered))
