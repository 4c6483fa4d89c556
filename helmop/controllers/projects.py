"""The Project controller: a team's namespace, access, quota, isolation, Jenkins and config repository kept
in place (drift is put back: every reconcile applies them again, and a change of one wakes the Project),
and removed in order when the Project is deleted.

Teardown, one step at a time, each waiting for the previous to be done: stop syncing (the ConfigSync goes
and prunes what it applied; the namespace's HelmReleases are uninstalled, dependents first, by their own
clean-up), the Jenkins, access, and the namespace last. With ``retainData`` (the default) the volumes of the
namespace's claims are switched to ``Retain`` first, and the final Event names them. A step is never skipped:
one stuck past ``teardownTimeout`` is reported (a Warning Event) and tried again. ``deletionPolicy: Orphan``
leaves every part, without the Project's label and ownership.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from helmop.api import conditions as cond
from helmop.api.errors import HelmopError
from helmop.api.kinds import CONFIGSYNC, HELMRELEASE, JENKINS
from helmop.api.objects import ObjectKey, ObjectRef, Resource
from helmop.api.projects import ProjectSpec
from helmop.api.sources import GitRepositorySpec
from helmop.api.status import READY, Status, parse
from helmop.api.status.app import AppStatus
from helmop.api.status.project import Environment, ProjectStatus
from helmop.decisions.projects import JENKINS as JENKINS_NAME
from helmop.decisions.projects import (
    NAMESPACE_READY,
    PARTS,
    PROJECT_LABEL,
    STEPS,
    SYNC,
    Part,
    environment_namespace,
    environment_spec,
    parts,
    step_of,
    wants_environment,
)
from helmop.decisions.settle import project as settle
from helmop.infra.kube import KubeError
from helmop.sources.git import Branch
from helmop.sources.readers import git_auth

from . import dependencies
from .context import Context
from .outcome import DONE, FAILED, Outcome, after
from .turn import Turn

log = logging.getLogger(__name__)
MANAGER = "helmop-project"


async def _path(ctx: Context, ref: ObjectRef) -> str:
    return await ctx.services.kube.path_of(ref.api_version, ref.kind, ref.namespace, ref.name)


def _ready(obj: dict[str, Any] | None, what: str) -> tuple[bool, str, str]:
    """(ready, reason, message) of a part that reports a Ready condition: its own reason when it is not."""
    if obj is None:
        return False, "Progressing", f"{what} is not there yet"
    ready = cond.condition_of(obj, cond.READY)
    if ready.get("status") == "True" and parse(Status, Resource(obj).status).observed_generation \
            == Resource(obj).generation:
        return True, "Ready", f"{what} is Ready"
    message = ready.get("message") or "waiting to be reconciled"
    return False, str(ready.get("reason") or "Progressing"), f"{what}: {message}"


async def reconcile(turn: Turn[ProjectSpec, ProjectStatus]) -> Outcome:
    ctx, this, spec = turn.ctx, turn.this, turn.spec
    refused = await _claimed_elsewhere(ctx, this.name, spec.namespace)
    if refused:
        await turn.report(False, "NamespaceOwnedElsewhere", refused, stalled=True)
        return DONE
    try:
        waiting = await dependencies.waiting_for(ctx, turn.kind, turn.body, spec.depends_on)
    except HelmopError as exc:
        await turn.report(False, exc.reason, str(exc), stalled=not exc.transient)
        return FAILED if exc.transient else DONE
    if waiting:
        await turn.report(False, "DependencyNotReady", f"waiting for {', '.join(waiting)} to be Ready (spec.dependsOn)")
        return after(ctx.settings.intervals.dependency_recheck)
    wanted = parts(this.name, this.uid, spec)
    try:
        for part in wanted:
            await ctx.services.kube.apply(await _path(ctx, part.ref), part.obj, MANAGER)
        await _prune(ctx, turn.status.inventory, wanted)
        environments = await _environments(ctx, this, turn.status, spec)
    except KubeError as exc:
        await turn.report(False, "ApplyFailed", f"{exc.message}", stalled=exc.status == 422)
        return DONE if exc.status == 422 else FAILED
    # woken when the Jenkins, the ConfigSync or the GitRepository reports (their status writes: a push seen
    # by the repository may add or remove a branch's environment), as when a part changes
    turn.refer([ObjectKey(p.obj["kind"], spec.namespace, p.obj["metadata"]["name"]) for p in wanted
                if p.obj["kind"] in ("Jenkins", "ConfigSync", "GitRepository")])
    ctx.memory.observe(turn.key, [(p.ref.api_version, p.ref.namespace, p.ref.kind, p.ref.name)
                                  for p in wanted if p.obj["kind"] not in ("Namespace", "Jenkins", "ConfigSync",
                                                                           "GitRepository")])
    return await _publish(turn, wanted, environments)


async def _claimed_elsewhere(ctx: Context, project: str, namespace: str) -> str:
    """Why ``namespace`` may not be this Project's ("" when it may): it exists and is not labelled as its."""
    found = await ctx.services.kube.get(f"/api/v1/namespaces/{namespace}")
    owner = ((found or {}).get("metadata", {}).get("labels") or {}).get(PROJECT_LABEL)
    if found is None or owner == project:
        return ""
    why = f"another Project ({owner})" if owner else "no Project"
    return f"namespace {namespace} exists and belongs to {why}; nothing was created or adopted"


