"""The repository ``helmop try`` serves: a private bare repository under a folder of its own (the operator's
``--allow-file-git`` root) holding the one revision tried, and that revision's files read into a private
folder, as the operator reads a fetched tree.

What is tried: a URL's ``--ref`` (else its default branch), cloned once with the user's own git (their
credential helpers and SSH agent); a local repository's ``--ref``, else its working tree as it is, uncommitted
and untracked files included (those its .gitignore leaves out are left out: a commit made in the private
repository, on top of HEAD, never in the user's); a folder outside git, as it is. Nothing is written to the
repository tried."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from .. import revisions
from ..errors import Failed

# who the private commits of a working tree or a plain folder are by (never pushed anywhere)
_AUTHOR = {"GIT_AUTHOR_NAME": "helmop try", "GIT_AUTHOR_EMAIL": "try@helmop.invalid",
           "GIT_COMMITTER_NAME": "helmop try", "GIT_COMMITTER_EMAIL": "try@helmop.invalid"}
_SCP = re.compile(r"^(?:[^@/:]+@)?([^/:]+):(?!//)(.+)$")  # git@github.com:org/fleet.git


@dataclass(frozen=True)
class Served:
    """The revision tried: where the operator fetches it, and its files."""

    repository: Path  # the private bare repository
    commit: str
    tree: Path  # its files (a private folder, marked as a repository's root for builds)
    label: str  # what was tried, for the report: the path or URL and the ref
    identities: frozenset[str]  # the repository as URLs name it (see identity): the given URL, or the clone's remotes
    name: str  # the repository's own name (the last part of its path or URL, without .git)
    subfolder: str = ""  # the folder given inside a working tree ("" at its top)

    @property
    def url(self) -> str:
        return self.repository.as_uri()


def is_url(text: str) -> bool:
    return "://" in text or (bool(_SCP.match(text)) and not Path(text).exists())


def identity(url: str) -> str:
    """What names a repository whatever the URL's form: host and path, without the scheme, the user, a port or a
    trailing .git (``https://github.com/org/fleet``, ``ssh://git@github.com/org/fleet.git`` and
    ``git@github.com:org/fleet`` are one); a local path or file:// URL, by its real path."""
    text = url.strip()
    if text.startswith("file://") or ("://" not in text and not _SCP.match(text)):
        path = urlsplit(text).path if text.startswith("file://") else text
        return os.path.realpath(path).removesuffix("/.git").removesuffix(".git")
    if "://" in text:
        parts = urlsplit(text)
        host, path = (parts.hostname or "").lower(), parts.path
    else:
        match = _SCP.match(text)
        assert match is not None
        host, path = match.group(1).lower(), match.group(2)
    return f"{host}/{path.strip('/').removesuffix('.git')}"


