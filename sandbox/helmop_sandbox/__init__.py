"""An embedded Kubernetes API server for tests and demos: real clients (kubectl, helm, kopf, the
Python client) work against it unmodified. :class:`Sandbox` starts one; see ``embedded``.

``Sandbox`` is imported on first use: `helmop sandbox --help` and the helmop CLI's parser read only the
command's flags (``__main__``), not the server (a fifth of a second of imports)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .embedded import Sandbox

__all__ = ["Sandbox"]


def __getattr__(name: str) -> Any:
    if name == "Sandbox":
        from .embedded import Sandbox

        return Sandbox
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