async def _environments(ctx: Context, this: Resource, status: ProjectStatus, spec: ProjectSpec) -> list[Environment]:
    """A namespace per matching branch of the sync repository (made or kept), and the teardown of those
    whose branch is gone or older than the ttl; the status entries."""
    previous = {e.branch: e for e in status.environments}
    wanted: dict[str, Branch] = {}
    envs = spec.environments
    if envs is not None and spec.sync is not None:
        auth = await git_auth(ctx.services.kube, spec.namespace,
                              GitRepositorySpec(url=spec.sync.url, secret_ref=spec.sync.secret_ref),
                              ctx.services.git.policy)
        await ctx.services.git.fetch(spec.sync.url, auth)
        now = time.time()
        wanted = {b.name: b for b in await ctx.services.git.branches(spec.sync.url, auth)
                  if wants_environment(envs, b.name) and (envs.ttl is None or now - b.committed <= envs.ttl)}
    out = []
    for branch in sorted(wanted):
        assert envs is not None
        namespace = environment_namespace(envs, this.name, branch)
        entry = Environment(branch=branch, namespace=namespace, commit=wanted[branch].sha)
        refused = (f"namespace {namespace} is the project's own" if namespace == spec.namespace
                   else await _claimed_elsewhere(ctx, this.name, namespace))
        if refused:
            out.append(entry.but(message=refused))
            continue
        made = parts(this.name, this.uid, environment_spec(spec, branch, namespace))
        for part in made:
            await ctx.services.kube.apply(await _path(ctx, part.ref), part.obj, MANAGER)
        ok, _reason, message = _ready(await ctx.services.kube.get(CONFIGSYNC.path(namespace, SYNC)),
                                      f"ConfigSync {namespace}/{SYNC}")
        out.append(entry.but(ready=ok, message=message, inventory=tuple(p.ref for p in made)))
    for branch, gone in previous.items():
        if branch in wanted:
            continue
        waiting = await _tear_down(ctx, gone.inventory)
        if waiting:  # listed until it is gone
            out.append(gone.but(ready=False, message=f"tearing down: waiting for {waiting}"))
    return out


async def _tear_down(ctx: Context, inventory: Sequence[ObjectRef]) -> str:
    """Every step in order over ``inventory``; "" when all is gone, else what the current step waits for."""
    for step in STEPS:
        waiting = await _step(ctx, step, inventory, None)
        if waiting:
            return waiting
    return ""


async def _prune(ctx: Context, inventory: Sequence[ObjectRef], wanted: list[Part]) -> None:
    """What an earlier spec made and this one does not (a member removed, isolation turned off)."""
    kept = {p.ref for p in wanted}
    for ref in inventory:
        if ref not in kept:
            await _delete(ctx, ref)


