"""One reconcile of a ConfigSync: wait for what it depends on, read or build what a revision of its
GitRepository holds under its path (``inputs``), apply it and prune what left it (``applying``), then wait for
what it applied to be healthy when asked; and the clean-up its deletionPolicy asks for.

Manifests are applied with server-side apply under a field manager of their own, in dependency
order (CRDs and Namespaces first), each marked as this ConfigSync's (a label, and an annotation with
its uid). A broken file stops the whole sync before anything is applied or pruned.

Tenants: without a ServiceAccount to act as (spec.serviceAccountName, or the operator's
--default-service-account), a ConfigSync writes only namespaced objects into its own namespace; with
one, every request is made as that ServiceAccount and its RBAC decides. Either way it never takes
over an object it did not create (unless the object says ``helmop.dev/adopt: "true"``), and it
prunes or deletes only objects that carry its own uid. A Flux Kustomization keeps Flux's ways: it applies over
what it finds, labels its objects as Flux does, and prunes what Flux applied before it (in Flux's inventory,
with Flux's labels), so a cluster moves over, and back, without an object re-created.
"""

from __future__ import annotations

import copy
import logging
import time
from typing import Any

from helmop.api.errors import SpecError
from helmop.api.kinds import Family
from helmop.api.objects import Resource
from helmop.api.redaction import redact
from helmop.api.sources import ConfigSyncSpec, parse_config_sync
from helmop.api.status import READY, Condition
from helmop.api.status.configsync import ConfigSyncStatus
from helmop.api.substitution import SubstitutionError, post_build
from helmop.helm.inputs import InputError, source_revision
from helmop.infra.kube import Kube, KubeError
from helmop.reconcile.health import check_expression, check_exprs
from helmop.reconcile.settle import configsync as settle
from helmop.reconcile.settle import progressing
from helmop.reconcile.sync import OWNER_LABEL, OWNER_UID, ObjectId, apply_order, claim_problem, confinement, to_prune
from helmop.sources.errors import SourceError

from .. import dependencies
from ..context import Context
from ..outcome import DONE, FAILED, Outcome, after
from ..readiness import Cancelled, Waiter, unhealthy
from ..status import read_status, report, write_status
from . import applying, inputs

log = logging.getLogger(__name__)


def _client(ctx: Context, namespace: str, spec: ConfigSyncSpec) -> tuple[Kube, bool]:
    """The client that writes this ConfigSync's objects, and whether it acts as a ServiceAccount."""
    actor = ctx.tenancy.acting_as(namespace, spec.service_account_name)
    return ctx.services.kube.acting_as(actor), bool(actor)


