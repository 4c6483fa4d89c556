"""Hash shards (``helmop run --shards auto``): which replica acts on which object, by the 64-bit FNV-1a hash
of its ``metadata.uid`` split into equal contiguous ranges, one per live replica in the order of their
names. The hash and the ``[start, end)`` ranges are those of Kubernetes 1.36's server-side sharded list
and watch (``shardSelector: shardRange(object.metadata.uid, '0x…', '0x…')``, KEP-5866), so a cluster that
has it can filter on the server what a replica filters here. Pure."""

from __future__ import annotations

from dataclasses import dataclass

SPACE = 1 << 64
_OFFSET, _PRIME = 0xCBF29CE484222325, 0x100000001B3


def fnv1a64(data: bytes) -> int:
    h = _OFFSET
    for byte in data:
        h = ((h ^ byte) * _PRIME) % SPACE
    return h


def hash_of(uid: str) -> int:
    return fnv1a64(uid.encode())


@dataclass(frozen=True)
class Range:
    """``[start, end)`` of the hash space; empty when ``start >= end``."""

    start: int = 0
    end: int = 0

    @property
    def empty(self) -> bool:
        return self.start >= self.end

    def __contains__(self, h: object) -> bool:
        return isinstance(h, int) and self.start <= h < self.end

    def overlaps(self, other: Range) -> bool:
        return not (self.empty or other.empty) and self.start < other.end and other.start < self.end

    def within(self, other: Range) -> Range:
        """The part of this range that is also in ``other`` (contiguous: both are)."""
        cut = Range(max(self.start, other.start), min(self.end, other.end))
        return cut if not cut.empty else NOTHING

    def selector(self) -> str:
        """As a 1.36 API server's ``shardSelector`` says it ("" for the empty range)."""
        if self.empty:
            return ""
        return f"shardRange(object.metadata.uid, '{_hex(self.start)}', '{_hex(self.end)}')"

    @classmethod
    def parse(cls, selector: str) -> Range:
        """The range of :meth:`selector`'s form; the empty range for anything else."""
        parts = selector.split("'")
        if not selector.startswith("shardRange(object.metadata.uid, ") or len(parts) != 5:
            return NOTHING
        try:
            found = cls(int(parts[1], 16), int(parts[3], 16))
        except ValueError:
            return NOTHING
        return found if 0 <= found.start < found.end <= SPACE else NOTHING


NOTHING = Range()
EVERYTHING = Range(0, SPACE)


def _hex(value: int) -> str:
    return f"0x{value:016x}"  # 2^64, the end of the last range, has 17 digits, as Kubernetes writes it


def share(members: list[str], me: str) -> Range:
    """``me``'s range among ``members`` (sorted here); nothing when ``me`` is not one of them."""
    ordered = sorted(set(members))
    if me not in ordered:
        return NOTHING
    i, n = ordered.index(me), len(ordered)
    return Range(i * SPACE // n, (i + 1) * SPACE // n)
