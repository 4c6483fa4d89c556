"""Reading credentials out of a Secret's ``data`` (base64 values)."""

from __future__ import annotations

import base64


def decoded(data: dict[str, str], key: str) -> str:
    """The text of ``key`` in a Secret's data, "" when absent."""
    raw = data.get(key)
    return base64.b64decode(raw).decode() if raw else ""
