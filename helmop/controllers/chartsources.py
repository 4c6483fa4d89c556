"""One reconcile of a HelmRepository or an OCIRepository: the chart source many HelmReleases share.

A HelmRepository's index is fetched here once per interval (conditionally: an unchanged index costs a 304)
into the cache its releases resolve from; an OCIRepository's reference is resolved to a manifest and its
chart layer. When the revision changes, the HelmReleases that name the source are woken.
"""

from __future__ import annotations

from typing import Any

from helmop.api.errors import HelmopError, SpecError
from helmop.api.kinds import Kind
from helmop.api.objects import Resource
from helmop.api.redaction import safe_url
from helmop.api.repositories import parse_helm_repository, parse_oci_repository
from helmop.api.status import Status, now
from helmop.api.status.sources import HelmRepositoryStatus, OCIRepositoryStatus
from helmop.helm.inputs import credentials
from helmop.reconcile.settle import outcome
from helmop.reconcile.settle import sources as settle
from helmop.sources import artifacts

from .context import Context
from .outcome import DONE, FAILED, Outcome
from .status import pending_request, read_status, report, write_status


async def reconcile_helm_repository(ctx: Context, kind: Kind, body: dict[str, Any]) -> Outcome:
    this = Resource(body)
    status = read_status(kind, HelmRepositoryStatus, body)
    try:
        spec = parse_helm_repository(body.get("spec") or {})
    except SpecError as exc:
        return await _refused(ctx, kind, body, status, exc)
    if spec.suspend:
        return DONE
    if spec.oci:  # a registry has no index: each release lists its chart's tags (once per interval)
        await write_status(ctx, kind, body, outcome(status.but(url=safe_url(spec.url)), this.generation, True,
                                                    "Succeeded", "Helm repository is ready (OCI registry)"))
        return DONE
    key = (kind.key, this.namespace, this.name)
    named = [spec.secret_ref, spec.cert_secret_ref]
    ctx.memory.refer(key, [(this.namespace, "Secret", name) for name in named if name])
    try:
        creds = await credentials(ctx.services.kube, this.namespace, spec.secret_ref, "spec", spec.cert_secret_ref)
        ctx.memory.secrets[key] = creds.secrets()
        revision, charts = await ctx.services.repos.index_revision(spec.url, creds, max_age=spec.interval,
                                                                   asked_at=pending_request(body))
    except HelmopError as exc:
        return await _failed(ctx, kind, body, status, exc)
    new = status.artifact is None or status.artifact.revision != revision
    message = f"stored artifact: revision '{revision}' ({charts} charts)"
    await write_status(ctx, kind, body, settle.chart_source(status, this.generation, safe_url(spec.url), revision,
                                                            revision, now(), message))
    if new:
        await ctx.services.events.normal(body, "NewArtifact", message)
        ctx.memory.wake_referrers(this.namespace, kind.key, this.name)
    return DONE


async def reconcile_oci_repository(ctx: Context, kind: Kind, body: dict[str, Any]) -> Outcome:
    this = Resource(body)
    status = read_status(kind, OCIRepositoryStatus, body)
    try:
        spec = parse_oci_repository(body.get("spec") or {})
    except SpecError as exc:
        return await _refused(ctx, kind, body, status, exc)
    if spec.suspend:
        return DONE
    key = (kind.key, this.namespace, this.name)
    named = [spec.secret_ref, spec.cert_secret_ref]
    ctx.memory.refer(key, [(this.namespace, "Secret", name) for name in named if name])
    try:
        creds = await credentials(ctx.services.kube, this.namespace, spec.secret_ref, "spec", spec.cert_secret_ref)
        ctx.memory.secrets[key] = creds.secrets()
        found = await artifacts.resolve(ctx.services.repos, spec, creds)
        chart, _ = await artifacts.chart(ctx.services.repos, spec.url, found.digest, creds, spec.insecure)
    except HelmopError as exc:
        return await _failed(ctx, kind, body, status, exc)
    new = status.artifact is None or status.artifact.revision != found.revision
    message = f"stored artifact for digest '{found.revision}' (chart {chart.name} {chart.version})"
    await write_status(ctx, kind, body, settle.chart_source(status, this.generation, safe_url(spec.url),
                                                            found.revision, found.digest, now(), message))
    if new:
        await ctx.services.events.normal(body, "NewArtifact", message)
        ctx.memory.wake_referrers(this.namespace, kind.key, this.name)
    return DONE


async def finalize(ctx: Context, kind: Kind, body: dict[str, Any]) -> Outcome:
    """Nothing is kept per source but what the operator remembers of it (the cache is shared by URL)."""
    this = Resource(body)
    ctx.memory.drop((kind.key, this.namespace, this.name))
    return DONE


async def _refused(ctx: Context, kind: Kind, body: dict[str, Any], status: Status, exc: SpecError) -> Outcome:
    await report(ctx, kind, body, status, False, exc.reason, str(exc), stalled=True)
    return DONE


async def _failed(ctx: Context, kind: Kind, body: dict[str, Any], status: Status, exc: HelmopError) -> Outcome:
    await report(ctx, kind, body, status, False, exc.reason, str(exc), stalled=not exc.transient)
    return FAILED if exc.transient else DONE
