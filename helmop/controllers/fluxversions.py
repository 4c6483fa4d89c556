"""Flux objects written in a version Flux has removed (served with ``--flux-api``, unless ``=current``): each field
only a removed version had is read as the version Flux serves (:mod:`helmop.api.flux.upgrade`) where the object's
managedFields say it was written in such a version, with a Warning Event naming the replacement, once per
generation. A field of the served version, or one written as it, is read as it is (a field of a removed version
there is refused by the adapter, as ever). An object of a removed version with none of its old fields gets no
Event: its managedFields cannot tell whether it is still written so (an old manager's entry stays for as long as
it owns anything), and kubectl's deprecation Warning tells whoever writes it."""

from __future__ import annotations

from typing import Any

from helmop.api.flux import upgrade
from helmop.api.flux.paths import dotted
from helmop.api.flux.versions import flux_kind
from helmop.api.kinds import Kind

from .context import Context

# In memory only (never written back): the fields of removed versions written in one, as the object's
# managedFields say ("<field>=<apiVersion> ..."), which are not kept with the object (objects.slim).
WRITTEN_AS = "helmop.dev/flux-written-as"


def noted(kind: Kind, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` (as watched, managedFields included) with the fields written in a removed version noted under
    :data:`WRITTEN_AS`; an annotation of that name the object carries itself is not kept."""
    written = upgrade.written_as(body) if kind.flux else {}
    meta = body.get("metadata") or {}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != WRITTEN_AS}
    if written:
        annotations[WRITTEN_AS] = " ".join(f"{field}={api_version}" for field, api_version in written.items())
    elif WRITTEN_AS not in (meta.get("annotations") or {}):
        return body
    return {**body, "metadata": {**meta, "annotations": annotations}}


async def read(ctx: Context, kind: Kind, body: dict[str, Any], warn: bool = True) -> dict[str, Any]:
    """``body`` with its spec read as the served version's; the Warning posted (``warn``) at the first turn of a
    generation. SpecError ``InvalidSpec`` for a field of a removed version that is not of its shape."""
    known = flux_kind(kind.api_version, kind.kind)
    spec = body.get("spec")
    if not ctx.settings.flux.removed_versions or known is None or not isinstance(spec, dict):
        return body
    removed = {f"{known.group}/{version}" for version, _ in known.removed}
    meta = body.get("metadata") or {}
    pairs = (pair.partition("=") for pair in str((meta.get("annotations") or {}).get(WRITTEN_AS, "")).split())
    written = {field: api_version for field, _, api_version in pairs if api_version in removed}
    if not written:
        return body
    upgraded, said = upgrade.upgrade(kind.kind, spec, lambda path: dotted(path) in written)
    if said and warn and (body.get("status") or {}).get("observedGeneration") != meta.get("generation"):
        await ctx.services.events.post(body, "Warning", "RemovedAPIVersion",
                                       upgrade.notes(known, sorted(set(written.values())), said))
    return {**body, "spec": upgraded} if said else body
