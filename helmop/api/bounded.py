"""Decompression with a budget: a few hundred kilobytes of gzip can expand to gigabytes, so what helmop
inflates from hostile input (helm release records, chart archives, OCI layers) stops at a size cap and
at a compression-ratio cap, with a specific error, before the memory is spent. Pure."""

from __future__ import annotations

import zlib

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
