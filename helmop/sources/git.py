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
  ssh key file in a private temp dir), never in the URL, the mirror's config, logs or status;
* the remote's name is resolved and judged by the address policy before git runs, and git is pinned to the
  addresses judged (``http.curloptResolve``, ssh's ``HostName``) with redirects off: git connects nowhere
  the policy refuses, whatever the name resolves to a moment later.
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from helmop.api.addresses import AddressRefused, Policy
from helmop.api.errors import some
from helmop.api.gitrefs import GitRef as GitRef  # re-exported: what the git cache resolves
from helmop.api.process import minimal_env, niced
from helmop.api.redaction import redact, safe_url
from helmop.api.semver import highest
from helmop.infra import addresses

from .errors import SourceError
from .gitobjects import Objects
from .mirrors import mirrored
from .proxies import Proxy
from .secrets import decoded
from .verification.commits import Signed

_SHA = re.compile(r"^[0-9a-f]{40}$")
MAX_OBJECT = 1 << 20  # a commit or tag object read whole (to verify its signature)
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
    scope: str = ""  # the Secret's "namespace/name" ("" without a Secret)
    proxy: Proxy | None = None  # spec.proxySecretRef: how the remote is reached, not what may be read
    app: str = ""  # a GitHub App's key (provider github): its hourly tokens read the same mirror

    @classmethod
    def from_secret_data(cls, data: dict[str, str], scope: str = "") -> GitAuth:
        return cls(username=decoded(data, "username"), password=decoded(data, "password"),
                   bearer_token=decoded(data, "bearerToken"), identity=decoded(data, "identity"),
                   known_hosts=decoded(data, "known_hosts"), scope=scope)

    def key(self) -> str:
        """Which mirror these credentials may read: "anonymous", or the Secret and a digest of its content
        (what was fetched with one tenant's credentials is never read with another's, or with none)."""
        if self.app:
            return f"{self.scope}#app:{self.app}"
        if not self.scope and not any((self.username, self.password, self.bearer_token, self.identity)):
            return "anonymous"
        content = "\0".join((self.username, self.password, self.bearer_token, self.identity, self.known_hosts))
        return f"{self.scope}#{hashlib.sha256(content.encode()).hexdigest()}"

    def secrets(self) -> list[str]:
        return [v for v in (self.username, self.password, self.bearer_token) if len(v) >= 3] + (
            self.proxy.secrets() if self.proxy else [])


MAX_BRANCHES = 1000  # listed for a Project's environments; a repository may hold any number
LISTED = 10  # refs a RefNotFound names (api.errors.some cuts each: the repository's owner chose them)


@dataclass(frozen=True)
class Branch:
    name: str
    sha: str
    committed: float  # the head commit's committer time (epoch seconds)


def check_url(url: str, *, file_roots: tuple[Path, ...] = (), forbidden: Path | None = None) -> None:
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
        _check_file_url(parts.path, file_roots, forbidden)
        return
    raise SourceError("InvalidURL", f"unsupported repository URL scheme {parts.scheme!r}: use https://, "
                                    "ssh:// or git@host:path", transient=False)


def _check_file_url(path: str, roots: tuple[Path, ...], forbidden: Path | None) -> None:
    """A file:// repository only inside a directory the operator allows (--allow-file-git=DIR), and never
    inside helmop's own cache (another tenant's mirrors live there). Symlinks are resolved first."""
    if not roots:
        raise SourceError("InvalidURL", "file:// repositories are disabled (start the operator with "
                                        "--allow-file-git=DIR to allow those under DIR)", transient=False)
    real = Path(os.path.realpath(path))
    if forbidden is not None and real.is_relative_to(os.path.realpath(forbidden)):
        raise SourceError("InvalidURL", "file:// URLs may not point into helmop's cache", transient=False)
    if not any(real.is_relative_to(os.path.realpath(root)) for root in roots):
        raise SourceError("InvalidURL", "file:// repositories are allowed only under the directories the operator "
                                        "names with --allow-file-git", transient=False)


def check_ref(ref: GitRef) -> None:
    """The ref's syntax, before anything is fetched: a bad one is the user's to fix, not the network's."""
    if ref.commit and not _SHA.match(ref.commit):
        raise SourceError("InvalidRef", "spec.ref.commit must be a full 40-character sha", transient=False)
    if ref.tag:
        check_ref_name(ref.tag, "tag")
    if ref.branch:
        check_ref_name(ref.branch, "branch")
    if ref.name:
        check_ref_name(ref.fetched, "name")
        if not ref.fetched.startswith("refs/"):
            raise SourceError("InvalidRef", f"spec.ref.name {ref.name!r} must be a full reference (refs/heads/main, "
                                            "refs/tags/v1, refs/pull/7/head)", transient=False)


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


@dataclass(frozen=True)
class Limits:
    """What one read of a tree may cost: a repository of a few hundred kilobytes can hold a file of
    gigabytes (git compresses), or a million empty files. The defaults are helm's own limit on a chart's
    files (5 MiB each) and room for any chart or config directory in the wild."""

    max_file: int = 5 << 20
    max_total: int = 32 << 20
    max_entries: int = 20_000


# A tree entry's name: one path component, never "." or "..", no separator, NUL, backslash or control
# character (git accepts such names in a tree unless the server checks objects with fsck).
_BAD_NAME = re.compile(r"[/\\\x00-\x1f\x7f]")


def _check_name(name: str, where: str) -> None:
    if name in ("", ".", "..") or _BAD_NAME.search(name):
        raise SourceError("InvalidPath", f"InvalidPath: {posixpath.join(where, name)!r} is not a safe file name; "
                                         "refused, nothing written", transient=False)


@dataclass(frozen=True)
class Pin:
    """Where git connects for one fetch: the remote's name and port, and the addresses judged for it."""

    host: str
    port: int
    addresses: tuple[str, ...]
    ssh: bool


@dataclass
class GitCache:
    """Bare mirrors under ``<root>/git``, one per URL *and* credentials (see :meth:`GitAuth.key`)."""

    root: Path
    file_roots: tuple[Path, ...] = ()  # directories file:// URLs may name (--allow-file-git=DIR)
    timeout: float = 60.0
    limits: Limits = field(default_factory=Limits)
    policy: Policy = field(default_factory=Policy.sources)  # the addresses a remote may be at
    mirrors: tuple[tuple[str, str], ...] = ()  # --git-mirror FROM=TO: where a URL is fetched from
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    _known: Objects = field(default_factory=Objects)  # what the mirrors' objects answered (immutable answers)
    _home: str = ""

    def _mirrors(self, url: str) -> Path:
        return self.root / "git" / hashlib.sha256(safe_url(url).encode()).hexdigest()[:32]

    def mirror(self, url: str, auth: GitAuth) -> Path:
        return self._mirrors(url) / hashlib.sha256(auth.key().encode()).hexdigest()[:32]

    def _scratch_home(self) -> str:
        """An empty HOME for git, outside the cache (no user or system git configuration is read)."""
        if not self._home:
            self._home = tempfile.mkdtemp(prefix="helmop-git-home-")
        return self._home

    def _env(self, auth: GitAuth, private: Path | None = None, pin: Pin | None = None) -> dict[str, str]:
        allowed = "https:http:ssh" + (":file" if self.file_roots else "")
        env = minimal_env(self._scratch_home(), GIT_ALLOW_PROTOCOL=allowed, GIT_TERMINAL_PROMPT="0",
                          GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null", GIT_ASKPASS="/bin/false",
                          SSH_ASKPASS="/bin/false")
        config: list[tuple[str, str]] = []
        if auth.bearer_token:
            config.append(("http.extraHeader", f"Authorization: Bearer {auth.bearer_token}"))
        elif auth.username or auth.password:
            token = base64.b64encode(f"{auth.username}:{auth.password}".encode()).decode()
            config.append(("http.extraHeader", f"Authorization: Basic {token}"))
        ssh = ["ssh", "-o", "BatchMode=yes"]
        if pin is not None and pin.ssh:
            ssh += ["-o", f"HostName={pin.addresses[0]}", "-o", f"HostKeyAlias={pin.host}"]
        elif pin is not None:
            addresses = ",".join(f"[{a}]" if ":" in a else a for a in pin.addresses)
            config += [("http.curloptResolve", f"{pin.host}:{pin.port}:{addresses}"), ("http.followRedirects", "false")]
        if auth.proxy is not None:  # curl resolves the proxy's name through the pin above: it is what was judged
            config.append(("http.proxy", auth.proxy.url()))
        if auth.identity and private is not None:
            key = private / "identity"
            key.write_text(auth.identity if auth.identity.endswith("\n") else auth.identity + "\n")
            key.chmod(0o600)
            known = private / "known_hosts"
            known.write_text(auth.known_hosts)
            strict = "yes" if auth.known_hosts else "accept-new"
            ssh += ["-i", str(key), "-o", "IdentitiesOnly=yes", "-o", f"UserKnownHostsFile={known}",
                    "-o", f"StrictHostKeyChecking={strict}"]
        env["GIT_SSH_COMMAND"] = " ".join(ssh)
        env["GIT_CONFIG_COUNT"] = str(len(config))
        for i, (key_name, value) in enumerate(config):
            env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key_name, value
        return env

    async def _pin(self, url: str, proxy: Proxy | None = None) -> Pin | None:
        """The addresses git connects to, each judged by the address policy: the remote's, or its proxy's (None
        for file://)."""
        scp = _SCP_LIKE.match(url)
        parts = urlsplit(url if not scp else "ssh://" + url.split(":", 1)[0])
        if parts.scheme == "file":
            return None
        ssh = parts.scheme == "ssh"
        if proxy is not None and (ssh or scp):
            raise SourceError("InvalidURL", "spec.proxySecretRef applies to http(s):// repositories only, not ssh",
                              transient=False)
        host = parts.hostname or ""
        port = parts.port or {"ssh": 22, "http": 80}.get(parts.scheme, 443)
        if proxy is not None:
            host, port = proxy.host, proxy.port
        try:
            found = await addresses.resolved(self.policy, host, port)
        except AddressRefused as exc:
            raise SourceError("AddressRefused", f"{safe_url(url)}: {exc}", transient=False) from None
        if not found:
            raise SourceError("RepositoryUnreachable", f"the name {host} could not be resolved (DNS) for "
                                                       f"{safe_url(url)}", transient=True)
        return Pin(host, port, tuple(found), ssh)

    async def _git(self, args: list[str], env: dict[str, str], cwd: Path | None = None,
                   secrets: list[str] | None = None, timeout: float | None = None, url: str = "") -> bytes:
        _fetched(cwd)
        # A process group of its own, so a timeout kills git's helpers too (git-remote-https holds the pipes:
        # killing git alone would leave wait() hanging until the helper gave up by itself).
        proc = await asyncio.create_subprocess_exec(*niced(), "git", *args, cwd=cwd, env=env,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                                                    stdin=asyncio.subprocess.DEVNULL, process_group=0)
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

    async def fetch(self, url: str, auth: GitAuth, timeout: float | None = None, refs: tuple[str, ...] = ()) -> Path:
        """Bring the mirror of ``url`` for ``auth`` up to date (cloning it the first time); returns its path.
        ``timeout`` bounds the network operation (that repository's spec.timeout); ``refs``: references fetched
        besides heads and tags (spec.ref.name), or commits (a submodule's) by their sha."""
        remote = mirrored(url, self.mirrors)
        check_url(remote, file_roots=self.file_roots, forbidden=self.root)
        mirror = self.mirror(url, auth)
        lock = self._locks.setdefault(str(mirror), asyncio.Lock())
        async with lock:
            with tempfile.TemporaryDirectory(prefix="helmop-git-") as private:
                env = self._env(auth, Path(private), await self._pin(remote, auth.proxy))
                secrets = auth.secrets()
                if not (mirror / "HEAD").exists():
                    partial = mirror.with_name(mirror.name + ".partial")
                    shutil.rmtree(partial, ignore_errors=True)
                    partial.parent.mkdir(parents=True, exist_ok=True)
                    await self._git(["init", "--bare", "--quiet", str(partial)], env)
                    partial.rename(mirror)
                extra = [r if _SHA.match(r) else f"+{r}:{r}" for r in refs]
                # by URL, not by the remote's name: the mirror a URL is fetched from may change between fetches
                await self._git(["fetch", "--prune", "--force", "--quiet", "--no-tags", "--", safe_url(remote),
                                 "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*", *extra], env, cwd=mirror,
                                secrets=secrets, timeout=timeout, url=url)
        return mirror

    async def resolve(self, url: str, ref: GitRef, auth: GitAuth) -> tuple[str, str]:
        """(revision string as Flux writes it, commit sha) of ``ref`` in the mirror."""
        mirror = self.mirror(url, auth)
        env = self._env(auth)
        if ref.commit:
            if not _SHA.match(ref.commit):
                raise SourceError("InvalidRef", "spec.ref.commit must be a full 40-character sha", transient=False)
            kind = (await self._git(["cat-file", "-t", ref.commit], env, cwd=mirror)).decode().strip()
            if kind != "commit":
                raise SourceError("RefNotFound", f"{ref.commit} is not a commit", transient=False)
            label = ref.name or ref.branch
            return f"{label}@sha1:{ref.commit}" if label else f"sha1:{ref.commit}", ref.commit
        if ref.name:
            sha = await self._peel(env, mirror, ref.fetched)
            return f"{ref.name}@sha1:{sha}", sha
        if ref.tag:
            check_ref_name(ref.tag, "tag")
            sha = await self._peel(env, mirror, f"refs/tags/{ref.tag}")
            return f"{ref.tag}@sha1:{sha}", sha
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
        branch = ref.branch or "master"
        check_ref_name(branch, "branch")
        sha = await self._peel(env, mirror, f"refs/heads/{branch}")
        return f"{branch}@sha1:{sha}", sha

    async def branches(self, url: str, auth: GitAuth) -> list[Branch]:
        """The branches of the mirror (the first MAX_BRANCHES by name), each with its commit and commit time."""
        out = await self._git(["for-each-ref", f"--count={MAX_BRANCHES}",
                               "--format=%(refname:strip=2)%00%(objectname)%00%(committerdate:unix)", "refs/heads"],
                              self._env(auth), cwd=self.mirror(url, auth))
        found = []
        for line in out.decode(errors="replace").splitlines():
            name, sha, when = [*line.split("\0"), "", "", ""][:3]
            if name and _SHA.match(sha):
                found.append(Branch(name, sha, float(when) if when.isdigit() else 0.0))
        return found

    async def _peel(self, env: dict[str, str], mirror: Path, refname: str) -> str:
        try:
            out = await self._git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{refname}^{{commit}}"],
                                  env, cwd=mirror)
        except SourceError:
            namespace = refname.rsplit("/", 1)[0] if refname.startswith("refs/tags/") else "refs/heads"
            what = "tags" if namespace == "refs/tags" else "branches"
            try:
                listed = (await self._git(["for-each-ref", f"--count={LISTED + 1}", "--format=%(refname:strip=2)",
                                           namespace], env, cwd=mirror)).decode(errors="replace").split()
            except SourceError:
                listed = []
            has = some(listed, LISTED) or "none"
            raise SourceError("RefNotFound", f"{refname.split('/', 2)[-1]!r} not found in the repository "
                                             f"({what}: {has})", transient=False) from None
        return out.decode().strip()

    async def files(self, url: str, sha: str, path: str, auth: GitAuth,
                    wanted: Callable[[str], bool] | None = None, *, contents: bool = True) -> dict[str, bytes]:
        """The files under ``path`` at commit ``sha`` (those ``wanted`` names, when given: the others are
        never read): relative path -> content (``contents`` false: its object id, nothing inflated). Every
        entry name is checked before anything is read, each object's size is asked before its content (within
        :class:`Limits`); symlinks must stay inside the repository and are read as the file they point to;
        submodules are skipped. One git process however many files the tree has."""
        mirror = self.mirror(url, auth)
        sub = clean_path(path)
        limits = self.limits
        async with _Batch(mirror, self._env(auth), self.timeout, self._known) as batch:
            root = await batch.info(f"{sha}:{sub}" if sub else f"{sha}:")
            if root is None:
                raise SourceError("PathNotFound", f"path {path!r} does not exist at {sha[:12]}", transient=False)
            if root[0] != "tree":
                raise SourceError("PathNotFound", f"path {path!r} is not a directory", transient=False)
            out: dict[str, bytes] = {}
            entries, total = 0, 0
            pending = [("", root[2])]
            while pending:
                prefix, oid = pending.pop()
                for mode, name, child in _tree_entries(await batch.contents(oid, limits.max_file, prefix or "."),
                                                       batch.id_width):
                    _check_name(name, posixpath.join(sub, prefix))
                    rel = f"{prefix}{name}"
                    entries += 1
                    if entries > limits.max_entries:
                        raise SourceError("TooManyFiles", f"{path or '.'} at {sha[:12]} has more than "
                                                          f"{limits.max_entries} entries", transient=False)
                    if mode == "40000":
                        pending.append((rel + "/", child))
                    elif mode != "160000" and (wanted is None or wanted(rel)):  # 160000: a submodule's commit
                        if rel in out:
                            raise SourceError("InvalidPath", f"InvalidPath: {posixpath.join(sub, rel)!r} appears "
                                                             "twice in its tree; refused", transient=False)
                        if not contents:
                            out[rel] = f"{mode} {child}".encode()
                            continue
                        out[rel] = await self._blob(batch, sha, sub, rel, mode, child, limits.max_file)
                        total += len(out[rel])
                        if total > limits.max_total:
                            raise SourceError("TreeTooLarge", f"the files under {path or '.'} at {sha[:12]} add up "
                                                              f"to more than {limits.max_total >> 20} MiB",
                                              transient=False)
            return out

    @staticmethod
    async def _blob(batch: _Batch, sha: str, sub: str, rel: str, mode: str, oid: str, limit: int) -> bytes:
        where = posixpath.join(sub, rel)
        data = await batch.contents(oid, limit, where)
        if mode != "120000":
            return data
        # a symlink: its target must stay inside the repository, and is read as the file it names
        target = posixpath.normpath(posixpath.join(posixpath.dirname(where), data.decode(errors="replace")))
        if target.startswith("../") or target == ".." or data.startswith(b"/") or "\0" in target:
            raise SourceError("InvalidPath", f"InvalidPath: {where} is a symlink pointing outside the repository",
                              transient=False)
        pointed = await batch.info(f"{sha}:{target}")
        if pointed is None or pointed[0] != "blob":
            raise SourceError("InvalidPath", f"symlink {where} is broken", transient=False)
        return await batch.contents(pointed[2], limit, where)

    async def read(self, url: str, sha: str, path: str, auth: GitAuth) -> bytes:
        """One file at commit ``sha`` (within the per-file limit)."""
        where = clean_path(path)
        async with _Batch(self.mirror(url, auth), self._env(auth), self.timeout, self._known) as batch:
            found = await batch.info(f"{sha}:{where}")
            if found is None or found[0] != "blob":
                raise SourceError("PathNotFound", f"file {path!r} does not exist at {sha[:12]}", transient=False)
            return await batch.contents(found[2], self.limits.max_file, where)

    async def signed(self, url: str, auth: GitAuth, sha: str, tag: str = "") -> Signed:
        """What signatures the commit ``sha`` offers, reached by ``tag`` ("" when by no tag): its commit object
        and the tag's object (a lightweight tag has none), as raw bytes, bounded."""
        mirror, env = self.mirror(url, auth), self._env(auth)
        commit = await self._object(env, mirror, sha, "commit")
        if not tag:
            return Signed(sha, commit)
        check_ref_name(tag, "tag")
        target = (await self._git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"refs/tags/{tag}"], env,
                                  cwd=mirror)).decode().strip()
        kind = (await self._git(["cat-file", "-t", target], env, cwd=mirror)).decode().strip()
        if kind != "tag":  # a lightweight tag: nothing but the commit to verify
            return Signed(sha, commit, tag)
        return Signed(sha, commit, tag, target, await self._object(env, mirror, target, "tag"))

    async def _object(self, env: dict[str, str], mirror: Path, sha: str, kind: str) -> bytes:
        size = int((await self._git(["cat-file", "-s", sha], env, cwd=mirror)).decode().strip() or 0)
        if size > MAX_OBJECT:
            raise SourceError("InvalidGitObject", f"{kind} {sha} is larger than {MAX_OBJECT >> 10} KiB",
                              transient=False)
        return await self._git(["cat-file", kind, sha], env, cwd=mirror)

    async def submodules(self, url: str, sha: str, auth: GitAuth) -> list[tuple[str, str, str]]:
        """(path, commit, URL as .gitmodules gives it) of each submodule of commit ``sha``; a submodule the tree
        records but .gitmodules does not name is refused (git itself could not fetch it)."""
        mirror, env = self.mirror(url, auth), self._env(auth)
        links: list[tuple[str, str]] = []
        async with _Batch(mirror, env, self.timeout, self._known) as batch:
            root = await batch.info(f"{sha}:")
            pending, entries = [("", root[2] if root else "")], 0
            while pending:
                prefix, oid = pending.pop()
                for mode, name, child in _tree_entries(await batch.contents(oid, self.limits.max_file, prefix or "."),
                                                       batch.id_width):
                    _check_name(name, prefix)
                    entries += 1
                    if entries > self.limits.max_entries:
                        raise SourceError("TooManyFiles", f"the tree at {sha[:12]} has more than "
                                                          f"{self.limits.max_entries} entries", transient=False)
                    if mode == "40000":
                        pending.append((f"{prefix}{name}/", child))
                    elif mode == "160000":
                        links.append((f"{prefix}{name}", child))
            modules = await batch.info(f"{sha}:.gitmodules") if links else None
            text = await batch.contents(modules[2], MAX_OBJECT, ".gitmodules") if modules else b""
        urls = _gitmodules(text.decode(errors="replace"))
        missing = [path for path, _ in links if path not in urls]
        if missing:
            raise SourceError("SubmoduleFailed", f"submodule {missing[0]!r} is not in .gitmodules", transient=False)
        return sorted((path, commit, urls[path]) for path, commit in links)

    async def fetch_commit(self, url: str, sha: str, auth: GitAuth, timeout: float | None = None) -> None:
        """Make sure the mirror of ``url`` holds commit ``sha`` (a submodule's): fetched with its heads and tags,
        then by the sha itself when no head or tag reaches it."""
        if await self.has_commit(url, sha, auth):
            return
        await self.fetch(url, auth, timeout)
        if not await self.has_commit(url, sha, auth):
            with contextlib.suppress(SourceError):  # servers may refuse a sha no ref advertises
                await self.fetch(url, auth, timeout, refs=(sha,))
        if not await self.has_commit(url, sha, auth):
            raise SourceError("SubmoduleFailed", f"commit {sha[:12]} is not in {safe_url(url)}", transient=False)

    async def has_commit(self, url: str, sha: str, auth: GitAuth) -> bool:
        mirror = self.mirror(url, auth)
        if self._known.has_commit(str(mirror), sha):
            return True
        if not (mirror / "HEAD").exists():
            return False
        try:
            await self._git(["cat-file", "-e", f"{sha}^{{commit}}"], self._env(auth), cwd=mirror)
        except SourceError:
            return False
        if _SHA.match(sha):
            self._known.keep_commit(str(mirror), sha)
        return True

    async def merge_base(self, url: str, a: str, b: str, auth: GitAuth) -> str:
        """The best common ancestor of commits ``a`` and ``b`` in the mirror (a pull request's head and the branch
        it merges into: what the host's own diff compares the head with); RefNotFound when they share none."""
        if not (_SHA.match(a) and _SHA.match(b)):
            raise SourceError("InvalidRef", "a merge base is of two commits' full shas", transient=False)
        try:
            out = await self._git(["merge-base", a, b], self._env(auth), cwd=self.mirror(url, auth))
        except SourceError:
            raise SourceError("RefNotFound", f"{b[:12]} shares no history with {a[:12]}", transient=False) from None
        return out.decode().strip()

    def forget(self, url: str) -> None:
        """Drop every mirror of ``url`` (whatever credentials fetched it)."""
        self._known.forget(str(self._mirrors(url)))
        shutil.rmtree(self._mirrors(url), ignore_errors=True)


