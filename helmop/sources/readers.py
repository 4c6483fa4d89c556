"""What a source's readers (ConfigSyncs, HelmReleases, other sources) read of it: its published artifact,
rebuilt on the reader's side from the source's spec and status, whichever replica published it.

A reader never takes what the source holds now for what it published: a git artifact is read at the commit
its status names, each include at the digest the including repository recorded (an include that moved on since
is waited for: the including repository is woken by it and publishes again).

Every source object is read here through :func:`referenced`, with who names it (a :class:`Referrer`): the
operator's tenancy policy and the source's spec.accessFrom judge each reference, the ones objects make of each
other on the way too (an ExternalArtifact's producer, an ArtifactGenerator's sources, an include), so no reader
path reaches into another namespace that --no-cross-namespace-refs (or accessFrom) closes."""

from __future__ import annotations

import asyncio
import hashlib
import posixpath
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

from helmop.api.addresses import Policy
from helmop.api.buckets import parse_bucket
from helmop.api.errors import SpecError
from helmop.api.generators import ArtifactGeneratorSpec, parse_artifact_generator, parse_external_artifact
from helmop.api.kinds import Family, Kind
from helmop.api.repositories import access_from_selectors, grants, parse_oci_repository
from helmop.api.sources import GitRepositorySpec, parse_git_repository
from helmop.api.tenancy import Tenancy
from helmop.infra.kube import Kube

from . import artifacts, buckets, generator, github, tarballs
from .credentials import bucket_access, credentials
from .errors import SourceError
from .git import GitAuth, GitCache
from .proxies import proxy_of
from .repositories import Repositories
from .secrets import secret_data
from .trees import Artifact, GitArtifact, Mount, Shape, TreeArtifact

T = TypeVar("T")

MAX_INCLUDE_DEPTH = 8  # includes of includes: deeper is refused (and a cycle is one)


class Readers(Protocol):
    @property
    def kube(self) -> Kube: ...
    @property
    def git(self) -> GitCache: ...
    @property
    def repos(self) -> Repositories: ...
    @property
    def tenancy(self) -> Tenancy: ...


@dataclass(frozen=True)
class Referrer:
    """Who names a source: an object of ``namespace``, in ``field`` (said in a refusal: "spec.sourceRef", or
    "ExternalArtifact a/x spec.sourceRef" for a reference met on the way)."""

    namespace: str
    field: str


def allowed(tenancy: Tenancy, namespace: str, by: Referrer) -> None:
    """CrossNamespaceRef (the reason every other refusal of the tenancy policy gives) when the policy closes
    ``namespace`` to ``by``'s."""
    try:
        tenancy.check_reference(by.namespace, namespace, by.field)
    except SpecError as exc:
        raise SourceError(exc.reason, str(exc), transient=False) from None


async def referenced(readers: Readers, kind: Kind, namespace: str, name: str, by: Referrer) -> dict[str, Any]:
    """The source object ``namespace/name`` as ``by`` names it, once the tenancy policy lets it (before it is
    read: a refusal says nothing of what is there) and, from another namespace, its spec.accessFrom."""
    allowed(readers.tenancy, namespace, by)
    obj = await source_object(readers.kube, kind, namespace, name)
    if namespace != by.namespace:
        await _granted(readers.kube, kind, namespace, name, obj, by.namespace)
    return obj


async def _granted(kube: Kube, kind: Kind, namespace: str, name: str, obj: dict[str, Any], referrer: str) -> None:
    """spec.accessFrom of a source named from the namespace ``referrer``: that namespace's labels must match one of
    its selectors (AccessDenied otherwise). It only narrows: --no-cross-namespace-refs refuses such a reference
    before, whatever accessFrom says (the source's owner cannot widen the operator's lockdown)."""
    what = f"{kind.kind} {namespace}/{name}"
    try:
        selectors = access_from_selectors((obj.get("spec") or {}).get("accessFrom"))
    except SpecError as exc:
        raise SourceError("SourceNotReady", f"{what}: {exc}", transient=True) from None
    if selectors is None:
        return
    found = await kube.get(f"/api/v1/namespaces/{referrer}")
    labels = ((found or {}).get("metadata") or {}).get("labels") or {}
    if not grants(selectors, {str(k): str(v) for k, v in labels.items()}):
        raise SourceError("AccessDenied", f"{what} does not grant namespace {referrer} access (its spec.accessFrom "
                                          "selects no namespace with its labels)", transient=False)


