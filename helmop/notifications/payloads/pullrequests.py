"""The open change requests of a repository, as its host's API lists them (GitHub's and Gitea's pull requests,
GitLab's merge requests): each one's number, head commit and the branch it merges into, and the git reference its
head is fetched by (``refs/pull/<n>/head``, GitLab's ``refs/merge-requests/<n>/head``). One page: the
``LISTED`` most recently updated."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from .repositories import api_token, github_api, github_auth, owner_repo, repository
from .request import PayloadError, Request, Send, Target, answer_json, needs_address

LISTED = 50  # change requests one listing reads (Gitea's largest page)
_LISTING = 4 << 20  # bytes of a listing read
_SHA = re.compile(r"^[0-9a-f]{40}$")
# the comment types' hosts: the status types that mark commits there
STATUS_TYPES = {"githubpullrequestcomment": "github", "gitlabmergerequestcomment": "gitlab",
                "giteapullrequestcomment": "gitea"}


@dataclass(frozen=True)
class ChangeRequest:
    number: int
    head: str  # the head commit's sha
    base: str  # the branch it merges into
    ref: str  # the git reference of its head


def _github(target: Target, base: str) -> tuple[Request, str]:
    repo = github_api(target)[1]
    return Request(f"{repo}/pulls?state=open&base={quote(base, safe='')}&sort=updated&direction=desc"
                   f"&per_page={LISTED}", b"", github_auth(target), method="GET", reads=_LISTING), "refs/pull/{}/head"


def _gitlab(target: Target, base: str) -> tuple[Request, str]:
    root, path = repository(needs_address(target))
    return Request(f"{root}/api/v4/projects/{quote(path, safe='')}/merge_requests?state=opened"
                   f"&target_branch={quote(base, safe='')}&order_by=updated_at&per_page={LISTED}", b"",
                   {"PRIVATE-TOKEN": api_token(target), **target.headers}, method="GET",
                   reads=_LISTING), "refs/merge-requests/{}/head"


def _gitea(target: Target, base: str) -> tuple[Request, str]:
    root, path = repository(needs_address(target))
    owner, name = owner_repo(path, target.address)
    return Request(f"{root}/api/v1/repos/{quote(owner)}/{quote(name)}/pulls?state=open&sort=recentupdate"
                   f"&limit={LISTED}", b"", {"Authorization": f"token {api_token(target)}", **target.headers},
                   method="GET", reads=_LISTING), "refs/pull/{}/head"


_LISTINGS = {"githubpullrequestcomment": _github, "gitlabmergerequestcomment": _gitlab,
             "giteapullrequestcomment": _gitea}


def _entry(item: Any, gitlab: bool) -> tuple[int, str, str] | None:
    """(number, head sha, base branch) of one listed change request; None when it does not say them."""
    if not isinstance(item, dict):
        return None
    if gitlab:
        number, head, base = item.get("iid"), item.get("sha"), item.get("target_branch")
    else:
        number = item.get("number")
        head = (item.get("head") or {}).get("sha") if isinstance(item.get("head"), dict) else None
        base = (item.get("base") or {}).get("ref") if isinstance(item.get("base"), dict) else None
    if not isinstance(number, int) or isinstance(number, bool) or number <= 0 or not isinstance(head, str) \
            or not _SHA.match(head) or not isinstance(base, str):
        return None
    return number, head, base


async def open_change_requests(target: Target, base: str, send: Send) -> list[ChangeRequest]:
    """The open change requests of the target's repository that merge into ``base``, the most recently updated
    first."""
    if target.type not in _LISTINGS:
        raise PayloadError(f"a {target.type} provider does not comment on pull requests")
    request, ref = _LISTINGS[target.type](target, base)
    listed = answer_json(await send(request), "the git host")
    if not isinstance(listed, list):
        raise PayloadError("the git host's pull requests are not a list")
    found = [_entry(item, target.type == "gitlabmergerequestcomment") for item in listed[:LISTED]]
    return [ChangeRequest(number, head, branch, ref.format(number)) for number, head, branch in
            (e for e in found if e is not None) if branch == base]