class _Batch:
    """One ``git cat-file --batch-command`` process, asked for one object at a time: its type and size
    first (``info``, which does not inflate it), then its content only if within a limit. A tree read costs
    one process instead of one per file, and none when ``known`` answers every question (a revision read
    before): the process starts at the first question it does not. Killed (with its process group) on any
    exit."""

    def __init__(self, mirror: Path, env: dict[str, str], timeout: float, known: Objects | None = None) -> None:
        self.mirror, self.env, self.timeout, self.known = mirror, env, timeout, known
        self.known_as = str(mirror)  # what ``known`` keeps this mirror's answers under
        self.proc: asyncio.subprocess.Process | None = None
        self.id_width = 20  # bytes of an object id in tree objects, from the ids git answers with

    async def __aenter__(self) -> _Batch:
        _fetched(self.mirror)
        return self

    async def __aexit__(self, *_: object) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        await self.proc.wait()

    async def info(self, spec: str) -> tuple[str, int, str] | None:
        """(type, size, object id) of what ``spec`` names (an id, or ``<commit>:<path>``); None if missing."""
        if "\n" in spec:
            raise SourceError("InvalidPath", "a path with a line break cannot be read", transient=False)
        found = self.known.info(self.known_as, spec) if self.known is not None else None
        if found is None:
            header = await self._ask(f"info {spec}")
            if len(header) != 3:  # "<spec> missing", "<spec> ambiguous", or git ended
                return None
            found = (header[1], int(header[2]), header[0])
            if self.known is not None:
                self.known.keep_info(self.known_as, spec, found)
        self.id_width = len(found[2]) // 2
        return found

    async def contents(self, oid: str, limit: int, where: str) -> bytes:
        """The content of object ``oid``, refused (unread) when larger than ``limit``."""
        found = await self.info(oid)
        if found is None:
            raise SourceError("PathNotFound", f"{where}: object {oid[:12]} is missing", transient=False)
        if found[1] > limit:
            raise SourceError("FileTooLarge", f"{where} is {found[1] >> 20} MiB, more than the {limit >> 20} MiB "
                                              "a file may have", transient=False)
        kept = self.known.contents(self.known_as, oid) if self.known is not None else None
        if kept is not None:
            return kept
        header = await self._ask(f"contents {oid}")
        if len(header) != 3:
            raise SourceError("PathNotFound", f"{where}: object {oid[:12]} is missing", transient=False)
        assert self.proc is not None and self.proc.stdout is not None
        try:
            data = await asyncio.wait_for(self.proc.stdout.readexactly(int(header[2]) + 1), self.timeout)
        except TimeoutError:
            raise SourceError("Timeout", f"git cat-file did not answer within {self.timeout:.0f}s",
                              transient=True) from None
        if self.known is not None:
            self.known.keep_contents(self.known_as, oid, data[:-1])
        return data[:-1]  # the content and a newline

    async def _ask(self, command: str) -> list[str]:
        if self.proc is None:
            self.proc = await asyncio.create_subprocess_exec(
                *niced(), "git", "cat-file", "--batch-command", cwd=self.mirror, env=self.env,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
                process_group=0)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command.encode(errors="surrogateescape") + b"\n")
        try:
            await self.proc.stdin.drain()
            return (await asyncio.wait_for(self.proc.stdout.readline(), self.timeout)).decode().split()
        except TimeoutError:
            raise SourceError("Timeout", f"git cat-file did not answer within {self.timeout:.0f}s",
                              transient=True) from None
        except (BrokenPipeError, ConnectionResetError):
            return []


