"""One reconcile of a GitRepository: its includes' artifacts read, the mirror fetched, the ref resolved, the
signature checked, the artifact's digest taken (as ignore rules, sparse checkout, submodules and includes shape
it) and published.

When the revision or the digest changes, the HelmReleases, ConfigSyncs and GitRepositories that read this
repository are woken.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from helmop.api.errors import SpecError
from helmop.api.kinds import Kind
from helmop.api.objects import ObjectKey, Resource
from helmop.api.sources import GitRepositorySpec, parse_git_repository
from helmop.api.status import now
from helmop.api.status.sources import Artifact, GitRepositoryStatus, NameRef, ObservedInclude
from helmop.decisions.settle import sources as settle
from helmop.sources.errors import SourceError
from helmop.sources.git import GitAuth, check_ref
from helmop.sources.readers import MAX_INCLUDE_DEPTH, Referrer, fetched_refs, git_auth, git_source, shaped
from helmop.sources.secrets import secret_entries
from helmop.sources.trees import GitArtifact, Mount
from helmop.sources.verification.commits import TrustedKeys, verify

from .context import Context
from .outcome import DONE, Outcome
from .turn import Turn

log = logging.getLogger(__name__)


def webhook_path(namespace: str, name: str) -> str:
    return f"/hooks/{namespace}/{name}"


async def reconcile(turn: Turn[GitRepositorySpec, GitRepositoryStatus]) -> Outcome:
    ctx, spec, namespace, kind = turn.ctx, turn.spec, turn.namespace, turn.kind
    turn.status = settle.webhook(turn.status, webhook_path(namespace, turn.name) if spec.webhook_secret_ref else "")
    turn.refer(turn.secrets_named(spec.secret_ref, spec.verify_secret_ref, spec.proxy_secret_ref)
               + [ObjectKey(kind.key, namespace, include.repository) for include in spec.include])
    mounts = await _includes(ctx, kind, namespace, turn.name, spec)
    auth, revision = await _fetched(turn)
    artifact = shaped(ctx.services.git, spec.url, revision, "", auth, spec, mounts)
    try:
        message = await _verified(ctx, namespace, spec, auth, revision, artifact.sha)
    except SourceError as exc:  # the revision is not published: readers keep the previous one
        turn.status = settle.unverified(turn.status, turn.generation, exc.reason, str(exc))
        raise
    digest = await _digest(artifact, turn.status, spec)
    status = settle.verified(turn.status, turn.generation, spec.verify_mode, message)
    turn.status = status
    await turn.publish(settle.fetched(status, turn.generation, revision, digest, now(), **_observed(spec, mounts)),
                       f"stored artifact for revision {revision}")
    return DONE


async def _fetched(turn: Turn[GitRepositorySpec, GitRepositoryStatus]) -> tuple[GitAuth, str]:
    """The repository fetched into the mirror: the credentials it was fetched with, the revision its ref names."""
    ctx, spec = turn.ctx, turn.spec
    ref = spec.ref
    check_ref(ref)
    auth = await git_auth(ctx.services.kube, turn.namespace, spec, ctx.services.git.policy)
    turn.read_secrets(auth.secrets())
    started = time.monotonic()
    try:
        await ctx.services.git.fetch(spec.url, auth, timeout=spec.timeout, refs=fetched_refs(spec))
    except SourceError:
        ctx.services.metrics.git_fetch.labels("failure").observe(time.monotonic() - started)
        raise
    ctx.services.metrics.git_fetch.labels("success").observe(time.monotonic() - started)
    revision, _sha = await ctx.services.git.resolve(spec.url, ref, auth)
    return auth, revision


async def _includes(ctx: Context, kind: Kind, namespace: str, name: str,
                    spec: GitRepositorySpec) -> tuple[Mount, ...]:
    """spec.include's artifacts as they are published now (a cycle, a missing repository or one without an
    artifact yet is said by reason: IncludeCycle, IncludeUnavailable)."""
    await _no_cycle(ctx, kind, namespace, name, spec, (name,))
    mounts = []
    for i, include in enumerate(spec.include):
        try:
            inner = await git_source(ctx.services, kind, namespace, include.repository,
                                     Referrer(namespace, f"spec.include[{i}]"), depth=1)
        except SourceError as exc:
            if exc.reason == "IncludeCycle":
                raise
            raise SourceError("IncludeUnavailable", f"include {include.repository}: {exc}", transient=True) from None
        mounts.append(Mount(inner, include.from_path, include.target))
    return tuple(mounts)


async def _no_cycle(ctx: Context, kind: Kind, namespace: str, name: str, spec: GitRepositorySpec,
                    path: tuple[str, ...]) -> None:
    if len(path) > MAX_INCLUDE_DEPTH:
        raise SourceError("IncludeCycle", f"includes nest more than {MAX_INCLUDE_DEPTH} deep: {' -> '.join(path)}",
                          transient=False)
    for include in spec.include:
        if include.repository in path:
            raise SourceError("IncludeCycle", f"include cycle: {' -> '.join((*path, include.repository))}",
                              transient=False)
        obj = await ctx.services.kube.get(kind.path(namespace, include.repository))
        try:
            inner = parse_git_repository((obj or {}).get("spec") or {}) if obj else None
        except SpecError:
            inner = None
        if inner is not None:
            await _no_cycle(ctx, kind, namespace, include.repository, inner, (*path, include.repository))


async def _digest(artifact: GitArtifact, status: GitRepositoryStatus, spec: GitRepositorySpec) -> str:
    """The digest of the artifact's files: the published one while nothing it is made of changed, else taken
    again (the tree's listing: nothing inflated but .sourceignore files)."""
    published = status.artifact
    observed = _observed(spec, artifact.shape.includes)
    if published is not None and published.revision == artifact.revision and published.digest and all(
            getattr(status, field) == value for field, value in observed.items()):
        return published.digest
    return await artifact.content_digest()


def _observed(spec: GitRepositorySpec, mounts: tuple[Mount, ...]) -> dict[str, Any]:
    """What the artifact was made with, as Flux's status records it."""
    return {"included_artifacts": tuple(Artifact(revision=m.artifact.revision, digest=m.artifact.digest)
                                        for m in mounts),
            "observed_ignore": spec.ignore, "observed_recurse_submodules": spec.recurse_submodules,
            "observed_include": tuple(ObservedInclude(NameRef(i.repository), i.from_path, i.to_path)
                                      for i in spec.include),
            "observed_sparse_checkout": spec.sparse_checkout}


async def _verified(ctx: Context, namespace: str, spec: GitRepositorySpec, auth: GitAuth, revision: str,
                    sha: str) -> str:
    """What spec.verify says of the resolved revision ("" when it asks nothing); SourceError when it refuses."""
    if not spec.verify_mode:
        return ""
    try:
        entries = await secret_entries(ctx.services.kube, namespace, spec.verify_secret_ref, "spec.verify.secretRef")
    except SourceError as exc:
        raise SourceError("VerificationError", f"public keys secret error: {exc}", transient=exc.transient) from None
    keys = TrustedKeys.of_entries(entries, f"Secret {namespace}/{spec.verify_secret_ref}")
    ref = spec.ref
    tag = revision.rsplit("@sha1:", 1)[0] if (ref.tag or ref.semver) and not (ref.commit or ref.name) else ""
    return verify(await ctx.services.git.signed(spec.url, auth, sha, tag), spec.verify_mode, keys)


async def finalize(turn: Turn[GitRepositorySpec | None, GitRepositoryStatus]) -> Outcome:
    """Drop the mirror when no other GitRepository (of this kind) uses the same URL (its spec as written: one the
    model refuses may still have fetched, before it was edited)."""
    ctx, this = turn.ctx, turn.this
    url = str(this.spec.get("url") or "")
    others = await ctx.services.kube.list(turn.kind.path())
    if url and not any((o.get("spec") or {}).get("url") == url and Resource(o).uid != this.uid
                       for o in others):
        ctx.services.git.forget(url)
        log.info("dropped the git cache of %s/%s", this.namespace, this.name)
    return DONE
