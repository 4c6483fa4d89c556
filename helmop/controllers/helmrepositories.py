"""One reconcile of a HelmRepository: the chart source many HelmReleases share. Its index is fetched here once per
interval (conditionally: an unchanged index costs a 304) into the cache its releases resolve from; a new revision
is a look for its readers (it seldom changes a given release's chart)."""

from __future__ import annotations

import time

from helmop.api.redaction import safe_url
from helmop.api.repositories import HelmRepositorySpec
from helmop.api.status import now
from helmop.api.status.sources import HelmRepositoryStatus
from helmop.decisions.settle import outcome
from helmop.decisions.settle import sources as settle

from .outcome import DONE, Outcome
from .status import pending_request
from .turn import Turn


async def reconcile(turn: Turn[HelmRepositorySpec, HelmRepositoryStatus]) -> Outcome:
    spec, status = turn.spec, turn.status
    if spec.oci:  # a registry has no index: each release lists its chart's tags (once per interval)
        await turn.write(outcome(status.but(url=safe_url(spec.url)), turn.generation, True, "Succeeded",
                                 "Helm repository is ready (OCI registry)"))
        return DONE
    creds = await turn.credentials(spec.secret_ref, spec.cert_secret_ref)
    # a new or changed HelmRepository reads the index afresh, as Flux's does, not one another object of the same
    # URL fetched earlier
    fresh = time.time() if status.observed_generation != turn.generation else 0.0
    revision, charts = await turn.ctx.services.repos.index_revision(spec.url, creds, max_age=spec.interval,
                                                                    asked_at=pending_request(turn.body) or fresh)
    message = f"stored artifact: revision '{revision}' ({charts} charts)"
    await turn.publish(settle.chart_source(status, turn.generation, safe_url(spec.url), revision, revision, now(),
                                           message), message, stops_readers=False)
    return DONE
