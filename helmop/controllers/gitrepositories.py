"""One reconcile of a GitRepository: fetch into the mirror, resolve the ref, publish the revision.

When the revision changes, the HelmReleases and ConfigSyncs that read this repository are woken.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from helmop.api.errors import SpecError
from helmop.api.kinds import Kind
from helmop.api.objects import Resource
from helmop.api.sources import GitRepositorySpec, parse_git_repository
from helmop.api.status import now
from helmop.api.status.sources import GitRepositoryStatus
from helmop.helm.inputs import InputError, git_auth
from helmop.reconcile.settle import sources as settle
from helmop.sources.errors import SourceError
from helmop.sources.git import GitAuth, GitRef, check_ref
from helmop.sources.secrets import secret_entries
from helmop.sources.verification.commits import TrustedKeys, verify

from .context import Context
from .outcome import DONE, FAILED, Outcome
from .status import published, read_status, report, write_status

log = logging.getLogger(__name__)


def webhook_path(namespace: str, name: str) -> str:
    return f"/hooks/{namespace}/{name}"


async def reconcile(ctx: Context, kind: Kind, body: dict[str, Any]) -> Outcome:
    """Returns a retry delay after a transient failure, else None (come back at the interval). ``kind``:
    helmop's GitRepository or Flux's."""
    this = Resource(body)
    namespace, name = this.namespace, this.name
    status = read_status(kind, GitRepositoryStatus, body)
    try:
        spec = parse_git_repository(body.get("spec") or {})
    except SpecError as exc:
        await report(ctx, kind, body, status, False, exc.reason, str(exc), stalled=True)
        return DONE
    status = settle.webhook(status, webhook_path(namespace, name) if spec.webhook_secret_ref else "")
    if spec.suspend:
        await write_status(ctx, kind, body, status)
        return DONE
    key = (kind.key, namespace, name)
    ctx.memory.refer(key, [(namespace, "Secret", ref) for ref in (spec.secret_ref, spec.verify_secret_ref) if ref])
    try:
        ref = GitRef(spec.branch, spec.tag, spec.semver, spec.commit)
        check_ref(ref)
        auth = await git_auth(ctx.services.kube, namespace, body)
        ctx.memory.secrets[key] = auth.secrets()
        started = time.monotonic()
        try:
            await ctx.services.git.fetch(spec.url, auth, timeout=spec.timeout)
        except SourceError:
            ctx.services.metrics.git_fetch.labels("failure").observe(time.monotonic() - started)
            raise
        ctx.services.metrics.git_fetch.labels("success").observe(time.monotonic() - started)
        revision, sha = await ctx.services.git.resolve(spec.url, ref, auth)
    except (SourceError, InputError) as exc:
        await report(ctx, kind, body, status, False, exc.reason, str(exc), stalled=not exc.transient)
        return FAILED if exc.transient else DONE
    try:
        message = await _verified(ctx, namespace, spec, auth, revision, sha)
    except SourceError as exc:  # the revision is not published: readers keep the previous one
        status = settle.unverified(status, this.generation, exc.reason, str(exc))
        await report(ctx, kind, body, status, False, exc.reason, str(exc), stalled=not exc.transient)
        return FAILED if exc.transient else DONE
    status = settle.verified(status, this.generation, spec.verify_mode, message)
    await published(ctx, kind, body, status, settle.fetched(status, this.generation, revision, now()),
                    f"stored artifact for revision {revision}")
    return DONE


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
    tag = revision.rsplit("@sha1:", 1)[0] if spec.tag or spec.semver else ""
    return verify(await ctx.services.git.signed(spec.url, auth, sha, tag), spec.verify_mode, keys)


async def finalize(ctx: Context, kind: Kind, body: dict[str, Any]) -> Outcome:
    """Drop the mirror when no other GitRepository (of this kind) uses the same URL."""
    this = Resource(body)
    ctx.memory.drop((kind.key, this.namespace, this.name))
    url = str((body.get("spec") or {}).get("url", ""))
    others = await ctx.services.kube.list(kind.path())
    if url and not any((o.get("spec") or {}).get("url") == url and Resource(o).uid != this.uid
                       for o in others):
        ctx.services.git.forget(url)
        log.info("dropped the git cache of %s/%s", this.namespace, this.name)
    return DONE
