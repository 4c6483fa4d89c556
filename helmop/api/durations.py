"""Go-style durations ("90s", "5m", "1h30m") and quantities ("64Mi") as Kubernetes and Flux users write them."""

from __future__ import annotations

import re
from typing import Any

from .errors import SpecError

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds in ``text``; ValueError with a readable message when it is not a duration."""
    text = text.strip()
    if not text or _PART.sub("", text):
        raise ValueError(f"invalid duration {text!r}: expected a number with a unit such as 30s, 5m or 1h30m")
    return sum(float(n) * _UNITS[unit] for n, unit in _PART.findall(text))


_SIZE = re.compile(r"(\d+)(Ki|Mi|Gi|k|M|G)?")
_SIZE_UNITS = {None: 1, "k": 10**3, "M": 10**6, "G": 10**9, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}


def parse_size(text: str) -> int:
    """Bytes in a Kubernetes-style quantity ("64Mi", "500k", "1048576"); ValueError when it is not one."""
    m = _SIZE.fullmatch(text.strip())
    if not m:
        raise ValueError(f"invalid size {text!r}: expected bytes or a quantity such as 64Mi or 1Gi")
    return int(m.group(1)) * _SIZE_UNITS[m.group(2)]


def duration_field(spec: dict[str, Any], key: str, default: float | None, where: str = "spec") -> float | None:
    """Seconds in the duration field ``key`` of ``spec``; SpecError naming ``where.key`` if malformed."""
    raw = spec.get(key)
    if raw is None:
        return default
    try:
        return parse_duration(str(raw))
    except ValueError as exc:
        raise SpecError("InvalidSpec", f"{where}.{key}: {exc}") from None


def go_duration(seconds: float) -> str:
    """Seconds as Go's time.Duration prints them ("5m0s", "1h30m0s", "2.5s"): how Flux words an interval."""
    whole = int(seconds)
    if whole != seconds and seconds < 60:
        return f"{seconds:g}s"
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"
