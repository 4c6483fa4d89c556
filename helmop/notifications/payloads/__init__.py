"""What each provider type is sent for one event: the requests, shaped as that service's public API documents
them. Pure: the target's credentials are given, and what is sent goes through the ``send`` given (a pull request
comment is a conversation: its requests depend on the answers)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from helmop.api.notifications import Event

from . import alerting, chat, comments, commits, messengers, repositories, telemetry
from .request import PayloadError, Request, Send, Target

__all__ = ["PayloadError", "Request", "Send", "Target", "build", "deliver"]
_VALUE = 1024  # characters of one metadata value or of the message sent

Build = Callable[[Event, Target], list[Request]]
BUILDERS: dict[str, Build] = {**alerting.BUILDERS, **chat.BUILDERS, **commits.BUILDERS, **messengers.BUILDERS,
                              **repositories.BUILDERS, **telemetry.BUILDERS}


def bounded(event: Event) -> Event:
    """The event with its message and metadata values cut to what a notification carries."""
    return replace(event, message=event.message[:_VALUE],
                   metadata={k[:256]: v[:_VALUE] for k, v in event.metadata.items()})


def build(event: Event, target: Target) -> list[Request]:
    """The requests that notify ``target`` of ``event`` (none: nothing to say, such as a commit status for an
    event without a git revision); PayloadError when the provider cannot be sent it."""
    return BUILDERS[target.type](bounded(event), target)


async def deliver(event: Event, target: Target, send: Send) -> int:
    """``event`` sent to ``target`` through ``send``: the number of requests it took (0: nothing to say)."""
    if target.type in comments.DIALOGUES:
        return await comments.DIALOGUES[target.type](bounded(event), target, send)
    requests = build(event, target)
    for request in requests:
        await send(request)
    return len(requests)