def _fetched(mirror: Path | None) -> None:
    """A mirror is read only once fetched (with the credentials it is kept for)."""
    if mirror is not None and not mirror.is_dir():
        raise SourceError("SourceNotReady", "the repository has not been fetched (with these credentials) yet",
                          transient=True)


def _gitmodules(text: str) -> dict[str, str]:
    """path -> url of each ``[submodule "name"]`` section of a .gitmodules file (git's config syntax, the subset
    .gitmodules uses: sections, ``key = value``, comments)."""
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        header = re.match(r'^\[submodule\s+"(.*)"\]$', line)
        if header:
            current = sections.setdefault(header.group(1), {})
        elif line.startswith("["):
            current = None
        elif current is not None and "=" in line:
            key, _, value = line.partition("=")
            current[key.strip().lower()] = value.strip().strip('"')
    return {s["path"]: s["url"] for s in sections.values() if s.get("path") and s.get("url")}


def _tree_entries(tree: bytes, width: int) -> list[tuple[str, str, str]]:
    """(mode, name, object id) of each entry of a raw tree object: ``<mode> <name>\\0<binary id>``,
    the id ``width`` bytes (20 for SHA-1 repositories, 32 for SHA-256 ones)."""
    entries: list[tuple[str, str, str]] = []
    pos = 0
    try:
        while pos < len(tree):
            space = tree.index(b" ", pos)
            nul = tree.index(b"\0", space)
            entries.append((tree[pos:space].decode(), tree[space + 1:nul].decode(errors="surrogateescape"),
                            tree[nul + 1:nul + 1 + width].hex()))
            pos = nul + 1 + width
    except (ValueError, UnicodeDecodeError):
        raise SourceError("InvalidPath", "a tree object of the repository is corrupt", transient=False) from None
    return entries


