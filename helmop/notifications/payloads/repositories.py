"""A git repository as its host's API names it (from a clone or web address, ssh included), the credentials those
APIs take, and GitHub's repository_dispatch: the event sent to a repository, to start its workflows."""

from __future__ import annotations

import re
from urllib.parse import quote, urlsplit

from helmop.api.notifications import Event

from .request import PayloadError, Request, Target, json_request, needs_address, needs_token

_SCP = re.compile(r"^[\w.+-]+@([\w.-]+):(.+)$")  # git@host:owner/repo.git
GITHUB_HEADERS = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}


def repository(address: str) -> tuple[str, str]:
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


def owner_repo(path: str, address: str) -> tuple[str, str]:
    parts = path.split("/")
    if len(parts) != 2 or not all(parts):
        raise PayloadError(f"address {address!r} must name a repository as OWNER/REPOSITORY")
    return parts[0], parts[1]


def github_api(target: Target) -> tuple[str, str]:
    """(the API's root, the repository's API URL) of a GitHub provider's address: api.github.com for github.com, a
    GitHub Enterprise Server's ``/api/v3`` otherwise."""
    base, path = repository(needs_address(target))
    owner, repo = owner_repo(path, target.address)
    api = "https://api.github.com" if base == "https://github.com" else f"{base}/api/v3"
    return api, f"{api}/repos/{quote(owner)}/{quote(repo)}"


def api_token(target: Target) -> str:
    """The token, or the password in its stead (Flux takes either for GitHub and GitLab)."""
    return target.token or target.password or needs_token(target)


def github_auth(target: Target) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_token(target)}", **GITHUB_HEADERS, **target.headers}


def githubdispatch(event: Event, target: Target) -> list[Request]:
    """POST /repos/{owner}/{repo}/dispatches: a repository_dispatch whose event_type is the object
    (Kind/name.namespace, what a workflow's ``on.repository_dispatch.types`` names) and whose client_payload is
    the event."""
    dispatch = {"event_type": f"{event.kind}/{event.name}.{event.namespace}"[:100], "client_payload": event.to_json()}
    return [json_request(f"{github_api(target)[1]}/dispatches", dispatch, github_auth(target))]


BUILDERS = {"githubdispatch": githubdispatch}