async def source_artifact(readers: Readers, family: Family, kind: str, namespace: str, name: str,
                          by: Referrer) -> Artifact:
    """The artifact the source ``kind`` (of ``family``) named ``namespace/name`` by ``by`` published."""
    if kind == "OCIRepository":
        return await oci_source(readers, family.ocirepository, namespace, name, by)
    if kind == "Bucket":
        return await bucket_source(readers, family.bucket, namespace, name, by)
    if kind == "ExternalArtifact":
        return await external_source(readers, family, namespace, name, by)
    return await git_source(readers, family.gitrepository, namespace, name, by)


def unpublished(obj: dict[str, Any], kind: Kind, namespace: str, name: str) -> SourceError:
    """Why a source has no artifact: its own refusal when it stalled (a reader waiting would wait for good: the
    source tries again only when its spec changes), else SourceNotReady (not yet)."""
    conditions = {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or []}
    stalled, ready = conditions.get("Stalled") or {}, conditions.get("Ready") or {}
    if stalled.get("status") == "True" and ready.get("status") == "False" and ready.get("reason"):
        return SourceError(str(ready["reason"]), f"{kind.kind} {namespace}/{name} failed: {ready.get('message')}",
                           transient=False)
    return SourceError("SourceNotReady", f"{kind.kind} {namespace}/{name} has no artifact yet", transient=True)


def _published(obj: dict[str, Any], kind: Kind, namespace: str, name: str) -> tuple[str, str]:
    """(revision, digest) of a source's artifact; SourceNotReady before it has one."""
    artifact = (obj.get("status") or {}).get("artifact") or {}
    revision = str(artifact.get("revision") or "")
    if not revision:
        raise unpublished(obj, kind, namespace, name)
    return revision, str(artifact.get("digest") or "")


async def bucket_source(readers: Readers, kind: Kind, namespace: str, name: str, by: Referrer) -> TreeArtifact:
    """The objects a Bucket published: its archive in the cache, else fetched again when the bucket still holds
    that revision (SourceNotReady while its Bucket has not published what the bucket holds now)."""
    obj, spec = await _parsed(readers, kind, namespace, name, parse_bucket, by)
    revision, digest = _published(obj, kind, namespace, name)
    creds, keys = await bucket_access(readers.kube, namespace, spec)
    path = await buckets.archive(readers.repos, spec, creds, keys, revision)
    tree = await asyncio.to_thread(lambda: tarballs.unpack(path.read_bytes(), f"{kind.kind} {namespace}/{name}"))
    return TreeArtifact(tree.files, revision, digest)


async def oci_source(readers: Readers, kind: Kind, namespace: str, name: str, by: Referrer) -> TreeArtifact:
    """The files of the layer an OCIRepository published: of the manifest its revision names (whatever the tag
    names now), extracted with its ignore rules or copied, as its spec says."""
    obj, spec = await _parsed(readers, kind, namespace, name, parse_oci_repository, by)
    revision, digest = _published(obj, kind, namespace, name)
    creds = await credentials(readers.kube, namespace, spec.secret_ref, f"{kind.kind} {namespace}/{name}",
                              spec.cert_secret_ref, spec.proxy_secret_ref)
    layer = await artifacts.layer_of(readers.repos, spec, revision, creds)
    tree = await artifacts.config(readers.repos, spec, layer, creds)
    return TreeArtifact(tree.files, revision, digest)


async def _parsed(readers: Readers, kind: Kind, namespace: str, name: str,
                  parse: Callable[[dict[str, Any]], T], by: Referrer) -> tuple[dict[str, Any], T]:
    """A source object as ``by`` names it, and its spec as ``parse`` reads it; SourceNotReady while the spec does
    not parse (the source's own reconcile says why)."""
    obj = await referenced(readers, kind, namespace, name, by)
    try:
        return obj, parse(obj.get("spec") or {})
    except SpecError as exc:
        raise SourceError("SourceNotReady", f"{kind.kind} {namespace}/{name}: {exc}", transient=True) from None


