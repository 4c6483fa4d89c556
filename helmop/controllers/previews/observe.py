"""A Preview's world, observed once per turn: its GitRepository (URL and credentials), its Provider resolved (a
pull-request-comment type, its token read), the SOPS keys it decrypts with, the base branch's revision, and the open
pull requests into it, each head fetched into the repository's mirror (``refs/pull/<n>/head``) and read there."""

from __future__ import annotations

import time
from dataclasses import dataclass

from helmop.api.errors import HelmopError, SpecError
from helmop.api.kinds import GITREPOSITORY, PROVIDER
from helmop.api.notifications import parse_provider
from helmop.api.objects import Resource
from helmop.api.previews import PreviewSpec
from helmop.api.sources import GitRepositorySpec, parse_git_repository
from helmop.decisions.previews import Open
from helmop.infra.kube import KubeError
from helmop.notifications.previews import THREADS, ChangeRequest, Host, PayloadError, Undeliverable, host_of
from helmop.notifications.targets import default_status_id
from helmop.sources.decryption.keys import KeyInvalid, Keys
from helmop.sources.errors import SourceError
from helmop.sources.git import GitAuth, GitRef
from helmop.sources.readers import fetched_refs, git_auth, source_object
from helmop.sources.secrets import secret_entries

from ..context import Context


class Unobservable(HelmopError):
    """What stops a turn before any pull request is looked at: a reason, and whether trying again may help."""


@dataclass(frozen=True)
class World:
    """What a Preview's turn observes once: its repository and its credentials, the git host, the base branch and
    the open pull requests into it."""

    url: str
    auth: GitAuth
    host: Host
    keys: Keys | None
    base: str  # the branch
    base_sha: str
    base_revision: str  # main@sha1:<sha>
    open: tuple[Open, ...]  # the most recently updated first, heads as fetched
    timeout: float  # of a fetch (the GitRepository's)

    @property
    def secrets(self) -> list[str]:
        return [*self.auth.secrets(), *self.host.secrets]


async def observed(ctx: Context, this: Resource, spec: PreviewSpec) -> World:
    try:
        return await _observed(ctx, this, spec)
    except SourceError as exc:
        raise Unobservable(exc.reason, str(exc), transient=exc.transient) from None
    except SpecError as exc:
        raise Unobservable(exc.reason, str(exc), transient=False) from None
    except (PayloadError, Undeliverable) as exc:
        raise Unobservable("PullRequestsUnavailable", f"the git host's pull requests could not be listed: {exc}",
                           transient=True) from None
    except KubeError as exc:
        raise Unobservable("ProviderUnavailable", f"Provider {this.namespace}/{spec.provider}: {exc.message}",
                           transient=True) from None


async def _observed(ctx: Context, this: Resource, spec: PreviewSpec) -> World:
    kube, git, namespace = ctx.services.kube, ctx.services.git, this.namespace
    repository = await _repository(ctx, namespace, spec.source)
    auth = await git_auth(kube, namespace, repository, git.policy)
    host = await _host(ctx, this, spec)
    keys = await _keys(ctx, namespace, spec.decryption_secret)
    base = spec.base or repository.ref.branch or "main"
    listed = (await host.open_requests(base))[:spec.max_pull_requests]
    started = time.monotonic()
    await git.fetch(repository.url, auth, timeout=repository.timeout,
                    refs=(*fetched_refs(repository), *(pr.ref for pr in listed)))
    ctx.services.metrics.git_fetch.labels("success").observe(time.monotonic() - started)
    revision, sha = await git.resolve(repository.url, GitRef(branch=base), auth)
    heads = tuple([Open(pr.number, await _head(ctx, repository.url, pr, auth)) for pr in listed])
    return World(repository.url, auth, host, keys, base, sha, revision, heads, repository.timeout)


async def _repository(ctx: Context, namespace: str, name: str) -> GitRepositorySpec:
    """The GitRepository's spec; SourceNotReady while it does not parse (its own reconcile says why, and wakes this
    Preview once it changes)."""
    obj = await source_object(ctx.services.kube, GITREPOSITORY, namespace, name)
    try:
        return parse_git_repository(obj.get("spec") or {})
    except SpecError as exc:
        raise SourceError("SourceNotReady", f"GitRepository {namespace}/{name}: {exc}", transient=True) from None


async def _host(ctx: Context, this: Resource, spec: PreviewSpec) -> Host:
    obj = await ctx.services.kube.get(PROVIDER.path(this.namespace, spec.provider))
    if obj is None:
        raise SourceError("ProviderNotFound", f"Provider {this.namespace}/{spec.provider} does not exist",
                          transient=True)
    try:
        provider = parse_provider(obj.get("spec") or {})
    except SpecError as exc:
        raise SourceError("InvalidProvider", f"Provider {this.namespace}/{spec.provider}: {exc}",
                          transient=False) from None
    try:
        return await host_of(ctx.services.kube, this.namespace, provider, obj,
                             default_status_id("Preview", this.name, obj), ctx.services.notifier.sender)
    except PayloadError as exc:  # of another type (the spec's to change), or its Secret not readable (yet)
        raise SourceError("InvalidProvider", str(exc), transient=provider.type in THREADS) from None


async def _keys(ctx: Context, namespace: str, secret: str) -> Keys | None:
    if not secret:
        return None
    try:
        entries = await secret_entries(ctx.services.kube, namespace, secret, "spec.decryption.secretRef")
        return Keys.of_entries(entries, f"Secret {namespace}/{secret}")
    except KeyInvalid as exc:
        raise SourceError("DecryptionFailed", f"spec.decryption.secretRef: {exc}", transient=False) from None


async def _head(ctx: Context, url: str, pr: ChangeRequest, auth: GitAuth) -> str:
    """The commit the pull request's reference names in the mirror (the host's listing may be a push behind)."""
    return (await ctx.services.git.resolve(url, GitRef(name=pr.ref), auth))[1]
