"""One reconcile of an OCIRepository: an OCI artifact of config that ConfigSyncs apply (or a chart). Its reference is
resolved to a manifest and the layer it selects (a chart, or a tree of files), verified when asked; a new revision
or digest wakes its readers."""

from __future__ import annotations

import asyncio

from helmop.api.objects import Resource
from helmop.api.redaction import safe_url
from helmop.api.repositories import HELM_CHART_MEDIA_TYPE, OCIRepositorySpec
from helmop.api.status import now
from helmop.api.status.sources import LayerSelector, OCIRepositoryStatus
from helmop.decisions.settle import sources as settle
from helmop.sources import artifacts, tarballs
from helmop.sources.errors import SourceError
from helmop.sources.repositories import Credentials
from helmop.sources.secrets import secret_entries
from helmop.sources.verification import registry

from .context import Context
from .outcome import DONE, Outcome
from .turn import Turn


async def reconcile(turn: Turn[OCIRepositorySpec, OCIRepositoryStatus]) -> Outcome:
    ctx, spec = turn.ctx, turn.spec
    creds = await turn.credentials(spec.secret_ref, spec.cert_secret_ref,
                                   spec.verify.secret[1] if spec.verify else "", spec.proxy_secret_ref)
    found = await artifacts.resolve(ctx.services.repos, spec, creds)
    try:
        turn.status = settle.signed(turn.status, turn.generation, await _verified(ctx, turn.this, spec, found, creds))
    except SourceError as exc:  # not published: the readers keep the revision they have
        turn.status = settle.unverified(turn.status, turn.generation, exc.reason, str(exc))
        raise
    digest, what = await _content(ctx, spec, turn.status, found, creds)
    message = f"stored artifact for digest '{found.revision}'{what}"
    after = settle.oci_source(turn.status, turn.generation, safe_url(spec.url), found.revision, digest,
                              dict(found.annotations), now(), message, observed_ignore=spec.ignore,
                              observed_layer_selector=LayerSelector(spec.media_type, spec.operation))
    await turn.publish(after, message)
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
