"""The one error type of helmop's work: every failure a resource's status can report carries the
condition reason, whether retrying may help, and (optionally) when to retry. The layers raise
subclasses named for where they happened; handlers catch this one."""

from __future__ import annotations


class HelmopError(Exception):
    def __init__(self, reason: str, message: str, *, transient: bool = False,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.reason = reason  # a CamelCase condition reason, such as VersionNotFound
        self.transient = transient  # a retry (with backoff) may succeed without any change
        self.retry_after = retry_after  # seconds until a retry makes sense; None: the usual backoff


class SpecError(HelmopError, ValueError):
    """A spec (of any kind) cannot be acted on; ``reason`` is the condition reason, the message says why.
    Never transient: only a change of the spec helps."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(reason, message)


def describe(exc: BaseException) -> str:
    """A network error in one line: aiohttp appends OS error details in brackets; the part before says it."""
    return (str(exc) or type(exc).__name__).split(" [")[0]
