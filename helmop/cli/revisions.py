"""A revision of a git repository read into a private folder, as the operator reads a fetched tree: the same
limits, a link followed only to a file inside the tree, and only git's plumbing run (rev-parse, ls-tree,
cat-file): no checkout, so no hook, filter or working-tree file is involved."""

from __future__ import annotations

import os
import posixpath
import subprocess
from pathlib import Path

from helmop.sources.git import Limits

from .errors import Failed

_LINK, _FILES = "120000", ("100644", "100755")


def _git(repo: Path, *args: str, given: bytes | None = None) -> bytes:
    # fsmonitor is the one hook-like program plumbing could start; no prompt for anything
    done = subprocess.run(["git", "-c", "core.fsmonitor=false", "-C", str(repo), *args], input=given,
                          capture_output=True, env={**os.environ, "GIT_TERMINAL_PROMPT": "0"}, check=False)
    if done.returncode:
        raise Failed(f"git {args[0]} in {repo}: {done.stderr.decode(errors='replace').strip() or 'failed'}")
    return done.stdout


def commit_of(repo: Path, ref: str) -> str:
    """The commit ``ref`` names in ``repo``."""
    if ref.startswith("-"):
        raise Failed(f"{ref!r} is not a git revision")
    try:
        return _git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}").decode().strip()
    except Failed:
        raise Failed(f"{ref!r} is not a commit of {repo}") from None


def _entries(repo: Path, commit: str, limits: Limits) -> list[tuple[str, str, str]]:
    """(mode, object, path) of the commit's files and links, within ``limits``."""
    out: list[tuple[str, str, str]] = []
    total = 0
    for record in _git(repo, "ls-tree", "-r", "-l", "-z", "--full-tree", commit).split(b"\0"):
        if not record:
            continue
        head, _, name = record.decode(errors="replace").partition("\t")
        mode, kind, oid, size = head.split()
        if kind != "blob" or mode not in (_LINK, *_FILES):
            continue  # a submodule: not part of the tree the operator reads
        parts = name.split("/")
        if any(part in ("", ".", "..", ".git") or "\\" in part for part in parts):
            raise Failed(f"{commit[:12]}: the tree holds a path no checkout may write: {name!r}")
        total += int(size)
        if int(size) > limits.max_file or total > limits.max_total or len(out) >= limits.max_entries:
            raise Failed(f"{commit[:12]} is larger than a repository the operator reads ({limits.max_entries} "
                         f"files, {limits.max_file >> 20} MiB a file, {limits.max_total >> 20} MiB in all)")
        out.append((mode, oid, name))
    return out


def _blobs(repo: Path, oids: set[str]) -> dict[str, bytes]:
    """The objects' contents, by one cat-file (which applies no filter)."""
    data = _git(repo, "cat-file", "--batch", given="".join(f"{oid}\n" for oid in sorted(oids)).encode())
    out: dict[str, bytes] = {}
    at = 0
    while at < len(data):
        end = data.index(b"\n", at)
        oid, _, size = data[at:end].decode().split()
        out[oid] = data[end + 1:end + 1 + int(size)]
        at = end + 2 + int(size)
    return out


def read_revision(repo: Path, ref: str, into: Path, limits: Limits | None = None) -> str:
    """Write the files of ``ref`` under ``into`` (a link as the file it names inside the tree; a link to a
    folder is not followed, as a walk of a checkout does not; one out of the tree is refused); its commit."""
    commit = commit_of(repo, ref)
    entries = _entries(repo, commit, limits or Limits())
    blobs = _blobs(repo, {oid for _, oid, _ in entries})
    files = {name: oid for mode, oid, name in entries if mode != _LINK}
    for mode, oid, name in entries:
        if mode == _LINK:
            target = blobs[oid].decode(errors="replace")
            resolved = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
            if target.startswith("/") or resolved == ".." or resolved.startswith("../"):
                raise Failed(f"{name}: a link to {target}, outside the repository")
            if resolved not in files:
                continue
            oid = files[resolved]
        path = into / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(blobs[oid])
    return commit
