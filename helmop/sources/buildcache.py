"""kustomize's output kept by what it was built from, so the same build is not run again.

A ConfigSync at an unchanged revision builds again at every interval, as Flux's kustomize-controller does, and
many ConfigSyncs often build one folder of one revision (a fleet's per-cluster ConfigSyncs, differing only in
their postBuild variables, which apply after the build). kustomize's output depends on nothing but the files it
reads, the kustomization helmop writes over them and the kubectl that runs it, so the key is a digest of all of
them: content, not names or revisions, and a cached output is exactly what a new build would print.

The key also holds the namespace of the object that built it: a tenant never reads an entry another tenant's
build wrote. Decrypted trees are never kept (the caller passes no scope), nor failed builds (a timeout may pass).
Bounded by bytes, least recently used dropped first. Builds of one key asked for at once run once: a burst of
ConfigSyncs at one revision would otherwise all miss while the first build runs.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Mapping

from helmop.api.kept import Kept

BUDGET = 32 << 20  # bytes of output kept, all entries together
LARGEST = 4 << 20  # a larger output is not kept


def key_of(scope: str, tool: str, folder: str, overlay: str, files: Mapping[str, bytes]) -> str:
    """The digest of everything a build's output depends on (lengths first: no two inputs hash alike)."""
    digest = hashlib.sha256()
    for part in (scope, tool, folder, overlay):
        data = part.encode()
        digest.update(len(data).to_bytes(8, "big") + data)
    for name in sorted(files):
        data = files[name]
        digest.update(len(name.encode()).to_bytes(8, "big") + name.encode() + len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


class BuildOutputs:
    """Outputs by key, at most ``budget`` bytes of them."""

    def __init__(self, budget: int = BUDGET, largest: int = LARGEST) -> None:
        self.largest = largest
        self._kept: Kept[str, str] = Kept(budget)
        self._running: dict[str, asyncio.Future[str | None]] = {}
        self.hits = self.misses = 0

    async def built(self, key: str, build: Callable[[], Awaitable[str]]) -> str:
        """The output kept for ``key``, else what ``build()`` prints (kept); callers asking while it runs wait
        for it, and build themselves if it fails (its time limit was another object's)."""
        kept = self._kept.get(key)
        if kept is not None:
            self.hits += 1
            return kept
        running = self._running.get(key)
        if running is not None:
            self.hits += 1
            shared = await asyncio.shield(running)
            return shared if shared is not None else await build()
        self.misses += 1
        self._running[key] = future = asyncio.get_running_loop().create_future()
        try:
            text = await build()
        except BaseException:
            future.set_result(None)
            raise
        finally:
            del self._running[key]
        future.set_result(text)
        if len(text) <= self.largest:
            self._kept.put(key, text, len(text))
        return text
