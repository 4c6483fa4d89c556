"""What each provider type is sent for one event: the requests, shaped as that service's public API documents
them. Pure: the target's credentials are given, nothing is sent here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from helmop.api.notifications import Event

from . import alerting, chat, commits
from .request import PayloadError, Request, Target

__all__ = ["PayloadError", "Request", "Target", "build"]
_VALUE = 1024  # characters of one metadata value or of the message sent

Build = Callable[[Event, Target], list[Request]]
BUILDERS: dict[str, Build] = {**alerting.BUILDERS, **chat.BUILDERS, **commits.BUILDERS}


def bounded(event: Event) -> Event:
    """The event with its message and metadata values cut to what a notification carries."""
    return replace(event, message=event.message[:_VALUE],
                   metadata={k[:256]: v[:_VALUE] for k, v in event.metadata.items()})


def build(event: Event, target: Target) -> list[Request]:
    """The requests that notify ``target`` of ``event`` (none: nothing to say, such as a commit status for an
    event without a git revision); PayloadError when the provider cannot be sent it."""
    return BUILDERS[target.type](bounded(event), target)
