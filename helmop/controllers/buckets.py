"""One reconcile of a Bucket: its objects listed (the revision: Flux's digest of keys and etags), fetched and
archived when the revision or the ignore rules changed, published. An unchanged listing fetches nothing and
wakes nobody; a new revision wakes the ConfigSyncs that read the Bucket."""

from __future__ import annotations

import asyncio
from typing import Any

from helmop.api.buckets import BucketSpec, parse_bucket
from helmop.api.errors import HelmopError, SpecError
from helmop.api.kinds import Kind
from helmop.api.objects import Resource
from helmop.api.status import now
from helmop.api.status.sources import BucketStatus
from helmop.decisions.settle import sources as settle
from helmop.sources import buckets, tarballs
from helmop.sources.credentials import bucket_access

from .context import Context
from .outcome import DONE, FAILED, Outcome
from .status import published, read_status, report


async def reconcile(ctx: Context, kind: Kind, body: dict[str, Any]) -> Outcome:
    this = Resource(body)
    status = read_status(kind, BucketStatus, body)
    try:
        spec = parse_bucket(body.get("spec") or {})
    except SpecError as exc:
        await report(ctx, kind, body, status, False, exc.reason, str(exc), stalled=True)
        return DONE
    if spec.suspend:
        return DONE
    key = (kind.key, this.namespace, this.name)
    ctx.memory.refer(key, [(this.namespace, "Secret", ref) for ref in (spec.secret_ref, spec.cert_secret_ref,
                                                                       spec.proxy_secret_ref) if ref])
    try:
        revision, digest, size = await _artifact(ctx, this.namespace, spec, status, key)
    except HelmopError as exc:
        await report(ctx, kind, body, status, False, exc.reason, str(exc), stalled=not exc.transient)
        return FAILED if exc.transient else DONE
    message = f"stored artifact: revision '{revision}'"
    url = f"{'http' if spec.insecure else 'https'}://{spec.endpoint}/{spec.bucket_name}"
    await published(ctx, kind, body, status, settle.bucket(status, this.generation, url, revision, digest, size,
                                                           now(), message, spec.ignore), message)
    return DONE


async def _artifact(ctx: Context, namespace: str, spec: BucketSpec, status: BucketStatus,
                    key: tuple[str, str, str]) -> tuple[str, str, int]:
    """(revision, digest, size) of the bucket's artifact now: what was published while the listing and the ignore
    rules are unchanged (nothing fetched), else the archive of its objects."""
    creds, keys = await bucket_access(ctx.services.kube, namespace, spec)
    ctx.memory.secrets[key] = [*creds.secrets(), *([keys.secret] if keys.secret else [])]
    found = await buckets.listed(ctx.services.repos, spec, creds, keys)
    revision = found[2]
    before = status.artifact
    if before is not None and before.revision == revision and before.digest and status.observed_ignore == spec.ignore:
        return revision, before.digest, before.size
    path = await buckets.archive(ctx.services.repos, spec, creds, keys, revision, found)
    data = await asyncio.to_thread(path.read_bytes)
    return revision, tarballs.digest(data), len(data)


async def finalize(ctx: Context, kind: Kind, body: dict[str, Any]) -> Outcome:
    """Nothing is kept per Bucket but what the operator remembers of it (archives are cached by content)."""
    this = Resource(body)
    ctx.memory.drop((kind.key, this.namespace, this.name))
    return DONE
