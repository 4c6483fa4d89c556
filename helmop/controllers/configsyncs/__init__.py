"""One reconcile of a ConfigSync, shaped as a HelmRelease's: its spec and dependencies checked, its source's
artifact read and built (:mod:`helmop.sources.build`: the manifests, or what kustomize builds of them, with
postBuild variables read once from the cluster), a pure plan of what that means (:mod:`helmop.decisions.sync`:
the objects as applied, what is refused, the apply order, what to prune, the inventory after), then the acts,
one file each (``apply``, ``prune``, ``health``), and a typed status (:mod:`helmop.decisions.settle.configsync`).
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
from dataclasses import dataclass, replace
from typing import Any

from helmop.api.errors import HelmopError, SpecError
from helmop.api.kinds import Family, Kind
from helmop.api.manifests import Manifest
from helmop.api.objects import Resource
from helmop.api.redaction import redact
from helmop.api.sources import ConfigSyncSpec, parse_config_sync
from helmop.api.status import READY, Condition
from helmop.api.status.configsync import ConfigSyncStatus
from helmop.api.substitution import SubstitutionError
from helmop.decisions import ssa, sync
from helmop.decisions.health import check_expression, check_exprs
from helmop.decisions.settle import configsync as settle
from helmop.decisions.settle import progressing
from helmop.helm.inputs import InputError
from helmop.infra.kube import Kube
from helmop.sources.build import Builder
from helmop.sources.errors import SourceError
from helmop.sources.readers import Referrer, source_artifact

from .. import clusters, dependencies
from ..clusters import Cluster
from ..context import Context, Key
from ..outcome import DONE, FAILED, Outcome, after
from ..readiness import Cancelled
from ..status import read_status, report, write_status
from . import apply, health, observe, prune

log = logging.getLogger(__name__)


@dataclass
class _Turn:
    """One turn of one ConfigSync (or Flux Kustomization, ``family`` FLUX): its status as read once and then as
    written, and how outcomes are reported (every message masked of the Secret values the turn read)."""

    ctx: Context
    family: Family
    body: dict[str, Any]
    status: ConfigSyncStatus

    @property
    def kind(self) -> Kind:
        return self.family.configsync

    @property
    def this(self) -> Resource:
        return Resource(self.body)

    @property
    def key(self) -> Key:
        return self.kind.key, self.this.namespace, self.this.name

    def marks(self) -> sync.Marks:
        this = self.this
        return sync.Marks(sync.owner_label(this.namespace, this.name), this.uid,
                          self.kind.origin_labels(this.namespace, this.name))

    async def report(self, ready: bool, reason: str, message: str, *, stalled: bool = False,
                     event: bool = True) -> None:
        message = redact(message, self.ctx.memory.secrets.get(self.key, []))
        await report(self.ctx, self.kind, self.body, self.status, ready, reason, message, stalled=stalled,
                     event=event)


def _client(ctx: Context, namespace: str, spec: ConfigSyncSpec, cluster: Cluster) -> tuple[Kube, bool]:
    """The client that writes this ConfigSync's objects, and whether an identity other than the operator's
    decides what it may do (a ServiceAccount it acts as, or a remote kubeconfig's)."""
    actor = cluster.acting_as(ctx.tenancy, namespace, spec.service_account_name)
    return cluster.kube.acting_as(actor), bool(actor) or cluster.remote


async def reconcile(ctx: Context, family: Family, body: dict[str, Any]) -> Outcome:
    """A ConfigSync, or a Flux Kustomization (``family`` FLUX): the same code; Flux's keeps Flux's tenancy (without
    a ServiceAccount it acts with the operator's rights, unconfined) and adopts objects no one manages."""
    turn = _Turn(ctx, family, body, read_status(family.configsync, ConfigSyncStatus, body))
    spec = await _spec(turn)
    if spec is None or spec.suspend:
        return DONE
    waiting = await _dependencies(turn, spec)
    if waiting is not None:
        return waiting
    try:
        cluster = await clusters.target(ctx, turn.key, spec.kube_config)
    except HelmopError as exc:
        if isinstance(exc, clusters.ClusterUnreachable):
            turn.status = turn.status.but(cluster=exc.cluster)
        await turn.report(False, exc.reason, str(exc), stalled=not exc.transient)
        return _retry(spec) if exc.transient else DONE
    turn.status = turn.status.but(cluster=cluster.name)
    source_namespace = spec.source_namespace or turn.this.namespace
    try:
        artifact = await source_artifact(ctx.services, family, spec.source_kind, source_namespace, spec.source_name,
                                         Referrer(turn.this.namespace, "spec.sourceRef"))
    except (InputError, SourceError) as exc:
        await turn.report(False, exc.reason, str(exc), stalled=not exc.transient)
        return _retry(spec) if exc.transient else DONE
    await _attempting(turn, artifact.revision)
    try:
        variables, ctx.memory.secrets[turn.key] = await observe.variables(ctx, turn.this.namespace, spec)
        keys = await observe.decryption_keys(ctx, turn.this.namespace, spec)
        built = await Builder(ctx.services.kustomize, ctx.services.yaml, turn.this.namespace).build(
            artifact, spec, variables, strict=ctx.settings.sources.strict_substitution, keys=keys)
        ctx.memory.secrets[turn.key] += built.plaintexts
    except SubstitutionError as exc:
        await turn.report(False, "SubstitutionFailed", f"revision {artifact.revision}: {exc}", stalled=True)
        return DONE
    except (InputError, SourceError) as exc:
        await turn.report(False, exc.reason, f"revision {artifact.revision}: {exc}", stalled=not exc.transient)
        return _retry(spec) if exc.transient else DONE
    return await _sync(turn, spec, artifact.revision, built.objects, cluster)


async def _spec(turn: _Turn) -> ConfigSyncSpec | None:
    """The spec, checked (its references against the tenancy policy, its CEL expressions); None, reported as
    stalled, when it is invalid."""
    this, tenancy = turn.this, turn.ctx.tenancy
    try:
        spec = parse_config_sync(this.spec, this.name, this.namespace)
        tenancy.check_reference(this.namespace, spec.source_namespace, "spec.sourceRef")
        for i, dep in enumerate(spec.depends_on):
            tenancy.check_reference(this.namespace, dep.namespace, f"spec.dependsOn[{i}]")
            if dep.ready_expr:
                check_expression(dep.ready_expr, f"spec.dependsOn[{i}].readyExpr")
        check_exprs(spec.health_check_exprs)
    except SpecError as exc:
        await turn.report(False, exc.reason, str(exc), stalled=True)
        return None
    return spec


async def _dependencies(turn: _Turn, spec: ConfigSyncSpec) -> Outcome | None:
    """What the turn reads is remembered (a change to it wakes this ConfigSync); the outcome when it must wait
    for a dependency (woken when a dependency's status changes), None when it may go on."""
    ctx, this = turn.ctx, turn.this
    keys = spec.decryption.secret_ref if spec.decryption else ""
    source = turn.family.source(spec.source_kind) or turn.family.gitrepository
    ctx.memory.refer(turn.key, [(spec.source_namespace or this.namespace, source.key, spec.source_name),
                                *((this.namespace, ref.kind, ref.name) for ref in spec.post_build.substitute_from),
                                *([(this.namespace, "Secret", keys)] if keys else []),
                                *([(this.namespace, *spec.kube_config.source)] if spec.kube_config else []),
                                *((dep.namespace, turn.kind.key, dep.name) for dep in spec.depends_on)])
    try:
        waiting = await dependencies.waiting_for(
            ctx, this.namespace, this.name, tuple((d.namespace, d.name) for d in spec.depends_on), kind=turn.kind,
            this=turn.body, ready_exprs={(d.namespace, d.name): d.ready_expr for d in spec.depends_on if d.ready_expr})
    except SpecError as exc:
        await turn.report(False, exc.reason, str(exc), stalled=True)
        return DONE
    if not waiting:
        return None
    said = f"waiting for {', '.join(waiting)} to be Ready (spec.dependsOn)"
    before = (turn.status.condition(READY) or Condition(type="", status="")).message
    await turn.report(False, "DependencyNotReady", said, event=before != said)
    return after(ctx.settings.intervals.dependency_recheck)


async def _attempting(turn: _Turn, revision: str) -> None:
    """``revision`` is the one tried; a new one is said (Reconciling, and an Event: a commit status marks the
    commit pending)."""
    turn.status = settle.attempted(turn.status, revision)
    if revision != turn.status.last_applied_revision:
        said = f"applying revision {revision}"
        await write_status(turn.ctx, turn.kind, turn.body, progressing(turn.status, turn.this.generation, said),
                           outcome=False)
        await turn.ctx.services.events.normal(turn.body, "Progressing", said)


async def _sync(turn: _Turn, spec: ConfigSyncSpec, revision: str, found: list[Manifest], cluster: Cluster) -> Outcome:
    """Apply what the build made, prune what left it, then wait for health when asked."""
    this, marks = turn.this, turn.marks()
    kube, impersonating = _client(turn.ctx, this.namespace, spec, cluster)
    want = sync.desired(found, await observe.scopes(kube, found), spec.target_namespace or this.namespace, marks)
    # Without a ServiceAccount, a tenant's ConfigSync keeps to its namespace; a Flux Kustomization as Flux does.
    refusal = ("", "") if impersonating or turn.family.flux else sync.confinement(
        want.origins, this.namespace, set(want.cluster_scoped))
    live: dict[sync.ObjectId, dict[str, Any] | None] = {}
    if not refusal[0]:
        live = {oid: await observe.live(kube, oid) for oid in sync.apply_order(list(want.objects))}
        left = frozenset(oid for oid, obj in want.objects.items() if ssa.skipped(obj, live[oid]))
        refusal = sync.claims(want, live, marks, turn.status.inventory, adopt=turn.family.flux, left=left)
    if refusal[0]:
        await turn.report(False, refusal[0], f"revision {revision}: {refusal[1]}", stalled=True)
        return DONE
    started = time.monotonic()
    # From the first object applied until the inventory holds it, a suspension or a deletion does not cut the turn
    # short (Dispatcher._interrupt_on_halt): what was applied would be known to no inventory, and left behind.
    turn.ctx.memory.committed.add(turn.key)
    try:
        applied = await apply.apply_all(kube, want, live, apply.Rules(spec.force, spec.ignore),
                                        deadline=started + spec.deadline)
        failures = [*want.duplicates, *applied.failures]
        previous = [sync.id_of(x) for x in turn.status.inventory]
        gone = sync.to_prune(previous, list(want.objects)) if spec.prune else []
        pruned: list[sync.ObjectId] = []
        if gone and not failures:
            pruned, failures = await prune.prune(kube, gone, marks,
                                                 {sync.id_of(x): x.uid for x in turn.status.inventory})
        inventory = sync.inventory_after(want, turn.status.inventory, applied.uids,
                                         [oid for oid in gone if oid not in pruned])
        turn.status = settle.inventoried(turn.status, inventory)
    finally:
        turn.ctx.memory.committed.discard(turn.key)
    if failures:
        held = f"; {applied.held} object(s) not applied (that stage and those after it)" if applied.held else ""
        await turn.report(False, "ApplyFailed", f"revision {revision}: " + "; ".join(failures[:10]) + held)
        return _retry(spec)
    applied_objects = {oid: obj for oid, obj in want.objects.items() if oid not in applied.skipped}
    return await _settled(turn, spec, cluster, revision, replace(want, objects=applied_objects), pruned, started)


async def _settled(turn: _Turn, spec: ConfigSyncSpec, cluster: Cluster, revision: str, want: sync.Desired,
                   pruned: list[sync.ObjectId], started: float) -> Outcome:
    """Everything applied and pruned: Ready once what must be healthy is."""
    try:
        reason, problem = await health.wait(turn.ctx, cluster, turn.key, spec, want, started)
    except (Cancelled, asyncio.CancelledError) as exc:
        # a newer generation (reconciled at once), or suspended or deleted meanwhile: what was applied is recorded
        # first, so that a later prune or the deletion's finds it
        await write_status(turn.ctx, turn.kind, turn.body, progressing(
            turn.status, turn.this.generation, f"revision {revision} applied; its health was not awaited"),
            outcome=False)
        if isinstance(exc, asyncio.CancelledError):
            raise
        return after(0.01)
    if reason:
        await turn.report(False, reason, f"revision {revision}: {problem}")
        return _retry(spec)
    changed = turn.status.last_applied_revision != revision or bool(pruned)
    turn.status = settle.applied(turn.status, revision, list(turn.status.inventory))
    listed = f" ({', '.join(map(str, pruned[:10]))}{', ...' if len(pruned) > 10 else ''})" if pruned else ""
    await turn.report(True, "ReconciliationSucceeded", f"applied revision {revision}: {len(want.objects)} "
                                                       f"object(s), pruned {len(pruned)}{listed}", event=changed)
    return DONE


def _retry(spec: ConfigSyncSpec) -> Outcome:
    """After a failure: spec.retryInterval when it is set, else the failure backoff."""
    return after(spec.retry_interval) if spec.retry_interval else FAILED


async def finalize(ctx: Context, family: Family, body: dict[str, Any]) -> Outcome:
    """A deleted ConfigSync takes its objects with it as spec.deletionPolicy says (Flux's: MirrorPrune, the
    default, deletes them when it prunes; Delete; WaitForTermination, until they are gone or spec.timeout
    passed; Orphan leaves them). A suspended one leaves them, and one with no inventory has none: neither asks
    its cluster (Flux's rule), so a remote that never answers cannot hold it."""
    turn = _Turn(ctx, family, body, read_status(family.configsync, ConfigSyncStatus, body))
    this = turn.this
    ctx.memory.drop(turn.key)
    try:
        spec = parse_config_sync(this.spec, this.name, this.namespace)
    except SpecError:
        spec = None  # an invalid spec never applied anything
    if spec is None or spec.suspend or not spec.prunes_on_deletion or not turn.status.inventory:
        await ctx.services.remotes.release(turn.key)
        return DONE
    try:
        cluster = await clusters.target(ctx, turn.key, spec.kube_config)
    except HelmopError as exc:
        return await _unreachable_on_deletion(turn, exc)
    outcome = await _pruned_on_deletion(turn, spec, cluster)
    if outcome is DONE:
        await ctx.services.remotes.release(turn.key)
    return outcome


async def _unreachable_on_deletion(turn: _Turn, exc: HelmopError) -> Outcome:
    """The remote cluster does not answer: tried again later; a remote that cannot be built (its kubeConfig gone,
    invalid or refused) lets the ConfigSync go with its objects left in place, said in an Event
    (:func:`clusters.retried_on_deletion`)."""
    if clusters.retried_on_deletion(exc):
        await turn.ctx.services.events.post(turn.body, "Warning", exc.reason, str(exc))
        return FAILED
    await turn.ctx.services.events.post(turn.body, "Warning", "PruneSkipped", "objects left on the remote cluster "
                                                                              f"(not deleted): {exc}")
    await turn.ctx.services.remotes.release(turn.key)
    return DONE


async def _pruned_on_deletion(turn: _Turn, spec: ConfigSyncSpec, cluster: Cluster) -> Outcome:
    kube, _ = _client(turn.ctx, turn.this.namespace, spec, cluster)
    uids = {sync.id_of(x): x.uid for x in turn.status.inventory}
    order = list(reversed(sync.apply_order(list(uids))))
    _, problems = await prune.prune(kube, order, turn.marks(), uids)
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
