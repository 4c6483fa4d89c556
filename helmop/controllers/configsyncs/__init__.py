"""One reconcile of a ConfigSync, shaped as a HelmRelease's: its spec and dependencies checked, its source's
artifact read and built (:mod:`helmop.sources.build`: the manifests, or what kustomize builds of them, with
postBuild variables read once from the cluster), a pure plan of what that means (:mod:`helmop.decisions.sync`
and :mod:`helmop.decisions.syncplan`: the objects as applied, what is refused, what to prune, and for each
apply stage, once its objects are observed and dry-run (``dryrun``), a typed action per object), then the acts,
one file each (``apply``, ``prune``, ``health``), and every status, message and Event it says
(:mod:`helmop.decisions.settle.configsync`: a Report written as it is).
The clean-up its deletionPolicy asks for is :func:`finalize`.

Manifests are applied with server-side apply under a field manager of their own, in Flux's stages, each
stage dry-run in full before any of it is applied (:mod:`.apply`), each object marked as this ConfigSync's (a
label, and an annotation with its uid). A broken file stops the whole sync before anything is applied or
pruned; so does an object the API server refuses, for its stage and those after it.

Tenants: without a ServiceAccount to act as (spec.serviceAccountName, or the operator's
--default-service-account), a ConfigSync writes only namespaced objects into its own namespace; with
one, every request is made as that ServiceAccount and its RBAC decides. Either way it never takes
over an object it did not create (unless the object says ``helmop.dev/adopt: "true"``), and it
prunes or deletes only objects that carry its own uid. A Flux Kustomization keeps Flux's ways: it applies over
what it finds, labels its objects as Flux does, and prunes what Flux applied before it (in Flux's inventory,
with Flux's labels), so a cluster moves over, and back, without an object re-created.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from typing import Any

from helmop.api.changecontrol import parse_change_control
from helmop.api.errors import HelmopError
from helmop.api.manifests import Manifest
from helmop.api.objects import ObjectKey
from helmop.api.sources import ConfigSyncSpec
from helmop.api.status.configsync import ConfigSyncStatus
from helmop.api.substitution import SubstitutionError
from helmop.decisions import changecontrol as rules
from helmop.decisions import sync, syncplan
from helmop.decisions.settle import configsync as settle
from helmop.helm.inputs import InputError
from helmop.infra.kube import Kube
from helmop.sources.build import Builder
from helmop.sources.errors import SourceError
from helmop.sources.readers import Referrer, source_artifact
from helmop.sources.trees import Artifact

from .. import changecontrol, clusters, dependencies
from ..clusters import Cluster
from ..context import Context
from ..decryption import decryption_keys
from ..outcome import DONE, FAILED, Outcome, after
from ..readiness import Cancelled
from ..turn import Turn
from . import apply, health, observe, prune

log = logging.getLogger(__name__)


_Turn = Turn[ConfigSyncSpec, ConfigSyncStatus]


def _marks(turn: _Turn) -> sync.Marks:
    this = turn.this
    return sync.Marks(sync.owner_label(this.namespace, this.name), this.uid,
                      turn.kind.origin_labels(this.namespace, this.name))


def _before(turn: _Turn) -> settle.Before:
    """What an outcome is settled from (every message masked of the Secret values the turn read)."""
    return settle.Before(turn.status, turn.generation, tuple(turn.ctx.memory.secrets.get(turn.key, [])))


async def _write(turn: _Turn, report: settle.Report) -> None:
    """The one place what is settled is written (and said)."""
    await turn.write(report.status, outcome=report.outcome)
    if report.event is not None:
        await turn.events.post(report.event.type, report.event.reason, report.event.message)


def _client(ctx: Context, namespace: str, spec: ConfigSyncSpec, cluster: Cluster) -> tuple[Kube, bool]:
    """The client that writes this ConfigSync's objects, and whether an identity other than the operator's
    decides what it may do (a ServiceAccount it acts as, or a remote kubeconfig's)."""
    actor = cluster.acting_as(ctx.tenancy, namespace, spec.service_account_name)
    return cluster.kube.acting_as(actor), bool(actor) or cluster.remote


async def reconcile(turn: _Turn) -> Outcome:
    """A ConfigSync, or a Flux Kustomization (``family`` FLUX): the same code; Flux's keeps Flux's tenancy (without
    a ServiceAccount it acts with the operator's rights, unconfined) and adopts objects no one manages."""
    spec = turn.spec
    waiting = await _dependencies(turn, spec)
    if waiting is not None:
        return waiting
    return await _fetched(turn, spec)


def _read(turn: _Turn, spec: ConfigSyncSpec) -> list[ObjectKey]:
    """What the turn reads: a change to any of it wakes this ConfigSync."""
    namespace = turn.namespace
    source = turn.family.source(spec.source_kind) or turn.family.gitrepository
    return [ObjectKey(source.key, spec.source_namespace or namespace, spec.source_name),
            *(ObjectKey(ref.kind, namespace, ref.name) for ref in spec.post_build.substitute_from),
            *turn.secrets_named(spec.decryption.secret_ref if spec.decryption else ""),
            *([ObjectKey(spec.kube_config.source[0], namespace, spec.kube_config.source[1])]
              if spec.kube_config else [])]


async def _dependencies(turn: _Turn, spec: ConfigSyncSpec) -> Outcome | None:
    """What the turn reads is remembered; the outcome when it must wait for a dependency (woken when a
    dependency's status changes), None when it may go on."""
    ctx, this = turn.ctx, turn.this
    ctx.memory.refer(turn.key, _read(turn, spec))
    try:
        waiting = await dependencies.waiting_for(ctx, turn.kind, turn.body, spec.depends_on,
                                                 dependencies.reader(ctx, this.namespace, spec.service_account_name,
                                                                     spec.kube_config is not None))
    except HelmopError as exc:
        await _write(turn, settle.failed(_before(turn), exc.reason, str(exc), stalled=not exc.transient))
        return FAILED if exc.transient else DONE
    if not waiting:
        return None
    await _write(turn, settle.waiting(_before(turn), waiting))
    return after(ctx.settings.intervals.dependency_recheck)


async def _fetched(turn: _Turn, spec: ConfigSyncSpec) -> Outcome:
    """Its cluster found and its source's artifact built, the sync of what that made."""
    try:
        cluster = await clusters.target(turn.ctx, turn.key, spec.kube_config)
    except HelmopError as exc:
        if isinstance(exc, clusters.ClusterUnreachable):
            turn.status = turn.status.but(cluster=exc.cluster)
        return await _ended(turn, spec, settle.failed(_before(turn), exc.reason, str(exc), stalled=not exc.transient))
    turn.status = turn.status.but(cluster=cluster.name)
    try:
        artifact = await source_artifact(turn.ctx.services, turn.family, spec.source_kind,
                                         spec.source_namespace or turn.this.namespace, spec.source_name,
                                         Referrer(turn.this.namespace, "spec.sourceRef"))
    except (InputError, SourceError) as exc:
        return await _ended(turn, spec, settle.failed(_before(turn), exc.reason, str(exc), stalled=not exc.transient))
    revision = artifact.revision
    held = await _held(turn, revision)
    if held is not None:
        return held
    turn.status = settle.attempted(turn.status, revision)
    attempting = settle.attempting(turn.status, turn.this.generation, revision)
    if attempting is not None:
        await _write(turn, attempting)
    try:
        found = await _built(turn, spec, artifact)
    except SubstitutionError as exc:
        return await _ended(turn, spec, settle.unbuilt(_before(turn), revision, "SubstitutionFailed", str(exc),
                                                       stalled=True))
    except (InputError, SourceError) as exc:
        return await _ended(turn, spec, settle.unbuilt(_before(turn), revision, exc.reason, str(exc),
                                                       stalled=not exc.transient))
    return await _sync(turn, spec, revision, found, cluster)


async def _held(turn: _Turn, revision: str) -> Outcome | None:
    """People's requests acted on, and the outcome when a pin, an approval or a deployment window holds the source's
    ``revision`` back (None: it syncs)."""
    ctx, this = turn.ctx, turn.this
    control = parse_change_control(this.spec, this.metadata.get("annotations") or {}, flux=turn.kind.flux)
    turn.status, asks = await changecontrol.settled(ctx, turn.kind, turn.body, turn.status, revision)
    gates = await changecontrol.settings(ctx, this.namespace, control)
    report = settle.held(_before(turn), rules.control(turn.status, asks, revision, gates), revision)
    if report is None:
        turn.status = turn.status.but(pending_revision="")
        return None
    await _write(turn, report)
    opens_in = gates.opens_in if report.status.pending_revision and not report.status.pin else 0.0
    return after(min(opens_in, turn.spec.interval)) if opens_in else DONE


async def _built(turn: _Turn, spec: ConfigSyncSpec, artifact: Artifact) -> list[Manifest]:
    """What the build of ``artifact`` makes, with spec.postBuild's variables and spec.decryption's keys; the
    Secret values it read or decrypted are remembered (masked in every message)."""
    ctx, namespace = turn.ctx, turn.this.namespace
    variables, ctx.memory.secrets[turn.key] = await observe.variables(ctx, namespace, spec)
    keys = await decryption_keys(ctx, namespace, spec.decryption)
    built = await Builder(ctx.services.kustomize, ctx.services.yaml, namespace).build(
        artifact, spec, variables, strict=ctx.settings.sources.strict_substitution, keys=keys)
    ctx.memory.secrets[turn.key] += built.plaintexts
    return built.objects


async def _ended(turn: _Turn, spec: ConfigSyncSpec, report: settle.Report) -> Outcome:
    """A failure written: the turn ends (stalled: until the spec or what it reads changes) or is retried."""
    await _write(turn, report)
    return DONE if report.stalled else _retry(spec)


async def _sync(turn: _Turn, spec: ConfigSyncSpec, revision: str, found: list[Manifest], cluster: Cluster) -> Outcome:
    """Plan from what the cluster holds, apply what the build made, prune what left it, then wait for health when
    asked."""
    this, marks = turn.this, _marks(turn)
    kube, impersonating = _client(turn.ctx, this.namespace, spec, cluster)
    want = sync.desired(found, await observe.scopes(kube, found), spec.target_namespace or this.namespace, marks)
    # Without a ServiceAccount, a tenant's ConfigSync keeps to its namespace; a Flux Kustomization as Flux does.
    confined = None if impersonating or turn.family.flux else sync.confinement(
        want.origins, this.namespace, set(want.cluster_scoped))
    live = {} if confined else await observe.objects(kube, list(want.objects))
    plan = syncplan.planned(want, live, marks, turn.status.inventory, confined=confined, adopt=turn.family.flux,
                            prune=spec.prune)
    if plan.refusal:
        return await _ended(turn, spec, settle.refused(_before(turn), revision, plan.refusal))
    started = time.monotonic()
    applied, pruned, failures = await _acted(turn, spec, kube, want, live, plan, started)
    if failures:
        return await _ended(turn, spec, settle.apply_failed(_before(turn), revision, failures, applied.held))
    applied_objects = {oid: obj for oid, obj in want.objects.items() if oid not in applied.skipped}
    return await _settled(turn, spec, cluster, revision, replace(want, objects=applied_objects), pruned, started)


async def _acted(turn: _Turn, spec: ConfigSyncSpec, kube: Kube, want: sync.Wanted,
                 live: dict[sync.ObjectId, dict[str, Any] | None], plan: syncplan.Plan,
                 started: float) -> tuple[apply.Applied, list[sync.ObjectId], list[str]]:
    """``want`` applied and, when all of it was, ``plan``'s prune list pruned; the inventory after settled. What
    was applied, what was pruned, and every failure."""
    # From the first object applied until the inventory holds it, a suspension or a deletion does not cut the turn
    # short (Dispatcher._interrupt_on_halt): what was applied would be known to no inventory, and left behind.
    turn.ctx.memory.committed.add(turn.key)
    try:
        applied = await apply.apply_all(kube, want, live, syncplan.Rules(spec.force, spec.ignore),
                                        deadline=started + spec.deadline)
        failures = [*want.duplicates, *applied.failures]
        pruned: list[sync.ObjectId] = []
        if plan.prune and not failures:
            pruned, failures = await prune.prune(kube, list(plan.prune), _marks(turn),
                                                 {sync.id_of(x): x.uid for x in turn.status.inventory})
        inventory = sync.inventory_after(want, turn.status.inventory, applied.uids,
                                         [oid for oid in plan.prune if oid not in pruned])
        turn.status = settle.inventoried(turn.status, inventory)
    finally:
        turn.ctx.memory.committed.discard(turn.key)
    return applied, pruned, failures


async def _settled(turn: _Turn, spec: ConfigSyncSpec, cluster: Cluster, revision: str, want: sync.Wanted,
                   pruned: list[sync.ObjectId], started: float) -> Outcome:
    """Everything applied and pruned: Ready once what must be healthy is."""
    try:
        reason, problem = await health.wait(turn.ctx, cluster, turn.key, spec, want, started)
    except (Cancelled, asyncio.CancelledError) as exc:
        # a newer generation (reconciled at once), or suspended or deleted meanwhile: what was applied is recorded
        # first, so that a later prune or the deletion's finds it
        await _write(turn, settle.unawaited(turn.status, turn.this.generation, revision))
        if isinstance(exc, asyncio.CancelledError):
            raise
        return after(0.01)
    if reason:
        return await _ended(turn, spec, settle.unhealthy(_before(turn), revision, reason, problem))
    await _write(turn, settle.synced(_before(turn), revision, len(want.objects), pruned))
    return DONE


def _retry(spec: ConfigSyncSpec) -> Outcome:
    """After a failure: spec.retryInterval when it is set, else the failure backoff."""
    return after(spec.retry_interval) if spec.retry_interval else FAILED


async def finalize(turn: _Turn) -> Outcome:
    """A deleted ConfigSync takes its objects with it as spec.deletionPolicy says (Flux's: MirrorPrune, the
    default, deletes them when it prunes; Delete; WaitForTermination, until they are gone or spec.timeout
    passed; Orphan leaves them). A suspended one leaves them, and one with no inventory has none: neither asks
    its cluster (Flux's rule), so a remote that never answers cannot hold it."""
    ctx, spec = turn.ctx, turn.spec
    if spec.suspend or not spec.prunes_on_deletion or not turn.status.inventory:
        return DONE
    try:
        cluster = await clusters.target(ctx, turn.key, spec.kube_config)
    except HelmopError as exc:
        return await _unreachable_on_deletion(turn, exc)
    return await _pruned_on_deletion(turn, spec, cluster)


async def _unreachable_on_deletion(turn: _Turn, exc: HelmopError) -> Outcome:
    """The remote cluster does not answer: tried again later; a remote that cannot be built (its kubeConfig gone,
    invalid or refused) lets the ConfigSync go with its objects left in place, said in an Event
    (:func:`clusters.retried_on_deletion`)."""
    if clusters.retried_on_deletion(exc):
        await turn.ctx.services.events.post(turn.body, "Warning", exc.reason, str(exc))
        return FAILED
    await turn.ctx.services.events.post(turn.body, "Warning", "PruneSkipped", "objects left on the remote cluster "
                                                                              f"(not deleted): {exc}")
    return DONE


async def _pruned_on_deletion(turn: _Turn, spec: ConfigSyncSpec, cluster: Cluster) -> Outcome:
    kube, _ = _client(turn.ctx, turn.this.namespace, spec, cluster)
    uids = {sync.id_of(x): x.uid for x in turn.status.inventory}
    order = list(reversed(sync.apply_order(list(uids))))
    _, problems = await prune.prune(kube, order, _marks(turn), uids)
    if problems:
        return FAILED
    if spec.deletion_policy == "WaitForTermination":
        return await _terminated(turn, spec, kube, order)
    return DONE


async def _terminated(turn: _Turn, spec: ConfigSyncSpec, kube: Kube, order: list[sync.ObjectId]) -> Outcome:
    """deletionPolicy WaitForTermination: until what it deleted is gone, or spec.timeout passed (an object left
    alone, not this sync's or prune: disabled, is not waited for)."""
    left = [oid for oid in order
            if ((await observe.live(kube, oid)) or {}).get("metadata", {}).get("deletionTimestamp")]
    this = turn.this
    since = this.deleted_at or time.time()
    if left and time.time() - since < spec.deadline:
        await turn.ctx.services.events.normal(turn.body, "WaitingForTermination", f"waiting for {len(left)} object(s) "
                                              f"to be gone (deletionPolicy WaitForTermination): "
                                              + ", ".join(map(str, left[:10])))
        return after(turn.ctx.settings.intervals.cleanup_wait)
    if left:
        log.error("ConfigSync %s/%s: %d object(s) still terminating after %.0fs (spec.timeout); letting it go: %s",
                  this.namespace, this.name, len(left), spec.deadline, ", ".join(map(str, left[:10])))
    return DONE
