"""A source's artifact as its readers see it: one revision, read as a tree of files, a sub-path at a time.

helmop keeps no archive of a git revision: a GitRepository's artifact is its commit in the operator's mirror,
shaped as Flux shapes the archive it stores (:class:`GitArtifact`): files ``spec.ignore`` and ``.sourceignore``
leave out are never read, ``sparseCheckout`` keeps its folders only, submodules are read from their own
mirrors at the commits the tree records, and each ``include`` is another artifact's tree mounted at a path.
Every other source kind's artifact is a tree read whole from an archive (:class:`TreeArtifact`)."""

from __future__ import annotations

import asyncio
import hashlib
import posixpath
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urljoin, urlsplit

from helmop.api.kept import Kept

from .errors import SourceError
from .git import GitAuth, GitCache, clean_path
from .ignore import FILE, Ignore

Wanted = Callable[[str], bool]
MAX_SUBMODULE_DEPTH = 10  # as go-git, which Flux uses, recurses
# Compiled ignore rules by what they are made of, counted as their texts plus what Flux's default patterns cost
# compiled: at most 32 sets, fewer of large ones (a tenant's .sourceignore files are its own to make large).
_RULE_SET = 32 << 10
_COMPILED: Kept[tuple[tuple[tuple[str, str], ...], str | None], Ignore] = Kept(32 * _RULE_SET)


class Artifact(Protocol):
    """One revision of a source, read as a tree of files."""

    @property
    def revision(self) -> str: ...

    @property
    def digest(self) -> str:
        """Of the artifact's content, as its source published it ("" when it does not say)."""

    async def files(self, path: str, wanted: Wanted | None = None) -> dict[str, bytes]:
        """The files under ``path`` (relative to it), only those ``wanted`` names when given."""


def _under(files: Mapping[str, bytes], path: str, wanted: Wanted | None) -> dict[str, bytes]:
    """The files under ``path``; PathNotFound when the artifact holds nothing there (an empty result would
    read as "nothing to apply", and prune everything; Flux stops with "path not found" too)."""
    prefix = f"{clean_path(path)}/".lstrip("/")
    if prefix and not any(name.startswith(prefix) for name in files):
        raise SourceError("PathNotFound", f"{clean_path(path)!r} does not exist in the artifact", transient=False)
    return {name[len(prefix):]: data for name, data in files.items()
            if name.startswith(prefix) and (wanted is None or wanted(name[len(prefix):]))}


@dataclass(frozen=True)
class TreeArtifact:
    """Files already read: an archive's (an OCI layer, a Bucket's objects, a generated artifact) or a local
    folder's (``helmop render``)."""

    tree: Mapping[str, bytes]
    revision: str = ""
    digest: str = ""

    async def files(self, path: str, wanted: Wanted | None = None) -> dict[str, bytes]:
        return _under(self.tree, path, wanted)


@dataclass(frozen=True)
class Mount:
    """spec.include: ``from_path`` of another artifact, at ``to_path`` of this one."""

    artifact: Artifact
    from_path: str
    to_path: str


@dataclass(frozen=True)
class Shape:
    """What makes a GitRepository's artifact more than its commit's tree."""

    ignore: str | None = None  # spec.ignore
    sparse: tuple[str, ...] = ()  # spec.sparseCheckout: folders, root-relative
    submodules: bool = False  # spec.recurseSubmodules
    includes: tuple[Mount, ...] = ()


@dataclass(frozen=True)
class GitArtifact:
    """A GitRepository's current artifact: its commit in the operator's mirror of the repository, shaped."""

    git: GitCache
    url: str
    revision: str
    sha: str
    auth: GitAuth
    shape: Shape = Shape()
    digest: str = ""  # as published ("" until it is)
    _rules: list[Ignore] = field(default_factory=list, compare=False, repr=False)  # computed once

    async def files(self, path: str, wanted: Wanted | None = None) -> dict[str, bytes]:
        sub = clean_path(path)
        rules = await self.ignore()

        def keep(rel: str) -> bool:
            full = posixpath.join(sub, rel) if sub else rel
            return self._sparse_keeps(full) and not rules.excludes(full) and (wanted is None or wanted(rel))

        found = await self._own(sub, keep)
        for mount in self.shape.includes:
            def mounted(rel: str, mount: Mount = mount) -> str | None:
                full = posixpath.join(mount.to_path, rel)
                return (full[len(sub) + 1:] if sub else full) if not sub or full.startswith(sub + "/") else None

            inner = await mount.artifact.files(mount.from_path,
                                               lambda rel: (at := mounted(rel)) is not None and keep(at))
            found.update({at: data for rel, data in inner.items() if (at := mounted(rel)) is not None})
        return found

    async def content_digest(self) -> str:
        """The digest of the artifact's files as shaped, from the object ids git keeps (nothing inflated: a
        monorepo's artifact costs its listing, not its size) and the includes' published digests."""
        rules = await self.ignore()

        def keep(rel: str) -> bool:
            return self._sparse_keeps(rel) and not rules.excludes(rel)

        listed = await self._own("", keep, contents=False)
        for mount in self.shape.includes:
            if any(name.startswith(mount.to_path + "/") for name in listed):
                raise SourceError("CopyFailure", f"an include's toPath {mount.to_path!r} already exists in the "
                                                 f"repository at {self.revision}", transient=False)
        for sparse in self.shape.sparse:
            if not any(name.startswith(sparse + "/") for name in listed):
                raise SourceError("GitOperationFailed", f"sparse checkout dir {sparse!r} does not exist in the "
                                                        f"repository at {self.revision}", transient=False)
        text = b"".join(name.encode() + b"\0" + oid + b"\n" for name, oid in sorted(listed.items()))
        for mount in self.shape.includes:
            text += f"include {mount.from_path}\0{mount.to_path}\0{mount.artifact.digest}\n".encode()
        return f"sha256:{hashlib.sha256(text).hexdigest()}"

    async def _own(self, sub: str, keep: Wanted, *, contents: bool = True) -> dict[str, bytes]:
        """The commit's files under ``sub`` (and its submodules'), or none when only includes are mounted there."""
        try:
            found = await self.git.files(self.url, self.sha, sub, self.auth, wanted=keep, contents=contents)
        except SourceError as exc:  # the path may be an include's, or a submodule's
            mounted = [m.to_path for m in self.shape.includes]
            if self.shape.submodules and not self.shape.sparse:
                mounted += [path for path, _, _ in await self.git.submodules(self.url, self.sha, self.auth)]
            if exc.reason != "PathNotFound" or not any(
                    at == sub or at.startswith(sub + "/") or sub.startswith(at + "/") for at in mounted):
                raise
            found = {}
        if self.shape.submodules and not self.shape.sparse:
            found.update(await submodule_files(self.git, self.url, self.sha, self.auth, sub, keep, contents=contents))
        return found

    def _sparse_keeps(self, full: str) -> bool:
        return not self.shape.sparse or any(full.startswith(folder + "/") for folder in self.shape.sparse)

    async def ignore(self) -> Ignore:
        """The artifact's ignore rules: spec.ignore over the ``.sourceignore`` files of its tree (includes'
        too, as Flux reads them once they are copied in) and Flux's defaults."""
        if not self._rules:
            named = await self.git.files(self.url, self.sha, "", self.auth,
                                         wanted=lambda rel: posixpath.basename(rel) == FILE)
            for mount in self.shape.includes:
                inner = await mount.artifact.files(mount.from_path, lambda rel: posixpath.basename(rel) == FILE)
                named.update({posixpath.join(mount.to_path, k): v for k, v in inner.items()})
            texts = {posixpath.dirname(k): v.decode(errors="replace") for k, v in named.items()
                     if self._sparse_keeps(k) or not self.shape.sparse}
            self._rules.append(await _compiled(texts, self.shape.ignore, self.revision))
        return self._rules[0]


