"""Commit statuses on the git host a config repository lives on: GitHub (and GitHub Enterprise, under
``/api/v3``), GitLab, Gitea, Bitbucket Cloud, Bitbucket Server/Data Center and Azure DevOps. The commit is the
event's git revision (Flux's order: the object's own commit, its origin revision, its revision); an event without
one has no commit to mark and sends nothing. ``Progressing``
marks the commit pending, an error failed, anything else successful; the status is named by the provider's
status id (spec.commitStatusExpr, or kind/name/provider-uid), so each object has one status that moves."""

from __future__ import annotations

import hashlib
import re
from urllib.parse import quote

from helmop.api.notifications import ERROR, Event

from .repositories import api_token, github_api, github_auth, owner_repo, repository
from .request import PROGRESSING, PayloadError, Request, Target, basic, json_request, needs_address, needs_token, words

_DESCRIPTION = 140  # GitHub's limit, the shortest of them
_COMMIT = re.compile(r"(?:^|[@/:])([0-9a-f]{40}|[0-9a-f]{64})$")
AZURE_API = "7.1"  # the Azure DevOps REST API version statuses are created with


def commit_of(revision: str) -> str:
    """The commit hash of a revision as sources write them (main@sha1:<hex>, main/<hex>, <hex>); "" if none."""
    found = _COMMIT.search(revision.strip())
    return found.group(1) if found else ""


def _state(event: Event, pending: str, success: str, failure: str) -> str:
    if event.severity == ERROR:
        return failure
    return pending if event.reason == PROGRESSING else success


def _description(event: Event) -> str:
    return words(event.reason)[:_DESCRIPTION]


def _github(target: Target, sha: str, state: str, description: str) -> Request:
    """POST /repos/{owner}/{repo}/statuses/{sha} (state pending|success|failure, context, description)."""
    return json_request(f"{github_api(target)[1]}/statuses/{sha}",
                        {"state": state, "context": target.status_id, "description": description},
                        github_auth(target))


def _gitlab(target: Target, sha: str, state: str, description: str) -> Request:
    """POST /api/v4/projects/{id}/statuses/{sha} (state pending|success|failed, name, description); the project
    by its path (URL-encoded) or its number."""
    base, path = repository(needs_address(target))
    return json_request(f"{base}/api/v4/projects/{quote(path, safe='')}/statuses/{sha}",
                        {"state": "failed" if state == "failure" else state, "name": target.status_id,
                         "description": description}, {"PRIVATE-TOKEN": api_token(target), **target.headers})


def _gitea(target: Target, sha: str, state: str, description: str) -> Request:
    """POST /api/v1/repos/{owner}/{repo}/statuses/{sha} (state pending|success|failure, context, description)."""
    base, path = repository(needs_address(target))
    owner, repo = owner_repo(path, target.address)
    return json_request(f"{base}/api/v1/repos/{quote(owner)}/{quote(repo)}/statuses/{sha}",
                        {"state": state, "context": target.status_id, "description": description},
                        {"Authorization": f"token {needs_token(target)}", **target.headers})


STATUSES = {"github": _github, "gitlab": _gitlab, "gitea": _gitea}


def status(target: Target, sha: str, state: str, description: str) -> Request:
    """The commit status ``state`` (pending, success or failure) on a github, gitlab or gitea host, named by the
    target's status id."""
    return STATUSES[target.type](target, sha, state, description[:_DESCRIPTION])


def _of_event(event: Event, target: Target) -> list[Request]:
    """The event's commit marked: pending when an object starts applying it, failure on an error, else success."""
    sha = commit_of(event.revision())
    if not sha:
        return []
    return [status(target, sha, _state(event, "pending", "success", "failure"), _description(event))]


def _basic(target: Target) -> str:
    """Basic credentials: the Secret's username and password, or a token written as user:app-password."""
    user, password = target.username, target.password
    if not (user and password) and ":" in target.token:
        user, password = target.token.split(":", 1)
    if not (user and password):
        raise PayloadError(f"a {target.type} provider needs username and password, or a token USER:APP-PASSWORD")
    return basic(user, password)