async def _delete(ctx: Context, ref: ObjectRef) -> bool:
    """Delete an inventory entry; True when it is gone."""
    try:
        path = await _path(ctx, ref)
        if await ctx.services.kube.get(path) is None:
            return True
        await ctx.services.kube.request("DELETE", path)
    except KubeError as exc:
        if exc.status != 404:
            raise
        return True
    return await ctx.services.kube.get(path) is None


async def _publish(turn: Turn[ProjectSpec, ProjectStatus], wanted: list[Part],
                   environments: list[Environment]) -> Outcome:
    ctx, spec = turn.ctx, turn.spec
    ns = spec.namespace
    answers = {NAMESPACE_READY: (True, "Ready", f"namespace {ns} is in place"),
               "AccessReady": (True, "Ready", f"{sum(1 for p in wanted if p.condition == 'AccessReady')} access "
                                              "object(s) in place")}
    jenkins = await ctx.services.kube.get(JENKINS.path(ns, JENKINS_NAME)) if spec.jenkins is not None else None
    answers["JenkinsReady"] = (_ready(jenkins, f"Jenkins {ns}/{JENKINS_NAME}") if spec.jenkins is not None
                               else (True, "Ready", "no Jenkins asked for"))
    sync = await ctx.services.kube.get(CONFIGSYNC.path(ns, SYNC)) if spec.sync is not None else None
    answers["SyncReady"] = (_ready(sync, f"ConfigSync {ns}/{SYNC}") if spec.sync is not None
                            else (True, "Ready", "no config repository asked for"))
    jenkins_url = parse(AppStatus, Resource(jenkins).status).url if jenkins else ""
    settled = settle.parts(turn.status, turn.generation, ns, [p.ref for p in wanted], environments, jenkins_url,
                           {kind: answers[kind] for kind in PARTS})
    await turn.write(settled)
    # The Jenkins and the ConfigSync report on their own time: looked at again soon until they are Ready;
    # environments follow the repository's branches (and its webhook, through the GitRepository's status).
    if not settled.is_true(READY) or any(not e.ready for e in environments):
        return after(ctx.settings.intervals.dependency_recheck)
    return after(ctx.settings.intervals.source) if spec.environments is not None else DONE


# --- teardown ------------------------------------------------------------------------------------


async def finalize(turn: Turn[ProjectSpec | None, ProjectStatus]) -> Outcome:
    """Its parts torn down in order (a refused spec tears down what the inventory names)."""
    ctx, spec = turn.ctx, turn.spec
    inventory = turn.status.inventory
    if spec is not None and spec.orphan:
        await _disown(ctx, turn.name, inventory)
        return DONE
    namespace = _namespace(inventory, spec)
    if namespace and (spec is None or spec.retain_data):  # before anything that could delete a claim
        turn.status = settle.retained(turn.status, await _retain_volumes(ctx, namespace))
    for environment in turn.status.environments:  # the branches' namespaces first
        waiting = await _tear_down(ctx, environment.inventory)
        if waiting:
            where = f"environment {environment.namespace}"
            return await _wait(turn, f"the teardown of {where}", where, waiting)
    for number, step in enumerate(STEPS, 1):
        teardown = turn.status.teardown
        if teardown is not None and step in teardown.done:
            continue
        waiting = await _step(ctx, step, inventory, spec)
        if waiting:
            return await _wait(turn, f"step {number}/{len(STEPS)} ({_label(step)})", step, waiting)
        await turn.events.normal("TeardownStep", f"step {number}/{len(STEPS)} done: {_label(step)}")
        await turn.write(settle.step_done(turn.status, step), outcome=False)
    kept = turn.status.teardown.retained if turn.status.teardown else ()
    await turn.events.normal("TornDown", "every part of the project is gone"
                             + (f"; kept volumes: {', '.join(kept)}" if kept else ""))
    return DONE


