"""What a mirror's git objects answered, kept, so a revision read again starts no git process.

A ConfigSync reads its revision at every reconcile (its folder, then the whole tree for a kustomize build, the
``.sourceignore`` files first), and many ConfigSyncs read one revision: each read was a ``git cat-file``
process, started and waited for on the event loop. Every answer kept here is immutable: an object id names the
same content forever, ``<commit>:<path>`` (a full commit id) names the same object, and a commit found in a mirror
stays there until the mirror is dropped. A "missing" answer is not kept (the commit may be fetched later).

Answers are kept per mirror, as the mirror itself is per URL and credentials: an object id a tenant's tree names
is never answered from another mirror's objects. Bounded by bytes; large contents are not kept.
"""

from __future__ import annotations

import re

from helmop.api.kept import Kept

BUDGET = 32 << 20  # bytes of answers kept, all mirrors together
LARGEST = 1 << 20  # a larger object's content is read again each time
_IMMUTABLE = re.compile(r"^([0-9a-f]{40}|[0-9a-f]{64})(:|$)")  # an object id, or <commit id>:<path>

Info = tuple[str, int, str]  # type, size, object id
Value = Info | bytes | bool  # an object's info, its content, or that a commit is present


class Objects:
    """Immutable answers by (mirror, question), at most ``budget`` bytes of them."""

    def __init__(self, budget: int = BUDGET, largest: int = LARGEST) -> None:
        self.largest = largest
        self._kept: Kept[tuple[str, str, str], Value] = Kept(budget)

    def info(self, mirror: str, spec: str) -> Info | None:
        found = self._kept.get((mirror, "info", spec))
        return found if isinstance(found, tuple) else None

    def keep_info(self, mirror: str, spec: str, answer: Info) -> None:
        if _IMMUTABLE.match(spec):
            self._put((mirror, "info", spec), answer, len(spec) + len(answer[2]))

    def contents(self, mirror: str, oid: str) -> bytes | None:
        found = self._kept.get((mirror, "contents", oid))
        return found if isinstance(found, bytes) else None

    def keep_contents(self, mirror: str, oid: str, data: bytes) -> None:
        if len(data) <= self.largest and _IMMUTABLE.match(oid):
            self._put((mirror, "contents", oid), data, len(oid) + len(data))

    def has_commit(self, mirror: str, sha: str) -> bool:
        return self._kept.get((mirror, "commit", sha)) is True

    def keep_commit(self, mirror: str, sha: str) -> None:
        self._put((mirror, "commit", sha), True, len(sha))

    def forget(self, mirrors: str) -> None:
        """Drop what the mirrors under the folder ``mirrors`` answered (they are being removed)."""
        self._kept.drop(lambda key: key[0].startswith(mirrors + "/"))

    def _put(self, key: tuple[str, str, str], value: Value, size: int) -> None:
        self._kept.put(key, value, size + 64)  # 64: the entry itself