async def source_object(kube: Kube, kind: Kind, namespace: str, name: str) -> dict[str, Any]:
    """A source object of the caller's own namespace (one that names another goes through :func:`referenced`)."""
    obj = await kube.get(kind.path(namespace, name))
    if obj is None:
        raise SourceError("SourceNotFound", f"{kind.kind} {namespace}/{name} does not exist", transient=True)
    return obj


async def git_auth(kube: Kube, namespace: str, spec: GitRepositorySpec, policy: Policy) -> GitAuth:
    """The credentials spec.secretRef gives (a GitHub App's installation token with provider github), and the
    proxy of spec.proxySecretRef."""
    proxy = await proxy_of(kube, namespace, spec.proxy_secret_ref)
    if not spec.secret_ref:
        return GitAuth(proxy=proxy)
    data = await secret_data(kube, namespace, spec.secret_ref, "the GitRepository's secretRef")
    scope = f"{namespace}/{spec.secret_ref}"
    if spec.provider == "github":
        app = github.App.of(data, f"Secret {scope}")
        token = await github.installation_token(app, policy, proxy)
        return GitAuth(username=github.USERNAME, password=token, scope=scope, proxy=proxy, app=app.key())
    if data.get("githubAppID"):
        raise SourceError("InvalidProviderConfiguration", f"Secret {scope} has GitHub App data but spec.provider is "
                                                          "not github", transient=False)
    return replace(GitAuth.from_secret_data(data, scope=scope), proxy=proxy)


def fetched_refs(spec: GitRepositorySpec) -> tuple[str, ...]:
    """References a fetch asks for besides heads and tags (spec.ref.name)."""
    return (spec.ref.fetched,) if spec.ref.name else ()


def shaped(git: GitCache, url: str, revision: str, digest: str, auth: GitAuth, spec: GitRepositorySpec,
           includes: tuple[Mount, ...]) -> GitArtifact:
    return GitArtifact(git, url, revision, revision.rpartition("sha1:")[2], auth,
                       Shape(spec.ignore, spec.sparse_checkout, spec.recurse_submodules, includes), digest)


async def git_source(readers: Readers, kind: Kind, namespace: str, name: str, by: Referrer,
                     depth: int = 0) -> GitArtifact:
    """The artifact a GitRepository published, its commit fetched again if this replica's mirror lacks it."""
    if depth > MAX_INCLUDE_DEPTH:
        raise SourceError("IncludeCycle", f"includes nest more than {MAX_INCLUDE_DEPTH} deep at {kind.kind} "
                                          f"{namespace}/{name}", transient=False)
    obj, spec = await _parsed(readers, kind, namespace, name, parse_git_repository, by)
    status = obj.get("status") or {}
    published = status.get("artifact") or {}
    revision = str(published.get("revision") or "")
    if "sha1:" not in revision:
        raise unpublished(obj, kind, namespace, name)
    recorded = [str((a or {}).get("digest") or "") for a in status.get("includedArtifacts") or []]
    mounts = []
    for i, include in enumerate(spec.include):
        inner = await git_source(readers, kind, namespace, include.repository,
                                 Referrer(namespace, f"{kind.kind} {namespace}/{name} spec.include[{i}]"), depth + 1)
        if i >= len(recorded) or recorded[i] != inner.digest:
            raise SourceError("SourceNotReady", f"{kind.kind} {namespace}/{name} includes {include.repository}, "
                                                "whose artifact changed since it was published; waiting for it to "
                                                "publish again", transient=True)
        mounts.append(Mount(inner, include.from_path, include.target))
    auth = await git_auth(readers.kube, namespace, spec, readers.git.policy)
    artifact = shaped(readers.git, spec.url, revision, str(published.get("digest") or ""), auth, spec,
                      tuple(mounts))
    if not await readers.git.has_commit(spec.url, artifact.sha, auth):  # a restart, or another replica fetched it
        await readers.git.fetch(spec.url, auth, timeout=spec.timeout, refs=fetched_refs(spec))
    return artifact


async def read_file(artifact: Artifact, path: str) -> bytes | None:
    """One file of an artifact (None when it has none there)."""
    folder, name = posixpath.split(path.removeprefix("./"))
    try:
        found = await artifact.files(folder, lambda rel: rel == name)
    except SourceError as exc:
        if exc.reason == "PathNotFound":
            return None
        raise
    return found.get(name)


