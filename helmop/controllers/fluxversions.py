"""Flux objects written in a version Flux has removed (served with ``--flux-api``, unless ``=current``): read as
the version Flux serves (:mod:`helmop.api.flux.upgrade`), with a Warning Event naming the replacement, once per
generation. The version written decides what a field means: an object written only in the current version is
read as it is (a field of a removed version there is refused by the adapter, as ever)."""

from __future__ import annotations

from typing import Any

from helmop.api.flux import upgrade
from helmop.api.flux.versions import flux_kind
from helmop.api.kinds import Kind

from .context import Context

# In memory only (never written back): the removed versions an object's managedFields name, which are not kept
# with the object (objects.slim).
WRITTEN_AS = "helmop.dev/flux-written-as"


def noted(kind: Kind, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` (as watched, managedFields included) with the removed versions it was written in noted under
    :data:`WRITTEN_AS`; an annotation of that name the object carries itself is not kept."""
    written = upgrade.written_as(body) if kind.flux else []
    meta = body.get("metadata") or {}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != WRITTEN_AS}
    if written:
        annotations[WRITTEN_AS] = " ".join(written)
    elif WRITTEN_AS not in (meta.get("annotations") or {}):
        return body
    return {**body, "metadata": {**meta, "annotations": annotations}}


async def read(ctx: Context, kind: Kind, body: dict[str, Any], warn: bool = True) -> dict[str, Any]:
    """``body`` with its spec read as the served version's; the Warning posted (``warn``) at the first turn of a
    generation. SpecError ``InvalidSpec`` for a field of a removed version that is not of its shape."""
    known = flux_kind(kind.api_version, kind.kind)
    spec = body.get("spec")
    if not ctx.tunables.flux_removed_versions or known is None or not isinstance(spec, dict):
        return body
    removed = {f"{known.group}/{version}" for version, _ in known.removed}
    meta = body.get("metadata") or {}
    written = [v for v in str((meta.get("annotations") or {}).get(WRITTEN_AS, "")).split() if v in removed]
    if not written:
        return body
    upgraded, said = upgrade.upgrade(kind.kind, spec)
    if warn and (body.get("status") or {}).get("observedGeneration") != meta.get("generation"):
        await ctx.services.events.post(body, "Warning", "RemovedAPIVersion", upgrade.notes(known, written, said))
    return {**body, "spec": upgraded} if said else body
