"""Writing to a git repository: a commit made from a parent and the files that change, and pushed. Done in the
bare mirror :class:`~helmop.sources.git.GitCache` keeps for the URL and credentials, with its hardening (the
same URL checks, pinned addresses, credentials in the environment, process groups killed on timeout): no work
tree is checked out, so no file of the repository is ever written to disk, and no hook or filter of the
repository runs.

A commit is made with git's plumbing (a private index read from the parent, the changed blobs, ``write-tree``)
and its object written whole by helmop, so that a signature (OpenPGP or SSH, made by the caller) is the
``gpgsig`` header git itself writes. A push is never forced: a branch that moved is :class:`Rejected`."""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from helmop.api.redaction import safe_url

from .errors import SourceError
from .git import GitAuth, GitCache, _Batch, _check_name, check_ref_name, check_url, clean_path
from .mirrors import mirrored

_ENTRY = re.compile(r"^(\d{6}) (\w+) ([0-9a-f]{40,64}) +(-|\d+)\t(.*)$", re.S)
_BAD_IDENTITY = re.compile(r"[<>\n\0]")
EDITABLE = ("100644", "100755")  # regular files: a symlink (120000) or submodule (160000) is never written
# how git says the branch moved between the fetch and the push (the last three: it moved during the push itself)
_MOVED = ("[rejected]", "non-fast-forward", "fetch first", "failed to update ref", "cannot lock ref", "stale info")
Sign = Callable[[bytes], Awaitable[str]]  # the commit's payload -> an armored signature


class Rejected(SourceError):
    """The remote refused the push because its branch moved on (not a fast-forward): make the commit again on
    top of the new head."""

    def __init__(self, message: str) -> None:
        super().__init__("GitPushRejected", message, transient=True)


@dataclass(frozen=True)
class File:
    mode: str
    data: bytes


async def regular_files(git: GitCache, url: str, auth: GitAuth, sha: str, path: str,
                        wanted: Callable[[str], bool]) -> dict[str, File]:
    """The regular files under ``path`` at ``sha`` whose repository-relative path is ``wanted`` (symlinks and
    submodules are left out, never followed), within the cache's limits."""
    sub = clean_path(path)
    mirror, env = git.mirror(url, auth), {**git._env(auth), "GIT_LITERAL_PATHSPECS": "1"}
    listing = await git._git(["ls-tree", "-r", "-z", "-l", "--full-tree", sha, "--", *([sub] if sub else [])], env,
                             cwd=mirror)
    entries = [e for e in listing.decode(errors="surrogateescape").split("\0") if e]
    if len(entries) > git.limits.max_entries:
        raise SourceError("TooManyFiles", f"{path or '.'} at {sha[:12]} has more than {git.limits.max_entries} "
                                          "entries", transient=False)
    out: dict[str, File] = {}
    total = 0
    async with _Batch(mirror, env, git.timeout) as batch:
        for entry in entries:
            m = _ENTRY.match(entry)
            if m is None or m.group(1) not in EDITABLE or not _inside(m.group(5), sub) or not wanted(m.group(5)):
                continue
            for part in m.group(5).split("/"):
                _check_name(part, "")
            total += int(m.group(4))
            if total > git.limits.max_total:
                raise SourceError("TooManyFiles", f"the files under {path or '.'} are larger than "
                                                  f"{git.limits.max_total >> 20} MiB", transient=False)
            data = await batch.contents(m.group(3), git.limits.max_file, m.group(5))
            out[m.group(5)] = File(m.group(1), data)
    return out


def _inside(rel: str, sub: str) -> bool:
    return not sub or rel == sub or rel.startswith(sub + "/")


def _identity(text: str, what: str) -> str:
    if _BAD_IDENTITY.search(text):
        raise SourceError("InvalidSpec", f"the commit {what} may not hold '<', '>' or a line break", transient=False)
    return text.strip()


