"""Errors a source reports (a HelmopError: the condition reason and whether retrying may help)."""

from __future__ import annotations

from helmop.api.errors import HelmopError


class SourceError(HelmopError):
    def __init__(self, reason: str, message: str, *, transient: bool) -> None:
        super().__init__(reason, message, transient=transient)
