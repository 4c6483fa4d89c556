"""Decompression with a budget: a few hundred kilobytes of gzip can expand to gigabytes, so what helmop
inflates from hostile input (helm release records, chart archives, OCI layers) stops at a size cap and
at a compression-ratio cap, with a specific error, before the memory is spent. And JSON from the network
(webhook bodies) with a bound on its nesting, checked before it is parsed. Pure."""

from __future__ import annotations

import json
import re
import zlib
from typing import Any

RATIO_FLOOR = 1 << 20  # below this decompressed size no ratio is too high (tiny files compress very well)


class Bomb(ValueError):
    """Input that would decompress beyond a cap."""


def gunzip(data: bytes, *, max_size: int, max_ratio: int, what: str) -> bytes:
    """``data`` (gzip) decompressed, or :class:`Bomb` once the output passes ``max_size`` bytes or
    ``max_ratio`` times the input's size (whichever is smaller, and never below 1 MiB for the ratio)."""
    limit = min(max_size, max(RATIO_FLOOR, max_ratio * len(data)))
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, limit + 1)
    except zlib.error as exc:
        raise ValueError(f"{what} is not valid gzip: {exc}") from None
    if len(out) > limit:
        raise Bomb(f"{what} decompresses to more than {describe_size(limit)} (from {describe_size(len(data))}); "
                   "refused as a decompression bomb")
    return out


def describe_size(n: int) -> str:
    return f"{n / (1 << 20):g} MiB" if n >= 1 << 20 else f"{n} bytes"


# strings (skipped whole; possessive, and one left open runs to the end: linear in every input) and brackets
_JSON_TOKENS = re.compile(rb'"(?:[^"\\]|\\[\s\S]?)*+(?:"|\Z)|[\[\]{}]')


def json_within(data: bytes, *, max_depth: int, what: str) -> Any:
    """``data`` parsed as JSON; ValueError when it is not JSON, or nests arrays and objects deeper than
    ``max_depth`` (counted in one pass before parsing: the parser recurses once per level)."""
    depth = 0
    for token in _JSON_TOKENS.finditer(data):
        bracket = token.group()
        if bracket in (b"[", b"{"):
            depth += 1
            if depth > max_depth:
                raise ValueError(f"{what} nests deeper than {max_depth} levels")
        elif bracket in (b"]", b"}"):
            depth -= 1
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"{what} is not JSON: {str(exc)[:200]}") from None
