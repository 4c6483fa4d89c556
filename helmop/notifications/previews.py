"""What a Preview says to the git host of its Provider (a pull-request-comment type: GitHub, GitLab, Gitea): the open
pull requests it lists, one comment per pull request kept up to date (:func:`.payloads.comments.keep`, as an Alert's
is), and a commit status on each head it previewed (:func:`.payloads.commits.status`, on the same host with the same
token). Sent as notifications are: through the address policy, retried, the Provider's Secrets read at each turn."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from helmop.api.notifications import ProviderSpec
from helmop.infra.kube import Kube

from .outbox import Connection, Sender, Undeliverable
from .payloads import PayloadError, Request, Target
from .payloads.comments import THREADS, keep
from .payloads.commits import status
from .payloads.pullrequests import STATUS_TYPES, ChangeRequest, open_change_requests
from .targets import resolve

__all__ = ["THREADS", "ChangeRequest", "Host", "PayloadError", "Undeliverable", "host_of"]


@dataclass(frozen=True)
class Host:
    """A Provider resolved for one turn of a Preview."""

    target: Target
    connection: Connection
    sender: Sender
    secrets: list[str]  # what its Secrets hold: never in a message

    async def send(self, request: Request) -> str:
        return await self.sender.send(request, self.connection)

    async def open_requests(self, base: str) -> list[ChangeRequest]:
        """The open pull requests that merge into ``base``."""
        return await open_change_requests(self.target, base, self.send)

    async def comment(self, number: int, key: str, text: str) -> None:
        """The one comment of ``key`` on pull request ``number``, created or edited to say ``text``."""
        await keep(self.target, self.send, THREADS[self.target.type](self.target, number), key, text)

    async def mark(self, sha: str, state: str, description: str) -> None:
        """Commit ``sha`` marked ``state`` (pending, success or failure) under the target's status id."""
        await self.send(status(replace(self.target, type=STATUS_TYPES[self.target.type]), sha, state, description))


async def host_of(kube: Kube, namespace: str, spec: ProviderSpec, provider: dict[str, Any], status_id: str,
                  sender: Sender) -> Host:
    """The Provider ``spec`` (the object ``provider``, of ``namespace``) with its Secrets read; PayloadError when it is
    not of a pull-request-comment type."""
    if spec.type not in THREADS:
        raise PayloadError(f"Provider {namespace}/{(provider.get('metadata') or {}).get('name')} is of type "
                           f"{spec.type}, not one that comments on pull requests ({', '.join(THREADS)})")
    uid = str((provider.get("metadata") or {}).get("uid") or "")
    resolved = await resolve(kube, namespace, spec, status_id, provider_uid=uid)
    return Host(resolved.target, resolved.connection, sender, resolved.secrets)