async def _compiled(texts: dict[str, str], ignore: str | None, revision: str) -> Ignore:
    """The rules of these ``.sourceignore`` texts and spec.ignore, compiled once for every artifact they shape (a
    thousand ConfigSyncs of one revision read it as a thousand artifacts)."""
    key = (tuple(sorted(texts.items())), ignore)
    rules = _COMPILED.get(key)
    if rules is None:
        try:
            # off the loop: compiling Flux's default patterns and the spec's takes tens of ms per artifact
            rules = await asyncio.to_thread(Ignore.of, texts, ignore)
        except ValueError as exc:
            raise SourceError("SourceIgnoreError", f"{revision}: {exc}", transient=False) from None
        size = _RULE_SET + sum(map(len, texts.values())) + len(ignore or "")
        if size <= _COMPILED.budget >> 2:  # one large set does not push out the others
            _COMPILED.put(key, rules, size)
    return rules


async def submodule_files(git: GitCache, url: str, sha: str, auth: GitAuth, sub: str, keep: Wanted,
                          depth: int = 0, *, contents: bool = True) -> dict[str, bytes]:
    """The files under ``sub`` that the submodules of commit ``sha`` hold (relative to ``sub``), each read from
    its own mirror at the commit the tree records, recursively. A submodule on another host than its
    superproject is fetched without the superproject's credentials: a repository's author may point a
    submodule anywhere, and the tenant's credentials go only where the tenant sent them."""
    if depth >= MAX_SUBMODULE_DEPTH:
        raise SourceError("SubmoduleFailed", f"submodules nest more than {MAX_SUBMODULE_DEPTH} deep", transient=False)
    found: dict[str, bytes] = {}
    for path, commit, link in await git.submodules(url, sha, auth):
        if sub and not (path.startswith(sub + "/") or sub.startswith(path + "/") or sub == path):
            continue
        target = submodule_url(url, link)
        credentials = auth if _same_host(url, target) else GitAuth()
        await git.fetch_commit(target, commit, credentials)
        inner_sub = sub[len(path) + 1:] if sub.startswith(path + "/") else ""
        prefix = path[len(sub) + 1:] if sub and path.startswith(sub + "/") else ("" if sub else path)

        def wanted(rel: str, prefix: str = prefix) -> bool:
            return keep(posixpath.join(prefix, rel) if prefix else rel)

        inner = await git.files(target, commit, inner_sub, credentials, wanted=wanted, contents=contents)
        inner.update(await submodule_files(git, target, commit, credentials, inner_sub, wanted, depth + 1,
                                           contents=contents))
        found.update({posixpath.join(prefix, k) if prefix else k: v for k, v in inner.items()})
    return found


def submodule_url(parent: str, link: str) -> str:
    """A submodule's URL as ``.gitmodules`` gives it: absolute, or relative to the superproject's URL."""
    if not link.startswith(("./", "../")):
        return link
    if "://" not in parent:
        raise SourceError("SubmoduleFailed", f"the relative submodule URL {link!r} needs a superproject URL "
                                             "with a scheme (https:// or ssh://)", transient=False)
    return urljoin(parent.rstrip("/") + "/", link)


def _same_host(a: str, b: str) -> bool:
    first, second = urlsplit(a if "://" in a else "ssh://" + a.replace(":", "/", 1)), urlsplit(
        b if "://" in b else "ssh://" + b.replace(":", "/", 1))
    return (first.scheme, first.hostname, first.port) == (second.scheme, second.hostname, second.port)