def _git(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(["git", "-c", "core.fsmonitor=false", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "GIT_TERMINAL_PROMPT": "0", **(env or {})}, check=False)
    if done.returncode:
        raise Failed(f"git {args[0]}: {done.stderr.strip() or 'failed'}")
    return done.stdout.strip()


def prepare(given: str, ref: str | None, work: Path) -> Served:
    """The revision ``given`` (a path or a URL) and ``ref`` name, served from a bare repository under
    ``work/git`` and read into ``work/tree``."""
    served = work / "git" / "repository.git"
    served.parent.mkdir(parents=True)
    _git("init", "--bare", "--quiet", str(served))
    if is_url(given):
        commit, label, identities, name = _from_url(given, ref, work, served)
        subfolder = ""
    else:
        commit, label, identities, name, subfolder = _from_folder(Path(given), ref, served)
    tree = work / "tree"
    tree.mkdir()
    (tree / ".git").mkdir()  # marks the folder as the repository a build may read (builds.repository_root)
    revisions.read_revision(served, commit, tree)
    return Served(served, commit, tree, label, frozenset(identities), name, subfolder)


def _from_url(url: str, ref: str | None, work: Path, served: Path) -> tuple[str, str, set[str], str]:
    source = work / "source.git"
    _git("clone", "--bare", "--quiet", "--", url, str(source))
    commit = revisions.commit_of(source, ref or "HEAD")
    _git("fetch", "--quiet", "--no-tags", "--", str(source), commit, cwd=served)
    name = identity(url).rstrip("/").rpartition("/")[2]
    return commit, f"{url}@{ref or 'HEAD'} ({commit[:12]})", {identity(url)}, name


def _from_folder(folder: Path, ref: str | None, served: Path) -> tuple[str, str, set[str], str, str]:
    if not folder.is_dir():
        raise Failed(f"{folder}: no such folder (give a folder or a git URL)")
    inside = subprocess.run(["git", "-C", str(folder), "rev-parse", "--git-dir"], capture_output=True, check=False)
    if inside.returncode:
        if ref:
            raise Failed(f"{folder} is not a git repository: --ref needs one")
        commit = _snapshot(served, folder, parent=None)
        return commit, f"{folder} (a folder outside git)", {identity(str(folder))}, folder.resolve().name, ""
    bare = _git("-C", str(folder), "rev-parse", "--is-bare-repository") == "true"
    top = folder.resolve() if bare else Path(_git("-C", str(folder), "rev-parse", "--show-toplevel"))
    identities = {identity(str(top)), *(identity(url) for url in _remotes(top))}
    name = top.name.removesuffix(".git")
    subfolder = "" if bare else folder.resolve().relative_to(top).as_posix().strip(".")
    if ref or bare:
        commit = revisions.commit_of(top, ref or "HEAD")
        _git("fetch", "--quiet", "--no-tags", "--", str(top), commit, cwd=served)
        return commit, f"{top}@{ref or 'HEAD'} ({commit[:12]})", identities, name, subfolder
    head = subprocess.run(["git", "-C", str(top), "rev-parse", "--verify", "--quiet", "HEAD"], capture_output=True,
                          text=True, check=False).stdout.strip() or None
    if head:
        _git("fetch", "--quiet", "--no-tags", "--", str(top), head, cwd=served)
    commit = _snapshot(served, top, parent=head)
    changed = commit != head
    label = f"{top} (the working tree{', with uncommitted changes' if changed else ''}: {commit[:12]})"
    return commit, label, identities, name, subfolder


def _remotes(top: Path) -> list[str]:
    done = subprocess.run(["git", "-C", str(top), "config", "--get-regexp", r"^remote\..*\.url$"],
                          capture_output=True, text=True, check=False)
    return [line.split(None, 1)[1] for line in done.stdout.splitlines() if " " in line]


def _snapshot(served: Path, folder: Path, parent: str | None) -> str:
    """A commit, in ``served``, of ``folder``'s files as they are (what .gitignore leaves out left out): ``parent``
    itself when nothing differs from it."""
    index = served / "try-index"
    env = {"GIT_DIR": str(served), "GIT_WORK_TREE": str(folder.resolve()), "GIT_INDEX_FILE": str(index), **_AUTHOR}
    if parent:
        _git("read-tree", parent, env=env)
    _git("add", "--all", "--", ".", cwd=folder, env=env)
    tree = _git("write-tree", env=env)
    index.unlink(missing_ok=True)
    if parent and _git("rev-parse", f"{parent}^{{tree}}", env=env) == tree:
        return parent
    return _git("commit-tree", tree, *(["-p", parent] if parent else []), "-m", f"helmop try: {folder}", env=env)


def amend(served: Served, files: dict[str, bytes]) -> str:
    """A commit of the private repository, on top of the one tried, with ``files`` (repository paths) rewritten;
    the private folder of its files rewritten alike."""
    index = served.repository / "try-index"
    env = {"GIT_DIR": str(served.repository), "GIT_INDEX_FILE": str(index), **_AUTHOR}
    _git("read-tree", served.commit, env=env)
    for name, data in sorted(files.items()):
        path = served.tree / name
        path.unlink(missing_ok=True)  # a link: replaced, not written through
        path.write_bytes(data)
        blob = _git("hash-object", "-w", "--", str(path), env=env)
        _git("update-index", "--add", "--cacheinfo", f"100644,{blob},{name}", env=env)
    tree = _git("write-tree", env=env)
    index.unlink(missing_ok=True)
    return _git("commit-tree", tree, "-p", served.commit, "-m", "helmop try: Flux's install left out", env=env)


def publish(served: Served, branches: set[str], tags: set[str], refs: set[str], commit: str = "") -> None:
    """The revision tried (``commit``: the private one on top of it, when made) under each of these names (what
    the repository's GitRepositories ask for), and as the branches main and master (the usual default branch;
    helmop's and Flux's default when no ref is given)."""
    commit = commit or served.commit
    for branch in sorted({"main", "master", *branches}):
        _git("update-ref", f"refs/heads/{branch}", commit, cwd=served.repository)
    for tag in sorted(tags):
        _git("update-ref", f"refs/tags/{tag}", commit, cwd=served.repository)
    for name in sorted(refs):
        _git("update-ref", name, commit, cwd=served.repository)
    _git("symbolic-ref", "HEAD", "refs/heads/main", cwd=served.repository)
