"""One reconcile of an ImageRepository: its registry's tags listed (page after page, bounded), the exclusion list
applied, the scan reported. A new list (a new revision) wakes the ImagePolicies that read it; an unchanged one
only moves the scan's time."""

from __future__ import annotations

from helmop.api.images import ImageRepositorySpec
from helmop.api.status import now
from helmop.api.status.images import ImageRepositoryStatus
from helmop.decisions.settle import images as settle
from helmop.images.access import registry_credentials
from helmop.images.registry import kept, revision_of

from .outcome import DONE, Outcome
from .turn import Turn


async def reconcile(turn: Turn[ImageRepositorySpec, ImageRepositoryStatus]) -> Outcome:
    ctx, spec, status = turn.ctx, turn.spec, turn.status
    turn.refer_secrets(spec.secret_ref, spec.cert_secret_ref, spec.proxy_secret_ref)
    creds = await registry_credentials(ctx.services.kube, turn.namespace, spec)
    turn.read_secrets(creds.secrets())
    scan = await ctx.services.images.scan(ctx.services.repos, spec.image, creds, spec.insecure, spec.timeout)
    tags = kept(scan, spec.compiled())
    message = f"successful scan: found {len(tags)} tags" + (
        f" ({scan.invalid} left out: not valid tags)" if scan.invalid else "")
    before = status.last_scan_result.revision if status.last_scan_result else ""
    after = settle.scanned(status, turn.generation, spec.image.canonical, tags, revision_of(tags), now(),
                           spec.exclusions, message)
    await turn.write(after)
    if after.last_scan_result is not None and after.last_scan_result.revision != before:
        await turn.events.normal("Succeeded", message)
    return DONE