async def _step(ctx: Context, step: str, inventory: Sequence[ObjectRef], spec: ProjectSpec | None) -> str:
    """Do one teardown step; "" when it is done, else what it waits for."""
    namespace = _namespace(inventory, spec)
    if step == STEPS[0] and namespace:
        # The ConfigSync first (its clean-up prunes what it applied), then every HelmRelease left.
        for ref in [r for r in inventory if r.kind == "ConfigSync"]:
            if not await _delete(ctx, ref):
                return f"ConfigSync {namespace}/{ref.name} to prune what it applied"
        # (an app's own release, the Jenkins's, goes with the app, at its step)
        listed = await ctx.services.kube.list(HELMRELEASE.path(namespace)) if await _exists(ctx, namespace) else []
        releases = [r for r in listed if not Resource(r).metadata.get("ownerReferences")]
        for release in releases:
            if not Resource(release).deleting:
                await ctx.services.kube.request("DELETE", HELMRELEASE.path(namespace, Resource(release).name))
        if releases:
            return f"{len(releases)} HelmRelease(s) in {namespace} to be uninstalled"
    for ref in [r for r in inventory if step_of(r) == step]:
        if not await _delete(ctx, ref):
            return f"{ref.kind} {ref.namespace}{'/' if ref.namespace else ''}{ref.name}"
    return ""


async def _exists(ctx: Context, namespace: str) -> bool:
    return await ctx.services.kube.get(f"/api/v1/namespaces/{namespace}") is not None


async def _retain_volumes(ctx: Context, namespace: str) -> list[str]:
    """Switch the volumes bound to the namespace's claims to Retain; their names."""
    names: list[str] = []
    if not await _exists(ctx, namespace):
        return names
    for claim in await ctx.services.kube.list(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims"):
        volume = str(Resource(claim).spec.get("volumeName") or "")
        if volume:
            await ctx.services.kube.merge_patch(f"/api/v1/persistentvolumes/{volume}",
                                                {"spec": {"persistentVolumeReclaimPolicy": "Retain"}})
            names.append(volume)
    return names


async def _wait(turn: Turn[ProjectSpec | None, ProjectStatus], what: str, step: str, waiting: str) -> Outcome:
    """Record that ``step`` (described as ``what``) waits for ``waiting``; report it once past the timeout."""
    status = settle.waiting(turn.status, step, waiting, time.time())
    teardown = status.teardown
    assert teardown is not None
    limit = turn.spec.teardown_timeout if turn.spec else 600.0
    if time.time() - teardown.since > limit and not teardown.reported:
        status = settle.reported(status)
        await turn.events.warning("TeardownStuck", f"{what} has waited more than {limit:.0f}s for {waiting}; "
                                                   "trying again")
    await turn.write(status, outcome=False)
    return after(turn.ctx.settings.intervals.cleanup_wait)


def _label(step: str) -> str:
    """A step's name for people: its condition without "Ready" (Sync, Jenkins, Access, Namespace)."""
    return step.removesuffix("Ready")


def _namespace(inventory: Sequence[ObjectRef], spec: ProjectSpec | None) -> str:
    """The project namespace: the one the Project made (its inventory), else the one its spec names."""
    return next((r.name for r in inventory if r.kind == "Namespace"), spec.namespace if spec else "")


async def _disown(ctx: Context, project: str, inventory: Sequence[ObjectRef]) -> None:
    """deletionPolicy Orphan: every part stays, without the Project's label and ownership."""
    for ref in inventory:
        try:
            path = await _path(ctx, ref)
            live = await ctx.services.kube.get(path)
            if live is None:
                continue
            owners = [o for o in Resource(live).metadata.get("ownerReferences") or [] if o.get("kind") != "Project"]
            await ctx.services.kube.merge_patch(path, {"metadata": {"labels": {PROJECT_LABEL: None},
                                                                    "ownerReferences": owners or None}})
        except KubeError as exc:
            log.warning("Project %s: could not release %s %s: %s", project, ref.kind, ref.name, exc)