async def reconcile(ctx: Context, family: Family, body: dict[str, Any]) -> Outcome:
    """A ConfigSync, or a Flux Kustomization (``family`` FLUX): the same code; Flux's keeps Flux's tenancy (without
    a ServiceAccount it acts with the operator's rights, unconfined) and adopts objects no one manages."""
    this = Resource(body)
    namespace, name, uid = this.namespace, this.name, this.uid
    kind = family.configsync
    status = read_status(kind, ConfigSyncStatus, body)
    key = (kind.key, namespace, name)
    try:
        spec = parse_config_sync(body.get("spec") or {}, name, namespace)
        ctx.tenancy.check_reference(namespace, spec.source_namespace, "spec.sourceRef")
        for i, dep in enumerate(spec.depends_on):
            ctx.tenancy.check_reference(namespace, dep.namespace, f"spec.dependsOn[{i}]")
            if dep.ready_expr:
                check_expression(dep.ready_expr, f"spec.dependsOn[{i}].readyExpr")
        check_exprs(spec.health_check_exprs)
    except SpecError as exc:
        await report(ctx, kind, body, status, False, exc.reason, str(exc), stalled=True)
        return DONE
    if spec.suspend:
        return DONE
    source_namespace = spec.source_namespace or namespace
    ctx.memory.refer(key, [(source_namespace, family.gitrepository.key, spec.source_name),
                           *((namespace, ref.kind, ref.name) for ref in spec.post_build.substitute_from),
                           *((dep.namespace, kind.key, dep.name) for dep in spec.depends_on)])
    try:
        waiting = await dependencies.waiting_for(
            ctx, namespace, name, tuple((d.namespace, d.name) for d in spec.depends_on), kind=kind, this=body,
            ready_exprs={(d.namespace, d.name): d.ready_expr for d in spec.depends_on if d.ready_expr})
    except SpecError as exc:
        await report(ctx, kind, body, status, False, exc.reason, str(exc), stalled=True)
        return DONE
    if waiting:  # woken when a dependency's status changes
        said = f"waiting for {', '.join(waiting)} to be Ready (spec.dependsOn)"
        await report(ctx, kind, body, status, False, "DependencyNotReady", said,
                      event=(status.condition(READY) or Condition(type="", status="")).message != said)
        return after(ctx.tunables.dependency_recheck)
    try:
        source = await source_revision(ctx.services, source_namespace, spec.source_name, family)
    except (InputError, SourceError) as exc:
        await report(ctx, kind, body, status, False, exc.reason, str(exc), stalled=not exc.transient)
        return _retry(spec) if exc.transient else DONE
    revision = source.revision
    status = settle.attempted(status, revision)
    if revision != status.last_applied_revision:
        # A new revision is being applied: Reconciling, and said (a commit status marks the commit pending)
        said = f"applying revision {revision}"
        await write_status(ctx, kind, body, progressing(status, this.generation, said), outcome=False)
        await ctx.services.events.normal(body, "Progressing", said)
    try:
        found, errors = await inputs.read(ctx, spec, source)
        if errors:
            message = f"{len(errors)} broken manifest(s), nothing applied: " + "; ".join(errors[:5])
            raise InputError("ManifestInvalid", message, transient=False)
        variables, secrets = await inputs.variables(ctx, namespace, spec)
        ctx.memory.secrets[key] = secrets
        found = post_build(found, spec, variables, strict=ctx.tunables.strict_substitution)
    except SubstitutionError as exc:
        message = redact(f"revision {revision}: {exc}", ctx.memory.secrets.get(key, []))
        await report(ctx, kind, body, status, False, "SubstitutionFailed", message, stalled=True)
        return DONE
    except (InputError, SourceError) as exc:
        message = redact(f"revision {revision}: {exc}", ctx.memory.secrets.get(key, []))
        await report(ctx, kind, body, status, False, exc.reason, message, stalled=not exc.transient)
        return _retry(spec) if exc.transient else DONE
    kube, impersonating = _client(ctx, namespace, spec)
    label = applying.owner_label(namespace, name)
    origin = kind.origin_labels(namespace, name)  # a Flux Kustomization's objects carry Flux's labels too
    objects: dict[ObjectId, dict[str, Any]] = {}
    origins: dict[ObjectId, str] = {}
    cluster_scoped: set[ObjectId] = set()
    failures: list[str] = []
    for item in found:
        obj = copy.deepcopy(item.obj)
        try:
            _plural, namespaced = await kube.resource(item.api_version, item.kind)
        except KubeError as exc:
            if item.kind == "CustomResourceDefinition" or exc.status != 404:
                raise
            namespaced = True  # its CRD comes in this same sync; checked again when applied
        obj_meta = obj.setdefault("metadata", {})
        if namespaced:
            obj_meta.setdefault("namespace", spec.target_namespace or namespace)
        else:
            obj_meta.pop("namespace", None)
        obj_meta["labels"] = {**(obj_meta.get("labels") or {}), OWNER_LABEL: label, **origin}
        obj_meta.setdefault("annotations", {})[OWNER_UID] = uid
        oid = ObjectId(item.api_version, item.kind, obj_meta.get("namespace", ""), item.name)
        if oid in objects:
            failures.append(f"{oid}: defined twice ({item.origin})")
        objects[oid], origins[oid] = obj, item.origin
        if not namespaced:
            cluster_scoped.add(oid)
    previous = [applying.id_of(x) for x in status.inventory]
    refusal = (("", "") if impersonating or family.flux else confinement(origins, namespace, cluster_scoped))
    applied_uids = {applying.id_of(x): x.uid for x in status.inventory if x.uid}
    if not refusal[0]:
        claims = [p for oid in apply_order(list(objects))
                  if (p := claim_problem(oid, origins[oid], await applying.live(kube, oid), uid, label, oid in previous,
                                         applied_uids.get(oid, ""), adopt=family.flux))]
        refusal = ("ObjectOwnedElsewhere", f"refused, nothing applied: {'; '.join(claims[:10])}") if claims else refusal
    if refusal[0]:
        message = redact(f"revision {revision}: {refusal[1]}", ctx.memory.secrets.get(key, []))
        await report(ctx, kind, body, status, False, refusal[0], message, stalled=True)
        return DONE
    # The inventory records each object's own uid too: an object deleted and re-created by someone else
    # under the same name (even with copied marks) is not the one this ConfigSync applied.
    started = time.monotonic()
    crds: list[ObjectId] = []
    for oid in apply_order(list(objects)):
        try:
            if crds and oid.kind not in ("CustomResourceDefinition", "Namespace"):
                await applying.established(kube, crds, started + spec.deadline)  # before any object of theirs
                crds = []
            live = await applying.apply(kube, oid, objects[oid], force=spec.force)
            applied_uids[oid] = str((live.get("metadata") or {}).get("uid", ""))
            if oid.kind == "CustomResourceDefinition":
                crds.append(oid)
        except KubeError as exc:
            failures.append(f"{oid}: {exc.message}")
    pruned: list[ObjectId] = []
    if spec.prune and not failures:
        for oid in to_prune(previous, list(objects)):
            problem = await applying.delete(kube, oid, uid, label, applied_uids.get(oid, ""), origin)
            if problem:
                failures.append(problem)
            else:
                pruned.append(oid)
    # what was applied (now or before) only: an object refused at its first apply was never this sync's
    inventory = [applying.entry(oid, applied_uids) for oid in sorted(objects)
                 if applied_uids.get(oid) or oid in previous]
    if failures:
        # keep what could not be pruned in the inventory, so the next sync tries again
        pending = [o for o in previous if any(f.startswith(str(o)) for f in failures) and o not in objects]
        status = settle.inventoried(status, inventory + [applying.entry(oid, applied_uids) for oid in pending])
        message = redact(f"revision {revision}: " + "; ".join(failures[:10]), ctx.memory.secrets.get(key, []))
        await report(ctx, kind, body, status, False, "ApplyFailed", message)
        return _retry(spec)
    status = settle.inventoried(status, inventory)
    checked = _checked(spec, objects)
    if checked:
        located = [(await kube.path_of(o["apiVersion"], o["kind"], o["metadata"].get("namespace", ""),
                                       o["metadata"]["name"]), o) for o in checked]
        waiter = Waiter(ctx, key, ctx.tenancy.acting_as(namespace, spec.service_account_name),
                        spec.health_check_exprs)
        try:
            reason, problem = await unhealthy(waiter, located, spec.deadline, started)
        except Cancelled:
            return after(0.01)  # a newer generation: reconciled at once
        if reason:
            message = redact(f"revision {revision}: {problem}", ctx.memory.secrets.get(key, []))
            await report(ctx, kind, body, status, False, reason, message)
            return _retry(spec)
    changed = status.last_applied_revision != revision or bool(pruned)
    status = settle.applied(status, revision, inventory)
    message = f"applied revision {revision}: {len(objects)} object(s), pruned {len(pruned)}" + (
        f" ({', '.join(map(str, pruned[:10]))}{', ...' if len(pruned) > 10 else ''})" if pruned else "")
    await report(ctx, kind, body, status, True, "ReconciliationSucceeded", message, event=changed)
    return DONE


