"""One reconcile of an ArtifactGenerator (Flux's source-watcher): its sources' files read, each artifact composed
(:mod:`helmop.sources.generator`) and published as an ExternalArtifact of its namespace, the ones it no longer
makes deleted. An artifact's revision changes only when its content does (``latest@<digest>``, or a source's
revision with ``revision: @alias``): a source change elsewhere leaves it, and its readers, alone."""

from __future__ import annotations

import asyncio

from helmop.api import conditions as cond
from helmop.api.generators import DISABLED, ArtifactGeneratorSpec
from helmop.api.kinds import Family
from helmop.api.objects import ObjectKey, Resource
from helmop.api.status import Condition, now, to_json
from helmop.api.status.sources import Artifact, ArtifactGeneratorStatus, ExternalArtifactStatus, GeneratedArtifact
from helmop.decisions.settle import outcome
from helmop.infra.kube import KubeError
from helmop.sources import generator, tarballs
from helmop.sources.errors import SourceError
from helmop.sources.readers import generated_path, generator_trees

from .context import Context
from .outcome import DONE, FAILED, Outcome
from .turn import Turn

GENERATOR_LABEL = "source.extensions.fluxcd.io/generator"  # Flux's: the generator's uid, on what it made
MANAGER = "helmop"


def disabled(turn: Turn[ArtifactGeneratorSpec, ArtifactGeneratorStatus]) -> bool:
    """Flux's way to stop a generator: the annotation ``source.extensions.fluxcd.io/reconcile: disabled``."""
    return turn.this.annotation(DISABLED).lower() == "disabled"


async def reconcile(turn: Turn[ArtifactGeneratorSpec, ArtifactGeneratorStatus]) -> Outcome:
    ctx, spec, family, this = turn.ctx, turn.spec, turn.family, turn.this
    turn.refer([ObjectKey(_key(family, s.kind), s.namespace or this.namespace, s.name) for s in spec.sources])
    try:
        trees, sources_digest = await generator_trees(ctx.services, family, this.namespace, spec)
    except SourceError as exc:
        if exc.reason == "CrossNamespaceRef":  # met on the way (a source's own reference): refused as the spec's
            await turn.report(False, "AccessDenied", str(exc), stalled=True)
            return DONE
        await turn.report(False, "SourceFetchFailed", f"get sources failed: {exc}")
        return FAILED
    inventory = await _publish(ctx, family, this, spec, trees)
    await _collect(ctx, family, this, {entry.name for entry in inventory})
    done = turn.status.but(inventory=tuple(inventory), observed_sources_digest=sources_digest)
    await turn.write(outcome(done, this.generation, True, "Succeeded",
                             f"reconciliation succeeded, generated {len(inventory)} artifact(s)"))
    return DONE


def _key(family: Family, kind: str) -> str:
    found = family.source(kind)
    return found.key if found else kind


async def _publish(ctx: Context, family: Family, this: Resource, spec: ArtifactGeneratorSpec,
                   trees: dict[str, dict[str, bytes]]) -> list[GeneratedArtifact]:
    """Each planned artifact composed, kept in this replica's cache, published as an ExternalArtifact (its
    readers woken when its digest changed)."""
    inventory = []
    for planned in generator.plan(spec, trees):
        tree = generator.compose(planned.template, trees)
        data = await asyncio.to_thread(tarballs.pack, tree.files, tree.executable)
        digest = tarballs.digest(data)
        name = planned.template.name
        async def made(data: bytes = data) -> bytes:
            return data

        await ctx.services.repos.cached(generated_path(ctx.services.repos, this.namespace, name, digest), made,
                                        f"artifact {name}", check=tarballs.unpack)
        revision = f"latest@{digest}"
        metadata: dict[str, str] = {}
        if planned.template.revision:
            revision = await _revision_of(ctx, family, this, spec, planned.template.revision)
        if planned.template.origin_revision:
            metadata["org.opencontainers.image.revision"] = await _revision_of(
                ctx, family, this, spec, planned.template.origin_revision, origin=True)
        labels = {**dict(spec.labels), **dict(planned.labels), GENERATOR_LABEL: this.uid,
                  "app.kubernetes.io/managed-by": MANAGER}
        changed = await _external_artifact(ctx, family, this, name, labels, dict(spec.annotations), Artifact(
            revision=revision, digest=digest, size=len(data), last_update_time=now(), metadata=metadata,
            path=f"externalartifact/{this.namespace}/{name}/{digest[7:19]}.tar.gz"))
        if changed:
            ctx.memory.wake_referrers(ObjectKey(family.externalartifact.key, this.namespace, name))
            await ctx.services.events.normal(this.body, "ArtifactPublished",
                                             f"external artifact {this.namespace}/{name} ({digest}) published")
        inventory.append(GeneratedArtifact(name, this.namespace, digest, f"{digest[7:19]}.tar.gz"))
    return inventory


