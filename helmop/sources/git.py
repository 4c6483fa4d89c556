"""Git repositories as a chart and manifest source: one bare mirror per URL, fetched incrementally.

A repository is cloned once (bare, no checkout) into ``<cache>/git/<hash of url>`` and then only
fetched; refs are resolved in the mirror, and a revision's files are read straight from git objects
(``ls-tree``/``cat-file``), one sub-path at a time, with no working tree.

Security is part of the design (CVE-2022-24439 and friends):

* only ``https://``, ``http://`` (loopback hosts only), ``ssh://`` / scp-like, and ``file://``
  when the operator allows it; ``GIT_ALLOW_PROTOCOL`` enforces the same inside git, so ``ext::``
  and ``fd::`` transports never run;
* a URL or ref that git could read as an option (leading ``-``) is refused, and ``--`` ends
  options wherever user input follows;
* paths may not leave the repository: no ``..``, no absolute paths, no symlink pointing outside;
* credentials travel in environment variables (``GIT_CONFIG_COUNT`` http.extraHeader, or an
  ssh key file in a private temp dir), never in the URL, the mirror's config, logs or status.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import os
import posixpath
import re
import shutil
import signal
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from helmop.api.redaction import redact

from .errors import SourceError
from .secrets import decoded
from .semver import highest

_SHA = re.compile(r"^[0-9a-f]{40}$")
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}
_SCP_LIKE = re.compile(r"^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:(?!//)")


@dataclass(frozen=True)
class GitAuth:
    """From a GitRepository's secretRef. Never logged or shown."""

    username: str = ""
    password: str = ""
    bearer_token: str = ""
    identity: str = ""
    known_hosts: str = ""

    @classmethod
    def from_secret_data(cls, data: dict[str, str]) -> GitAuth:
        return cls(*(decoded(data, key) for key in ("username", "password", "bearerToken", "identity",
                                                    "known_hosts")))

    def secrets(self) -> list[str]:
        return [v for v in (self.username, self.password, self.bearer_token) if len(v) >= 3]


@dataclass(frozen=True)
class GitRef:
    branch: str = ""
    tag: str = ""
    semver: str = ""
    commit: str = ""


def check_url(url: str, *, allow_file: bool) -> None:
    """Refuse URLs git could misread or that reach transports helmop does not allow."""
    if not url or url.startswith("-") or any(c in url for c in "\n\r\0 "):
        raise SourceError("InvalidURL", "the repository URL is empty, has spaces, or starts with '-'",
                          transient=False)
    if "::" in url.split("/")[0]:
        raise SourceError("InvalidURL", "git transport helpers (such as ext:: or fd::) are not allowed",
                          transient=False)
    if _SCP_LIKE.match(url):
        return
    parts = urlsplit(url)
    if parts.password is not None:
        # Credentials in the spec are readable by anyone who can read the object, and git would keep
        # them in its remote configuration: they belong in the Secret spec.secretRef names.
        raise SourceError("InvalidURL", f"the URL carries a password: put credentials in the Secret named by "
                                        f"spec.secretRef ({safe_url(url)})", transient=False)
    if parts.scheme == "https" or parts.scheme == "ssh":
        return
    if parts.scheme == "http":
        if parts.hostname not in _LOOPBACK:
            raise SourceError("InvalidURL", "plain http:// is only allowed for loopback hosts; use https://",
                              transient=False)
        return
    if parts.scheme == "file":
        if not allow_file:
            raise SourceError("InvalidURL", "file:// repositories are disabled (start the operator with "
                                            "--allow-file-git to allow them)", transient=False)
        return
    raise SourceError("InvalidURL", f"unsupported repository URL scheme {parts.scheme!r}: use https://, "
                                    "ssh:// or git@host:path", transient=False)


def check_ref(ref: GitRef) -> None:
    """The ref's syntax, before anything is fetched: a bad one is the user's to fix, not the network's."""
    if ref.commit and not _SHA.match(ref.commit):
        raise SourceError("InvalidRef", "spec.ref.commit must be a full 40-character sha", transient=False)
    if ref.tag:
        check_ref_name(ref.tag, "tag")
    if ref.branch:
        check_ref_name(ref.branch, "branch")


def check_ref_name(name: str, what: str) -> None:
    if not name or name.startswith("-") or ".." in name or any(c in name for c in " ~^:?*[\\\0\n") \
            or name.endswith((".lock", "/", ".")) or "@{" in name:
        raise SourceError("InvalidRef", f"{what} {name!r} is not a valid git ref name", transient=False)


