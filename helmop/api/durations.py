"""Go-style durations ("90s", "5m", "1h30m") as Kubernetes and Flux users write them."""

from __future__ import annotations

import re

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds in ``text``; ValueError with a readable message when it is not a duration."""
    text = text.strip()
    if not text or _PART.sub("", text):
        raise ValueError(f"invalid duration {text!r}: expected a number with a unit such as 30s, 5m or 1h30m")
    return sum(float(n) * _UNITS[unit] for n, unit in _PART.findall(text))
