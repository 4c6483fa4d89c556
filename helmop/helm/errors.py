"""helm's error type, apart from the engine: what reads helm's records (storage, the CLI's tree and trace)
raises it without importing helm's client (pyhelm3, pydantic)."""

from __future__ import annotations

from helmop.api.errors import HelmopError


class HelmError(HelmopError):
    """A failed helm action: ``reason`` for the condition, ``transient`` if retrying may help."""
