"""The one error type of helmop's work: every failure a resource's status can report carries the
condition reason, whether retrying may help, and (optionally) when to retry. The layers raise
subclasses named for where they happened; handlers catch this one."""

from __future__ import annotations

import re
from collections.abc import Iterable


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
    """A network error in one line. aiohttp writes ``Cannot connect to host H:P ssl:default [OS error]``: the
    TLS setting is left out (it names ssl for plain http:// too) and the OS error kept, said plainly."""
    head, _, detail = (str(exc) or type(exc).__name__).partition(" [")
    head = _SSL.sub("", head)
    detail = detail.removesuffix("]")
    if detail.startswith("Connect call failed"):  # asyncio's words for a refused connection
        detail = "connection refused"
    return f"{head}: {detail}" if detail and len(detail) <= 200 else head


_SSL = re.compile(r" ssl:(<[^>]*>|\S+)")


def some(names: Iterable[str], limit: int = 10, width: int = 100) -> str:
    """Names for a message (the branches, charts or versions a source has): at most ``limit``, each cut to
    ``width`` characters (whoever owns the source chose them), ", ..." when there are more; "" for none."""
    listed = list(names)
    shown = ", ".join(name[:width] for name in listed[:limit])
    return shown + (", ..." if len(listed) > limit else "")