async def commit(git: GitCache, url: str, auth: GitAuth, parent: str, changed: dict[str, File], author: tuple[str, str],
                 message: str, sign: Sign | None = None) -> str:
    """A commit on ``parent`` with ``changed`` (repository-relative path -> content and mode), written into the
    mirror; its sha. ``author``: (name, email), the committer too; ``sign``: makes the gpgsig header's value."""
    mirror, env = git.mirror(url, auth), git._env(auth)
    with tempfile.TemporaryDirectory(prefix="helmop-commit-") as private:
        env = {**env, "GIT_INDEX_FILE": str(Path(private) / "index")}
        await git._git(["read-tree", parent], env, cwd=mirror)
        for i, (rel, file) in enumerate(sorted(changed.items())):
            if clean_path(rel) != rel or not rel:
                raise SourceError("InvalidPath", f"{rel[:200]!r} is not a path inside the repository", transient=False)
            blob = Path(private) / f"blob{i}"
            blob.write_bytes(file.data)
            oid = (await git._git(["hash-object", "-w", "--", str(blob)], env, cwd=mirror)).decode().strip()
            await git._git(["update-index", "--add", "--cacheinfo", f"{file.mode},{oid},{rel}"], env, cwd=mirror)
        tree = (await git._git(["write-tree"], env, cwd=mirror)).decode().strip()
        name, email = _identity(author[0], "author's name"), _identity(author[1], "author's email")
        stamp = f"{name} <{email}> {int(time.time())} +0000"
        body = f"tree {tree}\nparent {parent}\nauthor {stamp}\ncommitter {stamp}\n"
        text = message if message.endswith("\n") else message + "\n"
        payload = f"{body}\n{text}".encode()
        if sign is not None:
            signature = (await sign(payload)).strip("\n").replace("\n", "\n ")
            payload = f"{body}gpgsig {signature}\n\n{text}".encode()
        obj = Path(private) / "commit"
        obj.write_bytes(payload)
        sha = await git._git(["hash-object", "-t", "commit", "-w", "--", str(obj)], env, cwd=mirror)
    return sha.decode().strip()


def push_refs(branch: str, refspec: str, sha: str) -> list[str]:
    """What a push sends: ``sha`` to ``branch``, and to the destination of ``refspec`` (Flux's push.refspec: its
    source names the branch committed to); never a forced update (a leading '+' is refused)."""
    out = []
    if branch:
        check_ref_name(branch, "push branch")
        out.append(f"{sha}:refs/heads/{branch}")
    if refspec:
        source, _, target = refspec.partition(":")
        if refspec.startswith("+") or not target:
            raise SourceError("InvalidSpec", f"spec.git.push.refspec {refspec[:100]!r} must be <source>:<destination> "
                                             "without '+' (helmop never forces a push)", transient=False)
        for ref in (source, target):
            check_ref_name(ref, "push refspec")
        out.append(f"{sha}:{target}")
    return out


async def push(git: GitCache, url: str, auth: GitAuth, refs: list[str], options: tuple[tuple[str, str], ...],
               timeout: float | None = None) -> None:
    """Push ``refs`` (``<sha>:<ref>``) to ``url``, with push options; :class:`Rejected` when the remote moved on."""
    remote = mirrored(url, git.mirrors)
    check_url(remote, file_roots=git.file_roots, forbidden=git.root)
    args = ["push", "--no-verify", "--atomic"]  # push.branch and push.refspec land together or not at all
    for key, value in options:
        if "\n" in key or "\n" in value or "\0" in key + value:
            raise SourceError("InvalidSpec", "spec.git.push.options may not hold line breaks", transient=False)
        args += ["--push-option", f"{key}={value}" if value else key]
    with tempfile.TemporaryDirectory(prefix="helmop-git-") as private:
        env = git._env(auth, Path(private), await git._pin(remote, auth.proxy))
        try:
            await git._git([*args, "--", safe_url(remote), *refs], env, cwd=git.mirror(url, auth),
                           secrets=auth.secrets(), timeout=timeout, url=url)
        except SourceError as exc:
            text = str(exc)
            if any(sign in text for sign in _MOVED):
                raise Rejected(f"the push to {safe_url(url)} was rejected: the branch moved on ({text[:300]})") \
                    from None
            raise

