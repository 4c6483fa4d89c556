"""Trees of files as gzipped tarballs, the form of Flux's artifacts: read bounded, written reproducibly.

Reading streams the archive (each header is judged before its content is inflated) and refuses, by name, what
would not be a plain tree inside the artifact's root: absolute names, ``..``, backslashes and control
characters, links and devices, a name twice, and trees over the :class:`~helmop.sources.git.Limits` of a
source (entries, a file's size, the total). Writing follows Flux's storage: sorted names, no owners, times zero,
folders 0750 and files 0600 (0700 when executable), so the same tree is always the same bytes and digest."""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

from .errors import SourceError
from .git import Limits


@dataclass(frozen=True)
class Tree:
    files: dict[str, bytes]
    executable: frozenset[str] = frozenset()  # the names with an executable bit


def _name(raw: str, what: str) -> str:
    name = raw.removeprefix("./")
    parts = name.rstrip("/").split("/")
    if raw.startswith("/") or ".." in parts or "\\" in raw or any(ord(c) < 32 or ord(c) == 127 for c in raw):
        raise SourceError("InvalidPath", f"InvalidPath: {what} has an entry {raw[:200]!r} outside its root; "
                                         "refused", transient=False)
    return name.rstrip("/")


class _Inflated(io.RawIOBase):
    """The inflated stream, cut off past ``limit`` bytes: headers (a PAX header announces its own size) cost
    no more than the files they describe may."""

    def __init__(self, data: bytes, limit: int, what: str) -> None:
        self.source, self.left, self.what = gzip.GzipFile(fileobj=io.BytesIO(data)), limit, what

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        read = self.source.readinto(buffer)
        self.left -= read
        if self.left < 0:
            raise SourceError("TreeTooLarge", f"{self.what} inflates to more than its limits allow", transient=False)
        return read


DEFAULT_LIMITS = Limits()


def unpack(data: bytes, what: str, limits: Limits = DEFAULT_LIMITS) -> Tree:
    """The files of the gzipped tar ``data`` (``what`` names it in reasons)."""
    files: dict[str, bytes] = {}
    executable = set()
    total = 0
    inflated = _Inflated(data, limits.max_total + 2048 * limits.max_entries + (1 << 20), what)
    try:
        with tarfile.open(fileobj=io.BufferedReader(inflated), mode="r|") as tar:
            for count, member in enumerate(tar, 1):
                if count > limits.max_entries:
                    raise SourceError("TooManyFiles", f"{what} has more than {limits.max_entries} entries",
                                      transient=False)
                name = _name(member.name, what)
                if member.isdir() or name in ("", "."):
                    continue
                if not member.isfile():
                    raise SourceError("InvalidPath", f"InvalidPath: {what} has an entry {name[:200]!r} that is a "
                                                     "link or a device, not a file; refused", transient=False)
                if member.size > limits.max_file:
                    raise SourceError("FileTooLarge", f"{what}: {name[:200]} is larger than "
                                                      f"{limits.max_file >> 20} MiB", transient=False)
                total += member.size
                if total > limits.max_total:
                    raise SourceError("TreeTooLarge", f"{what} expands to more than {limits.max_total >> 20} MiB",
                                      transient=False)
                if name in files:
                    raise SourceError("InvalidPath", f"InvalidPath: {what} holds {name[:200]!r} twice; refused",
                                      transient=False)
                content = tar.extractfile(member)
                files[name] = content.read() if content is not None else b""
                if member.mode & 0o111:
                    executable.add(name)
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise SourceError("ArtifactInvalid", f"{what} is not a gzipped tar: {exc}", transient=False) from None
    return Tree(files, frozenset(executable))


def pack(files: Mapping[str, bytes], executable: frozenset[str] = frozenset()) -> bytes:
    """``files`` as a reproducible gzipped tar, with the folders their names imply."""
    out = io.BytesIO()
    folders = sorted({"/".join(name.split("/")[:i]) for name in files for i in range(1, name.count("/") + 1)})
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted([*folders, *files]):
            info = tarfile.TarInfo(name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            if name in files:
                info.size = len(files[name])
                info.mode = 0o700 if name in executable else 0o600
                tar.addfile(info, io.BytesIO(files[name]))
            else:
                info.type, info.mode = tarfile.DIRTYPE, 0o750
                tar.addfile(info)
    return gzip.compress(out.getvalue(), mtime=0)


def digest(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"