def _build_status(event: Event, target: Target, url: str) -> dict[str, str]:
    """Bitbucket's build status: its key at most 40 characters (the status id's SHA-1), the id as its name."""
    return {"state": _state(event, "INPROGRESS", "SUCCESSFUL", "FAILED"),
            "key": hashlib.sha1(target.status_id.encode()).hexdigest(), "name": target.status_id, "url": url,
            "description": _description(event)}


def bitbucket(event: Event, target: Target) -> list[Request]:
    """Bitbucket Cloud: POST /2.0/repositories/{workspace}/{repo}/commit/{sha}/statuses/build on api.bitbucket.org
    (for bitbucket.org; another host serves the API under its own /2.0)."""
    sha = commit_of(event.revision())
    if not sha:
        return []
    base, path = repository(needs_address(target))
    workspace, repo = owner_repo(path, target.address)
    api = "https://api.bitbucket.org/2.0" if base == "https://bitbucket.org" else f"{base}/2.0"
    return [json_request(f"{api}/repositories/{quote(workspace)}/{quote(repo)}/commit/{sha}/statuses/build",
                         _build_status(event, target, f"{base}/{path}"),
                         {"Authorization": _basic(target), **target.headers})]


def bitbucketserver(event: Event, target: Target) -> list[Request]:
    """Bitbucket Server/Data Center: POST {base}/rest/api/latest/projects/{key}/repos/{slug}/commits/{sha}/builds,
    the project and repository from the clone address (https://HOST[/CONTEXT]/scm/KEY/SLUG.git)."""
    sha = commit_of(event.revision())
    if not sha:
        return []
    base, path = repository(needs_address(target))
    address = target.address
    context, _, rest = path.partition("scm/") if path.startswith("scm/") or "/scm/" in path else ("", "", "")
    project, _, slug = rest.partition("/")
    if not project or not slug or "/" in slug:
        raise PayloadError(f"address {address!r} must be a clone address https://HOST/scm/PROJECT/REPOSITORY.git")
    root = f"{base}/{context.strip('/')}".rstrip("/")
    auth = f"Bearer {target.token}" if target.token and ":" not in target.token else _basic(target)
    return [json_request(f"{root}/rest/api/latest/projects/{quote(project)}/repos/{quote(slug)}/commits/{sha}/builds",
                         _build_status(event, target, address), {"Authorization": auth, **target.headers})]


def azuredevops(event: Event, target: Target) -> list[Request]:
    """POST {organization}/{project}/_apis/git/repositories/{repository}/commits/{sha}/statuses (state
    pending|succeeded|error, description, context: genre fluxcd, as Flux's, and the status id as name), the
    repository from its address (https://dev.azure.com/ORG/PROJECT/_git/REPOSITORY), with a personal access
    token as basic authentication's password."""
    sha = commit_of(event.revision())
    if not sha:
        return []
    base, path = repository(needs_address(target))
    parts = path.split("/")
    if len(parts) != 4 or parts[2] != "_git" or not all(parts):
        raise PayloadError(f"address {target.address!r} must be https://HOST/ORGANIZATION/PROJECT/_git/REPOSITORY")
    org, project, _, repo = (quote(part) for part in parts)
    summary = event.metadata.get("summary")
    status = {"state": _state(event, "pending", "succeeded", "error"), "description": _description(event),
              "context": {"genre": f"fluxcd:{summary}" if summary else "fluxcd", "name": target.status_id}}
    return [json_request(f"{base}/{org}/{project}/_apis/git/repositories/{repo}/commits/{sha}/statuses"
                         f"?api-version={AZURE_API}", status,
                         {"Authorization": basic("", needs_token(target)), **target.headers})]


BUILDERS = {**dict.fromkeys(STATUSES, _of_event), "bitbucket": bitbucket,
            "bitbucketserver": bitbucketserver, "azuredevops": azuredevops}
