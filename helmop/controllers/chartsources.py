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
from helmop.api.repositories import OCIRepositorySpec, parse_helm_repository, parse_oci_repository
from helmop.api.status import Status, now
from helmop.api.status.sources import HelmRepositoryStatus, OCIRepositoryStatus
from helmop.helm.inputs import credentials
from helmop.reconcile.settle import outcome
from helmop.reconcile.settle import sources as settle
from helmop.sources import artifacts
from helmop.sources.errors import SourceError
from helmop.sources.repositories import Credentials
from helmop.sources.secrets import secret_entries
from helmop.sources.verification import registry

from .context import Context
from .outcome import DONE, FAILED, Outcome
from .status import pending_request, published, read_status, report, write_status


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
    try:
        creds = await _credentials(ctx, kind, this, spec.secret_ref, spec.cert_secret_ref)
        revision, charts = await ctx.services.repos.index_revision(spec.url, creds, max_age=spec.interval,
                                                                   asked_at=pending_request(body))
    except HelmopError as exc:
        return await _failed(ctx, kind, body, status, exc)
    message = f"stored artifact: revision '{revision}' ({charts} charts)"
    await published(ctx, kind, body, status, settle.chart_source(status, this.generation, safe_url(spec.url),
                                                                 revision, revision, now(), message), message,
                    stops_readers=False)
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
    try:
        creds = await _credentials(ctx, kind, this, spec.secret_ref, spec.cert_secret_ref,
                                   spec.verify.secret[1] if spec.verify else "")
        found = await artifacts.resolve(ctx.services.repos, spec, creds)
    except HelmopError as exc:
        return await _failed(ctx, kind, body, status, exc)
    try:
        status = settle.signed(status, this.generation, await _verified(ctx, this, spec, found, creds))
    except SourceError as exc:  # not published: the readers keep the revision they have
        return await _failed(ctx, kind, body, settle.unverified(status, this.generation, exc.reason, str(exc)), exc)
    try:
        chart, _ = await artifacts.chart(ctx.services.repos, spec.url, found.digest, creds, spec.insecure)
    except HelmopError as exc:
        return await _failed(ctx, kind, body, status, exc)
    message = f"stored artifact for digest '{found.revision}' (chart {chart.name} {chart.version})"
    await published(ctx, kind, body, status, settle.chart_source(status, this.generation, safe_url(spec.url),
                                                                 found.revision, found.digest, now(), message),
                    message)
    return DONE


async def _verified(ctx: Context, this: Resource, spec: OCIRepositorySpec, found: artifacts.Artifact,
                    creds: Credentials) -> str | None:
    """spec.verify's verdict on the artifact's manifest (None: nothing asked, or ignored by the trust policy)."""
    if spec.verify is None:
        return None
    field, name = spec.verify.secret
    entries = await secret_entries(ctx.services.kube, this.namespace, name, f"spec.verify.{field}")
    return await registry.verify(ctx.services.repos, spec.url, creds, spec.insecure, found.manifest, spec.verify,
                                 entries, f"Secret {this.namespace}/{name}")


async def _credentials(ctx: Context, kind: Kind, this: Resource, secret_ref: str, cert_secret_ref: str,
                       verify_secret_ref: str = "") -> Credentials:
    """The source's credentials; a change of any Secret it reads wakes it, and the credentials' strings are masked
    in what an unexpected error reports."""
    key = (kind.key, this.namespace, this.name)
    ctx.memory.refer(key, [(this.namespace, "Secret", name) for name in (secret_ref, cert_secret_ref, verify_secret_ref)
                           if name])
    creds = await credentials(ctx.services.kube, this.namespace, secret_ref, "spec", cert_secret_ref)
    ctx.memory.secrets[key] = creds.secrets()
    return creds


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
