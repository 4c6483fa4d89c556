"""What was read out of a file, kept while it is the same file: the same path, inode, size and modification
time (a rewritten or replaced file is read again). The chart archives in the operator's caches are read by
every release that uses them, at every look, and do not change: 1000 releases read one archive 1000 times."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

T = TypeVar("T")


class FileMemo(Generic[T]):
    """At most ``size`` files' results, the oldest dropped first. Safe to use from threads (reads are done
    off the event loop)."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._kept: dict[tuple[str, int, int, int], T] = {}

    def read(self, path: Path, read: Callable[[Path], T]) -> T:
        """``read(path)``, or what it returned for this very file before."""
        found = path.stat()
        key = (str(path), found.st_ino, found.st_size, found.st_mtime_ns)
        with contextlib.suppress(KeyError):
            return self._kept[key]
        value = read(path)
        if len(self._kept) >= self.size:
            with contextlib.suppress(KeyError, RuntimeError, StopIteration):  # another thread got there first
                del self._kept[next(iter(self._kept))]
        self._kept[key] = value
        return value
