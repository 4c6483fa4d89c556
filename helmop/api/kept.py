"""Values kept in memory within a byte budget, the least recently used dropped first: for caches whose entries
differ in size (kustomize outputs, git objects), where a count of entries bounds nothing. Pure."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Kept(Generic[K, V]):
    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._kept: OrderedDict[K, tuple[V, int]] = OrderedDict()  # (value, the size counted for it)
        self._size = 0

    def get(self, key: K) -> V | None:
        found = self._kept.get(key)
        if found is None:
            return None
        self._kept.move_to_end(key)
        return found[0]

    def put(self, key: K, value: V, size: int) -> None:
        """Keep ``value`` as ``size`` bytes (a key kept already keeps its value)."""
        if key in self._kept:
            return
        self._kept[key] = (value, size)
        self._size += size
        while self._size > self.budget:
            self._size -= self._kept.popitem(last=False)[1][1]

    def drop(self, which: Callable[[K], bool]) -> None:
        """Drop the values whose key ``which`` picks."""
        for key in [k for k in self._kept if which(k)]:
            self._size -= self._kept.pop(key)[1]