def _error(text: str, url: str) -> SourceError:
    """A failed git command as a condition reason and a message that says what went wrong in words,
    with the URL (credentials removed) where the network was involved."""
    low = text.lower()
    if re.search(r"\b407\b", low) or "proxy authentication" in low:
        return SourceError("AuthenticationFailed", f"the proxy refused its credentials for {url}: check the Secret "
                                                   "of spec.proxySecretRef", transient=False)
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
    """Materialise ``files`` (from :meth:`GitCache.files`) under ``dest``, a directory this process has just
    created: every name is checked again, directories and files are created, never opened if they
    exist, and no symlink is followed (each step opens the next component relative to its parent,
    ``O_NOFOLLOW``), so no entry can write outside ``dest``."""
    for rel, data in files.items():
        *folders, name = rel.split("/")
        for part in (*folders, name):
            _check_name(part, "")
        try:
            _write_file(dest, folders, name, data)
        except OSError as exc:  # a name too long for the file system, a path too deep, a link in the way
            raise SourceError("InvalidPath", f"InvalidPath: {rel[:200]!r} cannot be written: {exc.strerror}",
                              transient=False) from None


def _write_file(dest: Path, folders: list[str], name: str, data: bytes) -> None:
    """One file, each folder on the way opened relative to its parent without following links."""
    parent = os.open(dest, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for folder in folders:
            with contextlib.suppress(FileExistsError):
                os.mkdir(folder, 0o755, dir_fd=parent)
            child = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
            os.close(parent)
            parent = child
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=parent)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
    finally:
        os.close(parent)


def tree_digest(files: dict[str, bytes]) -> str:
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(rel.encode() + b"\0" + hashlib.sha256(files[rel]).digest())
    return "sha256:" + h.hexdigest()
