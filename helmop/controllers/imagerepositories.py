"""One reconcile of an ImageRepository: its registry's tags listed (page after page, bounded), the exclusion list
applied, the scan reported. A new list (a new revision) wakes the ImagePolicies that read it; an unchanged one
only moves the scan's time."""

from __future__ import annotations

from typing import Any

from helmop.api.errors import HelmopError, SpecError
from helmop.api.images import parse_image_repository
from helmop.api.kinds import Kind
from helmop.api.objects import Resource
from helmop.api.status import now
from helmop.api.status.images import ImageRepositoryStatus
from helmop.decisions.settle import images as settle
from helmop.images.access import registry_credentials
from helmop.images.registry import kept, revision_of

from .context import Context
from .outcome import DONE, FAILED, Outcome
from .status import read_status, report, write_status


async def reconcile(ctx: Context, kind: Kind, body: dict[str, Any]) -> Outcome:
    this = Resource(body)
    status = read_status(kind, ImageRepositoryStatus, body)
    try:
        spec = parse_image_repository(body.get("spec") or {})
    except SpecError as exc:
        await report(ctx, kind, body, status, False, exc.reason, str(exc), stalled=True)
        return DONE
    if spec.suspend:
        return DONE
    key = (kind.key, this.namespace, this.name)
    ctx.memory.refer(key, [(this.namespace, "Secret", ref) for ref in (spec.secret_ref, spec.cert_secret_ref,
                                                                       spec.proxy_secret_ref) if ref])
    try:
        creds = await registry_credentials(ctx.services.kube, this.namespace, spec)
        ctx.memory.secrets[key] = creds.secrets()
        scan = await ctx.services.images.scan(ctx.services.repos, spec.image, creds, spec.insecure, spec.timeout)
    except HelmopError as exc:
        await report(ctx, kind, body, status, False, exc.reason, str(exc), stalled=not exc.transient)
        return FAILED if exc.transient else DONE
    tags = kept(scan, spec.compiled())
    message = f"successful scan: found {len(tags)} tags" + (
        f" ({scan.invalid} left out: not valid tags)" if scan.invalid else "")
    before = status.last_scan_result.revision if status.last_scan_result else ""
    after = settle.scanned(status, this.generation, spec.image.canonical, tags, revision_of(tags), now(),
                           spec.exclusions, message)
    await write_status(ctx, kind, body, after)
    if after.last_scan_result is not None and after.last_scan_result.revision != before:
        await ctx.services.events.normal(body, "Succeeded", message)
    return DONE


async def finalize(ctx: Context, kind: Kind, body: dict[str, Any]) -> Outcome:
    this = Resource(body)
    ctx.memory.drop((kind.key, this.namespace, this.name))
    return DONE
