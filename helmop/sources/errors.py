"""Errors a source reports (a HelmopError: the condition reason and whether retrying may help)."""

from __future__ import annotations

from helmop.api.errors import HelmopError, describe
from helmop.infra.addresses import refused


class SourceError(HelmopError):
    def __init__(self, reason: str, message: str, *, transient: bool) -> None:
        super().__init__(reason, message, transient=transient)


def unreachable(what: str, exc: BaseException) -> SourceError:
    """A failed request to ``what``: refused by the address policy (final: the address will not change by
    itself), or unreachable for now."""
    refusal = refused(exc)
    if refusal is not None:
        return SourceError("AddressRefused", f"{what}: {refusal}", transient=False)
    return SourceError("RepositoryUnreachable", f"{what} is unreachable: {describe(exc)}", transient=True)
