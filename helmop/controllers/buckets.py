"""One reconcile of a Bucket: its objects listed (the revision: Flux's digest of keys and etags), fetched and
archived when the revision or the ignore rules changed, published. An unchanged listing fetches nothing and
wakes nobody; a new revision wakes the ConfigSyncs that read the Bucket."""

from __future__ import annotations

import asyncio

from helmop.api.buckets import BucketSpec
from helmop.api.status import now
from helmop.api.status.sources import BucketStatus
from helmop.decisions.settle import sources as settle
from helmop.sources import buckets, tarballs
from helmop.sources.credentials import bucket_access

from .outcome import DONE, Outcome
from .turn import Turn


async def reconcile(turn: Turn[BucketSpec, BucketStatus]) -> Outcome:
    spec, status = turn.spec, turn.status
    turn.refer_secrets(spec.secret_ref, spec.cert_secret_ref, spec.proxy_secret_ref)
    revision, digest, size = await _artifact(turn)
    message = f"stored artifact: revision '{revision}'"
    url = f"{'http' if spec.insecure else 'https'}://{spec.endpoint}/{spec.bucket_name}"
    await turn.publish(settle.bucket(status, turn.generation, url, revision, digest, size, now(), message,
                                     spec.ignore), message)
    return DONE


async def _artifact(turn: Turn[BucketSpec, BucketStatus]) -> tuple[str, str, int]:
    """(revision, digest, size) of the bucket's artifact now: what was published while the listing and the ignore
    rules are unchanged (nothing fetched), else the archive of its objects."""
    ctx, spec, status = turn.ctx, turn.spec, turn.status
    creds, keys = await bucket_access(ctx.services.kube, turn.namespace, spec)
    turn.read_secrets([*creds.secrets(), *([keys.secret] if keys.secret else [])])
    found = await buckets.listed(ctx.services.repos, spec, creds, keys)
    revision = found[2]
    before = status.artifact
    if before is not None and before.revision == revision and before.digest and status.observed_ignore == spec.ignore:
        return revision, before.digest, before.size
    path = await buckets.archive(ctx.services.repos, spec, creds, keys, revision, found)
    data = await asyncio.to_thread(path.read_bytes)
    return revision, tarballs.digest(data), len(data)
