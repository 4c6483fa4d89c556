"""Pull request comments (GitHub, Gitea) and merge request notes (GitLab): one comment per object and Provider on
the change request the object's ``event.toolkit.fluxcd.io/change_request`` annotation names, updated in place by
each later event; an object without one is not commented on.

The comment is found as Flux finds it: among the first 100 of the change request, the one written by the token's
own user that carries the marker ``<!-- flux-pr-comment-key:<provider uid>/<kind>/<namespace>/<name> -->`` (GitLab:
``flux-mr-comment-key``), so a comment Flux's controller wrote is taken over after a migration. A conversation of
requests, not one: the user, the comments, then the comment created or edited. A Preview keeps its one comment on each
pull request the same way (:func:`keep`, keyed by the Preview)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from helmop.api.notifications import CHANGE_REQUEST, Event

from .repositories import api_token, github_api, github_auth, owner_repo, repository
from .request import PayloadError, Request, Send, Target, answer_json, json_request, markdown_post, needs_address

LISTED = 100  # comments looked through (one page: Flux's)
_LISTING = 1 << 20  # bytes of a page of comments read
_USER = 64 << 10  # bytes of the token's user read


@dataclass(frozen=True)
class Thread:
    """Where a host keeps a change request's comments, and how it names their authors."""

    user: str  # the token's own user
    comments: str  # the first page of comments, oldest first
    create: str
    edit: str  # a comment, by "{id}"
    method: str  # of an edit
    author: str  # the key of a comment's author (a user object)
    login: str  # the key of a user's name
    headers: dict[str, str]
    prefix: str  # of the marker


def _number(event: Event) -> int | None:
    text = event.metadata.get(CHANGE_REQUEST, "")
    if not text:
        return None
    if not text.isdigit() or len(text) > 12:
        raise PayloadError(f"the {CHANGE_REQUEST} metadata {text[:32]!r} is not a pull request's number")
    return int(text)


def _login(user: Any, key: str) -> str:
    return str(user.get(key) or "") if isinstance(user, dict) else ""


async def _get(send: Send, url: str, thread: Thread, reads: int) -> Any:
    return answer_json(await send(Request(url, b"", thread.headers, method="GET", reads=reads)), "the git host")


async def converse(event: Event, target: Target, send: Send, thread: Thread) -> int:
    """The comment written or updated; the number of requests it took."""
    return await keep(target, send, thread, f"{event.kind}/{event.namespace}/{event.name}", markdown_post(event))


async def keep(target: Target, send: Send, thread: Thread, key: str, text: str) -> int:
    """The one comment of this Provider and ``key`` (kind/namespace/name of what it is about) on the change request:
    created, or edited in place to say ``text``; the number of requests it took."""
    marker = f"<!-- {thread.prefix}:{target.provider_uid}/{key} -->"
    body = {"body": f"{marker}\n\n{text}"}
    me = _login(await _get(send, thread.user, thread, _USER), thread.login)
    if not me:
        raise PayloadError("the git host did not say who the token's user is")
    listed = await _get(send, thread.comments, thread, _LISTING)
    if not isinstance(listed, list):
        raise PayloadError("the git host's comments are not a list")
    mine = next((c for c in listed if isinstance(c, dict) and _login(c.get(thread.author), thread.login) == me
                 and marker in str(c.get("body") or "")), None)
    if mine is None:
        await send(json_request(thread.create, body, thread.headers))
        return 3
    if not str(mine.get("id")).isdigit():
        raise PayloadError("the git host's comment has no number for an id")
    edit = json_request(thread.edit.replace("{id}", str(mine["id"])), body, thread.headers)
    await send(Request(edit.url, edit.body, edit.headers, method=thread.method))
    return 3


def _github(target: Target, number: int) -> Thread:
    api, repo = github_api(target)
    return Thread(f"{api}/user", f"{repo}/issues/{number}/comments?sort=created&direction=asc&per_page={LISTED}",
                  f"{repo}/issues/{number}/comments", f"{repo}/issues/comments/{{id}}", "PATCH", "user", "login",
                  github_auth(target), "flux-pr-comment-key")


def _gitlab(target: Target, number: int) -> Thread:
    base, path = repository(needs_address(target))
    notes = f"{base}/api/v4/projects/{quote(path, safe='')}/merge_requests/{number}/notes"
    return Thread(f"{base}/api/v4/user", f"{notes}?sort=asc&order_by=created_at&per_page={LISTED}", notes,
                  f"{notes}/{{id}}", "PUT", "author", "username",
                  {"PRIVATE-TOKEN": api_token(target), **target.headers}, "flux-mr-comment-key")


def _gitea(target: Target, number: int) -> Thread:
    base, path = repository(needs_address(target))
    owner, name = owner_repo(path, target.address)
    repo = f"{base}/api/v1/repos/{quote(owner)}/{quote(name)}"
    return Thread(f"{base}/api/v1/user", f"{repo}/issues/{number}/comments?page=1&limit={LISTED}",
                  f"{repo}/issues/{number}/comments", f"{repo}/issues/comments/{{id}}", "PATCH", "user", "login",
                  {"Authorization": f"token {api_token(target)}", **target.headers}, "flux-pr-comment-key")


THREADS: dict[str, Callable[[Target, int], Thread]] = {
    "githubpullrequestcomment": _github, "gitlabmergerequestcomment": _gitlab, "giteapullrequestcomment": _gitea}


async def _commented(event: Event, target: Target, send: Send) -> int:
    """The event's comment on the change request its object names (none: nothing is sent)."""
    number = _number(event)
    if number is None:
        return 0
    return await converse(event, target, send, THREADS[target.type](target, number))


DIALOGUES: dict[str, Callable[[Event, Target, Send], Awaitable[int]]] = dict.fromkeys(THREADS, _commented)
