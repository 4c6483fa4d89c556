"""How an app's status changes: its HelmRelease's, mirrored, with what the app adds."""

from __future__ import annotations

from typing import Any

from helmop.api.status import READY
from helmop.api.status.app import AppStatus
from helmop.api.status.helmrelease import HelmReleaseStatus


def mirrored(status: AppStatus, generation: int, name: str, hr: dict[str, Any], hr_status: HelmReleaseStatus,
             extra: dict[str, str]) -> AppStatus:
    """The HelmRelease ``hr`` (as read; {} when it is not there) mirrored onto the app named ``name``:
    its conditions (for the app's generation), release, revision and chart; its handled reconcile request
    is the app's. ``extra``: the app's own fields (a Jenkins's url and adminSecret)."""
    out = status.but(conditions=())
    for c in hr_status.conditions:
        out = out.with_condition(c.type, c.true, c.reason, c.message, generation, c.last_transition_time)
    current = hr_status.observed_generation == (hr.get("metadata") or {}).get("generation")
    if not current or out.condition(READY) is None:
        out = out.with_condition(READY, False, "Progressing", "waiting for the HelmRelease to be reconciled",
                                 generation)
    if hr_status.last_handled_reconcile_at:
        out = out.but(last_handled_reconcile_at=hr_status.last_handled_reconcile_at)
    revision = hr_status.history[0].revision if hr_status.history else 0
    return out.but(observed_generation=generation, helm_release=str((hr.get("metadata") or {}).get("name", "")),
                   release_name=name, revision=revision, chart_version=hr_status.last_applied_revision,
                   url=extra.get("url", ""), admin_secret=extra.get("adminSecret", ""))
