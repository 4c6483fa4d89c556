"""A Preview's status: the base it compared with, and what it last posted on each open pull request."""

from __future__ import annotations

from . import Status, Struct


class PullRequestPreview(Struct, frozen=True):
    number: int
    head_commit: str  # the head previewed
    base_commit: str = ""  # what it was compared with: the merge base of the head and the base branch
    added: int = 0
    changed: int = 0
    removed: int = 0
    result: str = ""  # Rendered, Unbuildable (the head does not build: said in the comment), NotPosted
    message: str = ""  # why, when not Rendered
    posted_at: str = ""


class PreviewStatus(Status, frozen=True):
    base_revision: str = ""  # the base branch's revision when the pull requests were last listed
    pull_requests: tuple[PullRequestPreview, ...] = ()