async def _revision_of(ctx: Context, family: Family, this: Resource, spec: ArtifactGeneratorSpec, alias: str, *,
                       origin: bool = False) -> str:
    """A source's revision (``origin``: its artifact's origin revision annotation, else its revision)."""
    source = spec.source(alias)
    kind = family.source(source.kind)
    obj = await ctx.services.kube.get(kind.path(source.namespace or this.namespace, source.name)) if kind else None
    artifact = ((obj or {}).get("status") or {}).get("artifact") or {}
    if origin and (artifact.get("metadata") or {}).get("org.opencontainers.image.revision"):
        return str(artifact["metadata"]["org.opencontainers.image.revision"])
    return str(artifact.get("revision") or "")


async def _external_artifact(ctx: Context, family: Family, this: Resource, name: str, labels: dict[str, str],
                             annotations: dict[str, str], artifact: Artifact) -> bool:
    """The ExternalArtifact ``name`` applied (owned by this generator) and its status written; whether its digest
    changed."""
    kind, kube = family.externalartifact, ctx.services.kube
    path = kind.path(this.namespace, name)
    before = await kube.get(path)
    owner = ((before or {}).get("metadata") or {}).get("labels", {}).get(GENERATOR_LABEL)
    if before is not None and owner != this.uid:
        raise SourceError("ReconciliationFailed", f"ExternalArtifact {this.namespace}/{name} exists and was not made "
                                                  "by this generator; refused, nothing overwritten", transient=False)
    await kube.apply(path, {"apiVersion": kind.api_version, "kind": kind.kind,
                            "metadata": {"name": name, "namespace": this.namespace, "labels": labels,
                                         "annotations": annotations},
                            "spec": {"sourceRef": {"apiVersion": family.artifactgenerator.api_version,
                                                   "kind": family.artifactgenerator.kind, "name": this.name,
                                                   "namespace": this.namespace}}}, MANAGER)
    published = ((before or {}).get("status") or {}).get("artifact") or {}
    if (published.get("digest"), published.get("revision")) == (artifact.digest, artifact.revision):
        return False
    ready = Condition(type=cond.READY, status="True", reason="Succeeded", message="Artifact is ready",
                      last_transition_time=artifact.last_update_time)
    status = to_json(ExternalArtifactStatus(artifact=artifact, conditions=(ready,)))
    await kube.merge_patch(f"{path}/status", {"status": status})
    return True


async def _collect(ctx: Context, family: Family, this: Resource, kept: set[str]) -> None:
    """Delete the ExternalArtifacts this generator made and no longer makes."""
    kind = family.externalartifact
    for obj in await ctx.services.kube.list(kind.path(this.namespace), f"{GENERATOR_LABEL}={this.uid}"):
        name = str((obj.get("metadata") or {}).get("name") or "")
        if name and name not in kept:
            try:
                await ctx.services.kube.request("DELETE", kind.path(this.namespace, name))
            except KubeError as exc:
                if exc.status != 404:
                    raise


async def finalize(turn: Turn[ArtifactGeneratorSpec | None, ArtifactGeneratorStatus]) -> Outcome:
    """What the generator made goes with it (whatever its spec says now: what it made is found by its uid)."""
    await _collect(turn.ctx, turn.family, turn.this, set())
    return DONE
