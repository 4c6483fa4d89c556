"""Errors a source reports, with the condition reason and whether retrying may help."""

from __future__ import annotations


class SourceError(Exception):
    def __init__(self, reason: str, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.reason = reason
        self.transient = transient
