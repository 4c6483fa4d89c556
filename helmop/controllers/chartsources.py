"""One reconcile of a HelmRepository or an OCIRepository: the chart source many HelmReleases share, or an OCI
artifact of config that ConfigSyncs apply.

A HelmRepository's index is fetched here once per interval (conditionally: an unchanged index costs a 304)
into the cache its releases resolve from; an OCIRepository's reference is resolved to a manifest and the layer
it selects (a chart, or a tree of files). When the revision or the digest changes, its readers are woken.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from helmop.api.errors import HelmopError, SpecError
from helmop.api.kinds import Kind
from helmop.api.objects import Resource
from helmop.api.redaction import safe_url
from helmop.api.repositories import (
    HELM_CHART_MEDIA_TYPE,
    OCIRepositorySpec,
    parse_helm_repository,
    parse_oci_repository,
)
from helmop.api.status import Status, now
from helmop.api.status.sources import HelmRepositoryStatus, LayerSelector, OCIRepositoryStatus
from helmop.decisions.settle import outcome
from helmop.decisions.settle import sources as settle
from helmop.sources import artifacts, tarballs
from helmop.sources.credentials import credentials
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
        # a new or changed HelmRepository reads the index afresh, as Flux's does, not one another object of the
        # same URL fetched earlier
        fresh = time.time() if status.observed_generation != this.generation else 0.0
        revision, charts = await ctx.services.repos.index_revision(spec.url, creds, max_age=spec.interval,
                                                                   asked_at=pending_request(body) or fresh)
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
                                   spec.verify.secret[1] if spec.verify else "", spec.proxy_secret_ref)
        found = await artifacts.resolve(ctx.services.repos, spec, creds)
    except HelmopError as exc:
        return await _failed(ctx, kind, body, status, exc)
    try:
        status = settle.signed(status, this.generation, await _verified(ctx, this, spec, found, creds))
    except SourceError as exc:  # not published: the readers keep the revision they have
        return await _failed(ctx, kind, body, settle.unverified(status, this.generation, exc.reason, str(exc)), exc)
    try:
        digest, what = await _content(ctx, spec, status, found, creds)
    except HelmopError as exc:
        return await _failed(ctx, kind, body, status, exc)
    message = f"stored artifact for digest '{found.revision}'{what}"
    after = settle.oci_source(status, this.generation, safe_url(spec.url), found.revision, digest,
                              dict(found.annotations), now(), message, observed_ignore=spec.ignore,
                              observed_layer_selector=LayerSelector(spec.media_type, spec.operation))
    await published(ctx, kind, body, status, after, message)
    return DONE


async def _content(ctx: Context, spec: OCIRepositorySpec, status: OCIRepositoryStatus, found: artifacts.Artifact,
                   creds: Credentials) -> tuple[str, str]:
    """The artifact's digest (the layer's when copied; the extracted files' archive's, ignore rules applied,
    as Flux stores it), taken again only when the revision or how the layer is read changed; and what a chart
    layer holds, for the message."""
    repos = ctx.services.repos
    if found.layer_type == HELM_CHART_MEDIA_TYPE:
        chart, _ = await artifacts.chart(repos, spec.url, found.digest, creds, spec.insecure)
        what = f" (chart {chart.name} {chart.version})"
    else:
        what = ""
    if spec.operation == "copy":
        return found.digest, what
    published = status.artifact
    if published is not None and published.revision == found.revision and published.digest and (
            status.observed_ignore, status.observed_layer_selector) == (
            spec.ignore, LayerSelector(spec.media_type, spec.operation)):
        return published.digest, what
    tree = await artifacts.config(repos, spec, found.digest, creds)
    return tarballs.digest(await asyncio.to_thread(tarballs.pack, tree.files, tree.executable)), what


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
                       verify_secret_ref: str = "", proxy_secret_ref: str = "") -> Credentials:
    """The source's credentials; a change of any Secret it reads wakes it, and the credentials' strings are masked
    in what an unexpected error reports."""
    key = (kind.key, this.namespace, this.name)
    ctx.memory.refer(key, [(this.namespace, "Secret", name) for name in (secret_ref, cert_secret_ref, verify_secret_ref,
                                                                          proxy_secret_ref) if name])
    creds = await credentials(ctx.services.kube, this.namespace, secret_ref, "spec", cert_secret_ref,
                              proxy_secret_ref)
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
