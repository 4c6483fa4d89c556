"""Commit statuses on the git host a config repository lives on: GitHub (and GitHub Enterprise, under
``/api/v3``), GitLab, Gitea, Bitbucket Cloud and Bitbucket Server/Data Center. The commit is the event's git
revision (its origin revision first); an event without one has no commit to mark and sends nothing. ``Progressing``
marks the commit pending, an error failed, anything else successful; the status is named by the provider's
status id (spec.commitStatusExpr, or kind/name/provider-uid), so each object has one status that moves."""

from __future__ import annotations

import base64
import hashlib
import re
from urllib.parse import quote, urlsplit

from helmop.api.notifications import ERROR, Event

from .request import PayloadError, Request, Target, json_request, needs_address, needs_token, words

PROGRESSING = "Progressing"
_DESCRIPTION = 140  # GitHub's limit, the shortest of them
_COMMIT = re.compile(r"(?:^|[@/:])([0-9a-f]{40}|[0-9a-f]{64})$")
_SCP = re.compile(r"^[\w.+-]+@([\w.-]+):(.+)$")  # git@host:owner/repo.git


def commit_of(revision: str) -> str:
    """The commit hash of a revision as sources write them (main@sha1:<hex>, main/<hex>, <hex>); "" if none."""
    found = _COMMIT.search(revision.strip())
    return found.group(1) if found else ""


def _repository(address: str) -> tuple[str, str]:
    """(the host's https base URL, the repository's path) of a clone or web address, as the host's API names them."""
    scp = _SCP.match(address)
    if scp and "://" not in address:
        base, path = f"https://{scp.group(1)}", scp.group(2)
    else:
        parts = urlsplit(address)
        if parts.scheme not in ("http", "https", "ssh") or not parts.hostname:
            raise PayloadError(f"address {address!r} is not a repository's https:// or ssh:// address")
        host = parts.hostname + (f":{parts.port}" if parts.port and parts.scheme != "ssh" else "")
        base, path = f"{'https' if parts.scheme == 'ssh' else parts.scheme}://{host}", parts.path
    path = path.strip("/").removesuffix(".git")
    if not path:
        raise PayloadError(f"address {address!r} names no repository")
    return base, path


def _owner_repo(path: str, address: str) -> tuple[str, str]:
    parts = path.split("/")
    if len(parts) != 2 or not all(parts):
        raise PayloadError(f"address {address!r} must name a repository as OWNER/REPOSITORY")
    return parts[0], parts[1]


def _state(event: Event, pending: str, success: str, failure: str) -> str:
    if event.severity == ERROR:
        return failure
    return pending if event.reason == PROGRESSING else success


def _description(event: Event) -> str:
    return words(event.reason)[:_DESCRIPTION]


def _located(event: Event, target: Target) -> tuple[str, str, str] | None:
    """(the commit, the host's base URL, the repository's path) a status goes to; None when the event names no
    commit."""
    sha = commit_of(event.revision())
    if not sha:
        return None
    return (sha, *_repository(needs_address(target)))


def _status(event: Event, target: Target, *, failure: str = "failure", named: str = "context") -> dict[str, str]:
    """A status body as GitHub and Gitea take it (GitLab says ``failed`` and names the status by ``name``)."""
    return {"state": _state(event, "pending", "success", failure), named: target.status_id,
            "description": _description(event)}


def github(event: Event, target: Target) -> list[Request]:
    """POST /repos/{owner}/{repo}/statuses/{sha} (state pending|success|failure, context, description)."""
    located = _located(event, target)
    if located is None:
        return []
    sha, base, path = located
    owner, repo = _owner_repo(path, target.address)
    api = "https://api.github.com" if base == "https://github.com" else f"{base}/api/v3"
    return [json_request(f"{api}/repos/{quote(owner)}/{quote(repo)}/statuses/{sha}", _status(event, target),
                         {"Authorization": f"Bearer {needs_token(target)}", "Accept": "application/vnd.github+json",
                          "X-GitHub-Api-Version": "2022-11-28", **target.headers})]