def clean_path(path: str) -> str:
    """A repository-relative path, or SourceError if it would leave the repository."""
    if path.startswith("/") or "\0" in path:
        raise SourceError("InvalidPath", f"path {path!r} must be relative to the repository root", transient=False)
    normal = posixpath.normpath(path.strip() or ".")
    if normal == ".." or normal.startswith("../"):
        raise SourceError("InvalidPath", f"path {path!r} leaves the repository", transient=False)
    return "" if normal == "." else normal


def safe_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None and parts.username is None:
        return url
    host = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    return parts._replace(netloc=host).geturl()


@dataclass
class GitCache:
    root: Path
    allow_file: bool = False
    timeout: float = 60.0
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)

    def mirror(self, url: str) -> Path:
        return self.root / "git" / hashlib.sha256(safe_url(url).encode()).hexdigest()[:24]

    def _env(self, auth: GitAuth, url: str, private: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        allowed = "https:http:ssh" + (":file" if self.allow_file else "")
        env.update(GIT_ALLOW_PROTOCOL=allowed, GIT_TERMINAL_PROMPT="0", GIT_CONFIG_NOSYSTEM="1",
                   GIT_CONFIG_GLOBAL="/dev/null", GIT_ASKPASS="/bin/false", SSH_ASKPASS="/bin/false")
        header = ""
        if auth.bearer_token:
            header = f"Authorization: Bearer {auth.bearer_token}"
        elif auth.username or auth.password:
            token = base64.b64encode(f"{auth.username}:{auth.password}".encode()).decode()
            header = f"Authorization: Basic {token}"
        if header:
            env.update(GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="http.extraHeader", GIT_CONFIG_VALUE_0=header)
        if auth.identity:
            key = private / "identity"
            key.write_text(auth.identity if auth.identity.endswith("\n") else auth.identity + "\n")
            key.chmod(0o600)
            known = private / "known_hosts"
            known.write_text(auth.known_hosts)
            strict = "yes" if auth.known_hosts else "accept-new"
            env["GIT_SSH_COMMAND"] = (f"ssh -i {key} -o IdentitiesOnly=yes -o UserKnownHostsFile={known} "
                                      f"-o StrictHostKeyChecking={strict} -o BatchMode=yes")
        return env

    async def _git(self, args: list[str], env: dict[str, str], cwd: Path | None = None,
                   secrets: list[str] | None = None, timeout: float | None = None, url: str = "") -> bytes:
        # A session of its own, so a timeout kills git's helpers too (git-remote-https holds the pipes:
        # killing git alone would leave wait() hanging until the helper gave up by itself).
        proc = await asyncio.create_subprocess_exec("git", *args, cwd=cwd, env=env, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.PIPE,
                                                    stdin=asyncio.subprocess.DEVNULL, start_new_session=True)
        limit = timeout or self.timeout
        try:
            out, err = await asyncio.wait_for(proc.communicate(), limit)
        except BaseException as exc:  # a timeout, or the reconcile cancelled: git and its helpers go
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            if isinstance(exc, TimeoutError):
                raise SourceError("Timeout", f"git {args[0]} did not finish within {limit:.0f}s",
                                  transient=True) from None
            raise
        if proc.returncode != 0:
            message = err.decode(errors="replace").strip().splitlines()
            text = "; ".join(line for line in message if line and not line.startswith("hint:"))[:800]
            text = redact(text, secrets or [])
            raise _error(text or f"git {args[0]} failed", safe_url(url))
        return out

    async def fetch(self, url: str, auth: GitAuth, timeout: float | None = None) -> Path:
        """Bring the mirror of ``url`` up to date (cloning it the first time); returns its path.
        ``timeout`` bounds the network operation (that repository's spec.timeout)."""
        check_url(url, allow_file=self.allow_file)
        mirror = self.mirror(url)
        lock = self._locks.setdefault(str(mirror), asyncio.Lock())
        async with lock:
            with tempfile.TemporaryDirectory(prefix="helmop-git-") as private:
                env = self._env(auth, url, Path(private))
                secrets = auth.secrets()
                if not (mirror / "HEAD").exists():
                    partial = mirror.with_name(mirror.name + ".partial")
                    shutil.rmtree(partial, ignore_errors=True)
                    partial.parent.mkdir(parents=True, exist_ok=True)
                    await self._git(["init", "--bare", "--quiet", str(partial)], env)
                    # The URL is stored without credentials; they come from the environment per fetch.
                    await self._git(["remote", "add", "origin", "--", safe_url(url)], env, cwd=partial)
                    partial.rename(mirror)
                await self._git(["fetch", "--prune", "--force", "--quiet", "--no-tags", "origin", "--",
                                 "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"], env, cwd=mirror,
                                secrets=secrets, timeout=timeout, url=url)
        return mirror

    async def resolve(self, url: str, ref: GitRef) -> tuple[str, str]:
        """(revision string as Flux writes it, commit sha) of ``ref`` in the mirror."""
        mirror = self.mirror(url)
        env = self._env(GitAuth(), url, mirror)
        if ref.commit:
            if not _SHA.match(ref.commit):
                raise SourceError("InvalidRef", "spec.ref.commit must be a full 40-character sha", transient=False)
            kind = (await self._git(["cat-file", "-t", ref.commit], env, cwd=mirror)).decode().strip()
            if kind != "commit":
                raise SourceError("RefNotFound", f"{ref.commit} is not a commit", transient=False)
            name = ref.branch or "HEAD"
            return f"{name}@sha1:{ref.commit}", ref.commit
        if ref.semver:
            tags = (await self._git(["for-each-ref", "--format=%(refname:strip=2)", "refs/tags"], env,
                                    cwd=mirror)).decode().split()
            try:
                chosen = highest(tags, ref.semver)
            except ValueError as exc:
                raise SourceError("InvalidRef", f"spec.ref.semver: {exc}", transient=False) from None
            if chosen is None:
                raise SourceError("RefNotFound", f"no tag matches {ref.semver!r}", transient=False)
            sha = await self._peel(env, mirror, f"refs/tags/{chosen}")
            return f"{chosen}@sha1:{sha}", sha
        if ref.tag:
            check_ref_name(ref.tag, "tag")
            sha = await self._peel(env, mirror, f"refs/tags/{ref.tag}")
            return f"{ref.tag}@sha1:{sha}", sha
        branch = ref.branch or "master"
        check_ref_name(branch, "branch")
        sha = await self._peel(env, mirror, f"refs/heads/{branch}")
        return f"{branch}@sha1:{sha}", sha

    async def _peel(self, env: dict[str, str], mirror: Path, refname: str) -> str:
        try:
            out = await self._git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{refname}^{{commit}}"],
                                  env, cwd=mirror)
        except SourceError:
            raise SourceError("RefNotFound", f"{refname.split('/', 2)[-1]!r} not found in the repository",
                              transient=False) from None
        return out.decode().strip()

    async def files(self, url: str, sha: str, path: str) -> dict[str, bytes]:
        """Every file under ``path`` at commit ``sha``: relative path -> content. Symlinks must stay
        inside ``path``'s repository; submodules are skipped. One git process (``cat-file --batch``,
        asked for each tree and blob in turn), however many files the tree has."""
        mirror = self.mirror(url)
        sub = clean_path(path)
        async with _Batch(mirror, self._env(GitAuth(), url, mirror), self.timeout) as batch:
            root = await batch.get(f"{sha}:{sub}" if sub else f"{sha}:")
            if root is None:
                raise SourceError("PathNotFound", f"path {path!r} does not exist at {sha[:12]}", transient=False)
            if root[0] != "tree":
                raise SourceError("PathNotFound", f"path {path!r} is not a directory", transient=False)
            out: dict[str, bytes] = {}
            pending = [("", root[1])]
            while pending:
                prefix, tree = pending.pop()
                for mode, name, oid in _tree_entries(tree, batch.id_width):
                    rel = f"{prefix}{name}"
                    if mode == "40000":
                        found = await batch.get(oid)
                        if found is not None:
                            pending.append((rel + "/", found[1]))
                    elif mode != "160000":  # 160000: a submodule's commit, nothing to read here
                        out[rel] = await self._blob(batch, sha, sub, rel, mode, oid)
            return out

    @staticmethod
    async def _blob(batch: _Batch, sha: str, sub: str, rel: str, mode: str, oid: str) -> bytes:
        found = await batch.get(oid)
        data = found[1] if found else b""
        if mode != "120000":
            return data
        # a symlink: its target must stay inside the repository
        target = posixpath.normpath(posixpath.join(posixpath.dirname(posixpath.join(sub, rel)), data.decode()))
        if target.startswith("../") or target == ".." or data.startswith(b"/"):
            raise SourceError("InvalidPath", f"{posixpath.join(sub, rel)} is a symlink pointing outside "
                                             "the repository", transient=False)
        pointed = await batch.get(f"{sha}:{target}")
        if pointed is None or pointed[0] != "blob":
            raise SourceError("InvalidPath", f"symlink {posixpath.join(sub, rel)} is broken", transient=False)
        return pointed[1]

    async def read(self, url: str, sha: str, path: str) -> bytes:
        """One file at commit ``sha``."""
        mirror = self.mirror(url)
        env = self._env(GitAuth(), url, mirror)
        try:
            return await self._git(["cat-file", "blob", "--end-of-options", f"{sha}:{clean_path(path)}"], env,
                                   cwd=mirror)
        except SourceError as exc:
            if exc.reason == "InvalidPath":
                raise
            raise SourceError("PathNotFound", f"file {path!r} does not exist at {sha[:12]}",
                              transient=False) from None

    async def has_commit(self, url: str, sha: str) -> bool:
        mirror = self.mirror(url)
        if not (mirror / "HEAD").exists():
            return False
        try:
            await self._git(["cat-file", "-e", f"{sha}^{{commit}}"], self._env(GitAuth(), url, mirror), cwd=mirror)
        except SourceError:
            return False
        return True

    def forget(self, url: str) -> None:
        shutil.rmtree(self.mirror(url), ignore_errors=True)