def _retry(spec: ConfigSyncSpec) -> Outcome:
    """After a failure: spec.retryInterval when it is set, else the failure backoff."""
    return after(spec.retry_interval) if spec.retry_interval else FAILED


def _checked(spec: ConfigSyncSpec, objects: dict[ObjectId, dict[str, Any]]) -> list[dict[str, Any]]:
    """What must become healthy after the apply: every object with spec.wait, else spec.healthChecks."""
    if spec.wait:
        return [objects[oid] for oid in apply_order(list(objects))]
    return [{"apiVersion": ref.api_version, "kind": ref.kind,
             "metadata": {"name": ref.name, **({"namespace": ref.namespace} if ref.namespace else {})}}
            for ref in spec.health_checks]


async def finalize(ctx: Context, family: Family, body: dict[str, Any]) -> Outcome:
    """A deleted ConfigSync takes its objects with it as spec.deletionPolicy says (Flux's: MirrorPrune, the
    default, deletes them when it prunes; Delete; WaitForTermination, until they are gone or spec.timeout
    passed; Orphan leaves them). A suspended one leaves them."""
    this = Resource(body)
    ctx.memory.drop((family.configsync.key, this.namespace, this.name))
    try:
        spec = parse_config_sync(body.get("spec") or {}, this.name, this.namespace)
    except SpecError:
        return DONE  # an invalid spec never applied anything
    if spec.suspend or not spec.prunes_on_deletion:
        return DONE
    kube, _ = _client(ctx, this.namespace, spec)
    label = applying.owner_label(this.namespace, this.name)
    origin = family.configsync.origin_labels(this.namespace, this.name)
    entries = read_status(family.configsync, ConfigSyncStatus, body).inventory
    uids = {applying.id_of(x): x.uid for x in entries}
    order = list(reversed(apply_order([applying.id_of(x) for x in entries])))
    problems = [p for oid in order if (p := await applying.delete(kube, oid, this.uid, label, uids[oid], origin))]
    if problems:
        return FAILED
    if spec.deletion_policy == "WaitForTermination":
        # what is still terminating (an object left alone, not this sync's or prune: disabled, is not waited for)
        left = [oid for oid in order
                if ((await applying.live(kube, oid)) or {}).get("metadata", {}).get("deletionTimestamp")]
        since = this.deleted_at or time.time()
        if left and time.time() - since < spec.deadline:
            await ctx.services.events.normal(body, "WaitingForTermination", f"waiting for {len(left)} object(s) to "
                                             f"be gone (deletionPolicy WaitForTermination): "
                                             + ", ".join(map(str, left[:10])))
            return after(ctx.tunables.cleanup_wait)
        if left:
            log.error("ConfigSync %s/%s: %d object(s) still terminating after %.0fs (spec.timeout); letting it go: "
                      "%s", this.namespace, this.name, len(left), spec.deadline, ", ".join(map(str, left[:10])))
    return DONE