def gitlab(event: Event, target: Target) -> list[Request]:
    """POST /api/v4/projects/{id}/statuses/{sha} (state pending|success|failed, name, description); the project
    by its path (URL-encoded) or its number."""
    located = _located(event, target)
    if located is None:
        return []
    sha, base, path = located
    return [json_request(f"{base}/api/v4/projects/{quote(path, safe='')}/statuses/{sha}",
                         _status(event, target, failure="failed", named="name"),
                         {"PRIVATE-TOKEN": needs_token(target), **target.headers})]


def gitea(event: Event, target: Target) -> list[Request]:
    """POST /api/v1/repos/{owner}/{repo}/statuses/{sha} (state pending|success|failure, context, description)."""
    located = _located(event, target)
    if located is None:
        return []
    sha, base, path = located
    owner, repo = _owner_repo(path, target.address)
    return [json_request(f"{base}/api/v1/repos/{quote(owner)}/{quote(repo)}/statuses/{sha}", _status(event, target),
                         {"Authorization": f"token {needs_token(target)}", **target.headers})]


def _basic(target: Target) -> str:
    """Basic credentials: the Secret's username and password, or a token written as user:app-password."""
    user, password = target.username, target.password
    if not (user and password) and ":" in target.token:
        user, password = target.token.split(":", 1)
    if not (user and password):
        raise PayloadError(f"a {target.type} provider needs username and password, or a token USER:APP-PASSWORD")
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def _build_status(event: Event, target: Target, url: str) -> dict[str, str]:
    """Bitbucket's build status: its key at most 40 characters (the status id's SHA-1), the id as its name."""
    return {"state": _state(event, "INPROGRESS", "SUCCESSFUL", "FAILED"),
            "key": hashlib.sha1(target.status_id.encode()).hexdigest(), "name": target.status_id, "url": url,
            "description": _description(event)}


def bitbucket(event: Event, target: Target) -> list[Request]:
    """Bitbucket Cloud: POST /2.0/repositories/{workspace}/{repo}/commit/{sha}/statuses/build on api.bitbucket.org
    (for bitbucket.org; another host serves the API under its own /2.0)."""
    located = _located(event, target)
    if located is None:
        return []
    sha, base, path = located
    workspace, repo = _owner_repo(path, target.address)
    api = "https://api.bitbucket.org/2.0" if base == "https://bitbucket.org" else f"{base}/2.0"
    return [json_request(f"{api}/repositories/{quote(workspace)}/{quote(repo)}/commit/{sha}/statuses/build",
                         _build_status(event, target, f"{base}/{path}"),
                         {"Authorization": _basic(target), **target.headers})]


def bitbucketserver(event: Event, target: Target) -> list[Request]:
    """Bitbucket Server/Data Center: POST {base}/rest/api/latest/projects/{key}/repos/{slug}/commits/{sha}/builds,
    the project and repository from the clone address (https://HOST[/CONTEXT]/scm/KEY/SLUG.git)."""
    located = _located(event, target)
    if located is None:
        return []
    sha, base, path = located
    address = target.address
    context, _, rest = path.partition("scm/") if path.startswith("scm/") or "/scm/" in path else ("", "", "")
    project, _, slug = rest.partition("/")
    if not project or not slug or "/" in slug:
        raise PayloadError(f"address {address!r} must be a clone address https://HOST/scm/PROJECT/REPOSITORY.git")
    root = f"{base}/{context.strip('/')}".rstrip("/")
    auth = f"Bearer {target.token}" if target.token and ":" not in target.token else _basic(target)
    return [json_request(f"{root}/rest/api/latest/projects/{quote(project)}/repos/{quote(slug)}/commits/{sha}/builds",
                         _build_status(event, target, address), {"Authorization": auth, **target.headers})]


BUILDERS = {"github": github, "gitlab": gitlab, "gitea": gitea, "bitbucket": bitbucket,
            "bitbucketserver": bitbucketserver}