class _Batch:
    """One ``git cat-file --batch`` process, asked for one object at a time (a tree, then what it lists):
    a tree read costs one process instead of one per file. Killed (with its session) on any exit."""

    def __init__(self, mirror: Path, env: dict[str, str], timeout: float) -> None:
        self.mirror, self.env, self.timeout = mirror, env, timeout
        self.proc: asyncio.subprocess.Process | None = None
        self.id_width = 20  # bytes of an object id in tree objects, from the ids git answers with

    async def __aenter__(self) -> _Batch:
        self.proc = await asyncio.create_subprocess_exec(
            "git", "cat-file", "--batch", cwd=self.mirror, env=self.env, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, start_new_session=True)
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        await self.proc.wait()

    async def get(self, spec: str) -> tuple[str, bytes] | None:
        """(type, content) of the object ``spec`` names (an id, or ``<commit>:<path>``); None if missing."""
        if "\n" in spec:
            raise SourceError("InvalidPath", "a path with a line break cannot be read", transient=False)
        try:
            return await asyncio.wait_for(self._ask(spec), self.timeout)
        except TimeoutError:
            raise SourceError("Timeout", f"git cat-file did not answer within {self.timeout:.0f}s",
                              transient=True) from None

    async def _ask(self, spec: str) -> tuple[str, bytes] | None:
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(spec.encode() + b"\n")
        await self.proc.stdin.drain()
        header = (await self.proc.stdout.readline()).decode().split()
        if len(header) != 3:  # "<spec> missing", "<spec> ambiguous", or git ended
            return None
        oid, kind, size = header
        self.id_width = len(oid) // 2
        data = await self.proc.stdout.readexactly(int(size) + 1)  # the content and a newline
        return kind, data[:-1]