async def generator_trees(readers: Readers, family: Family, namespace: str, spec: ArtifactGeneratorSpec,
                          by: str = "") -> tuple[dict[str, dict[str, bytes]], str]:
    """The files of each source of an ArtifactGenerator of ``namespace`` (by alias), and the digest of what they
    published (the generator's observedSourcesDigest: its sources' revisions and digests). ``by``: the generator,
    as a refusal names it when it is not the object being reconciled."""
    trees: dict[str, dict[str, bytes]] = {}
    said = []
    for i, source in enumerate(spec.sources):
        artifact = await source_artifact(readers, family, source.kind, source.namespace or namespace, source.name,
                                         Referrer(namespace, f"{by} spec.sources[{i}]".lstrip()))
        trees[source.alias] = await artifact.files("")
        said.append(f"{source.alias}=[digest={artifact.digest},revision={artifact.revision}]")
    return trees, "sha256:" + hashlib.sha256("|".join(sorted(said)).encode()).hexdigest()


async def external_source(readers: Readers, family: Family, namespace: str, name: str,
                          by: Referrer) -> TreeArtifact:
    """The files an ExternalArtifact published: composed again from its ArtifactGenerator's sources when this
    replica has no copy (SourceNotReady when they moved on since: the generator publishes again), or, made by
    another controller, fetched from its URL and checked against its digest. Its spec.sourceRef is a reference
    like any other: whoever may write an ExternalArtifact's status must not have another namespace's generator
    build for it what the tenancy policy keeps from them."""
    kind = family.externalartifact
    obj, parsed = await _parsed(readers, kind, namespace, name, parse_external_artifact, by)
    spec = parsed.source_ref
    revision, digest = _published(obj, kind, namespace, name)
    what = f"{kind.kind} {namespace}/{name}"
    if spec.kind == family.artifactgenerator.kind:
        producer = Referrer(namespace, f"{what} spec.sourceRef")
        allowed(readers.tenancy, spec.namespace or namespace, producer)  # a copy this replica keeps is no exception

        async def composed() -> bytes:
            return await generated(readers, family, spec.namespace or namespace, spec.name, name, digest, producer)

        path = await readers.repos.cached(generated_path(readers.repos, namespace, name, digest), composed, what,
                                          check=tarballs.unpack)
        data = await asyncio.to_thread(path.read_bytes)
    else:
        url = str(((obj.get("status") or {}).get("artifact") or {}).get("url") or "")
        data = await readers.repos.artifact(url, digest, what)
    tree = await asyncio.to_thread(tarballs.unpack, data, what)
    return TreeArtifact(tree.files, revision, digest)


def generated_path(repos: Repositories, namespace: str, name: str, digest: str) -> Path:
    """Where this replica keeps an ExternalArtifact an ArtifactGenerator made (by its content's digest)."""
    owner = hashlib.sha256(f"{namespace}/{name}".encode()).hexdigest()[:32]
    return repos.cache_dir / "generated" / owner / f"{digest.removeprefix('sha256:')[:64]}.tgz"


async def generated(readers: Readers, family: Family, namespace: str, producer: str, name: str, digest: str,
                    by: Referrer) -> bytes:
    """The archive of the artifact ``name`` of the ArtifactGenerator ``namespace/producer`` (as ``by`` names it),
    composed from what its sources publish now; SourceNotReady unless it is the one of ``digest``."""
    what = f"ArtifactGenerator {namespace}/{producer}"
    _, spec = await _parsed(readers, family.artifactgenerator, namespace, producer, parse_artifact_generator, by)
    trees, _ = await generator_trees(readers, family, namespace, spec, what)
    planned = next((p for p in generator.plan(spec, trees) if p.template.name == name), None)
    if planned is None:
        raise SourceError("SourceNotReady", f"{what} no longer makes {name}", transient=True)
    tree = generator.compose(planned.template, trees)
    data = await asyncio.to_thread(tarballs.pack, tree.files, tree.executable)
    if tarballs.digest(data) != digest:
        raise SourceError("SourceNotReady", f"the sources of {what} moved on since it published {name}; waiting for "
                                            "it to publish again", transient=True)
    return data