def _tree_entries(tree: bytes, width: int) -> list[tuple[str, str, str]]:
    """(mode, name, object id) of each entry of a raw tree object: ``<mode> <name>\\0<binary id>``,
    the id ``width`` bytes (20 for SHA-1 repositories, 32 for SHA-256 ones)."""
    entries: list[tuple[str, str, str]] = []
    pos = 0
    while pos < len(tree):
        space = tree.index(b" ", pos)
        nul = tree.index(b"\0", space)
        entries.append((tree[pos:space].decode(), tree[space + 1:nul].decode(errors="surrogateescape"),
                        tree[nul + 1:nul + 1 + width].hex()))
        pos = nul + 1 + width
    return entries


def _error(text: str, url: str) -> SourceError:
    """A failed git command as a condition reason and a message that says what went wrong in words,
    with the URL (credentials removed) where the network was involved."""
    low = text.lower()
    if "authentication failed" in low or "could not read username" in low or "could not read password" in low \
            or "permission denied" in low or re.search(r"\b(401|403)\b", low):
        return SourceError("AuthenticationFailed", f"authentication failed for {url}: check the credentials in "
                                                   "the GitRepository's secretRef", transient=False)
    if "could not resolve host" in low or "could not resolve hostname" in low or "name or service not known" in low:
        host = urlsplit(url).hostname or url
        return SourceError("RepositoryUnreachable", f"the name {host} could not be resolved (DNS) for {url}",
                           transient=True)
    if "connection refused" in low:
        return SourceError("RepositoryUnreachable", f"connection refused by the server of {url}", transient=True)
    if "not found" in low and "repository" in low:
        return SourceError("RepositoryNotFound", f"repository {url} not found: {text}", transient=False)
    if "failed to connect" in low or "timed out" in low or "unable to access" in low:
        return SourceError("RepositoryUnreachable", text, transient=True)
    if "transport" in low and "not allowed" in low:
        return SourceError("InvalidURL", text, transient=False)
    return SourceError("GitOperationFailed", text, transient=True)


def write_tree(files: dict[str, bytes], dest: Path) -> None:
    """Materialise ``files`` (from :meth:`GitCache.files`) under ``dest``."""
    for rel, data in files.items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def tree_digest(files: dict[str, bytes]) -> str:
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(rel.encode() + b"\0" + hashlib.sha256(files[rel]).digest())
    return "sha256:" + h.hexdigest()
