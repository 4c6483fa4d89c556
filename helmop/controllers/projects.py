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
from typing import Any

from helmop.api import conditions as cond
from helmop.api.errors import SpecError
from helmop.api.kinds import CONFIGSYNC, HELMRELEASE, JENKINS, PROJECT
from helmop.api.objects import Resource
from helmop.api.projects import ProjectSpec, parse_project
from helmop.helm.inputs import InputError, git_auth
from helmop.infra.kube import KubeError
from helmop.reconcile.projects import JENKINS as JENKINS_NAME
from helmop.reconcile.projects import (
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
from helmop.sources.errors import SourceError
from helmop.sources.git import Branch

from .context import Context
from .outcome import DONE, FAILED, Outcome, after
from .status import report, with_ready, write_status

log = logging.getLogger(__name__)
MANAGER = "helmop-project"


def _key(name: str) -> tuple[str, str, str]:
    return ("Project", "", name)


async def _path(ctx: Context, ref: dict[str, Any]) -> str:
    return await ctx.kube.path_of(ref["apiVersion"], ref["kind"], ref.get("namespace", ""), ref["name"])


def _ready(obj: dict[str, Any] | None, what: str) -> tuple[bool, str, str]:
    """(ready, reason, message) of a part that reports a Ready condition: its own reason when it is not."""
    if obj is None:
        return False, "Progressing", f"{what} is not there yet"
    ready = cond.condition_of(obj, cond.READY)
    if ready.get("status") == "True" and Resource(obj).status.get("observedGeneration") == Resource(obj).generation:
        return True, "Ready", f"{what} is Ready"
    message = ready.get("message") or "waiting to be reconciled"
    return False, str(ready.get("reason") or "Progressing"), f"{what}: {message}"


async def reconcile(ctx: Context, body: dict[str, Any]) -> Outcome:
    this = Resource(body)
    status = dict(this.status)
    try:
        spec = parse_project(this.spec, this.name)
    except SpecError as exc:
        await report(ctx, PROJECT, body, status, False, exc.reason, str(exc), stalled=True)
        return DONE
    refused = await _claimed_elsewhere(ctx, this.name, spec.namespace)
    if refused:
        await report(ctx, PROJECT, body, status, False, "NamespaceOwnedElsewhere", refused, stalled=True)
        return DONE
    wanted = parts(this.name, this.uid, spec)
    try:
        for part in wanted:
            await ctx.kube.apply(await _path(ctx, part.ref), part.obj, MANAGER)
        await _prune(ctx, status.get("inventory") or [], wanted)
        environments = await _environments(ctx, this, spec)
    except KubeError as exc:
        await report(ctx, PROJECT, body, status, False, "ApplyFailed", f"{exc.message}", stalled=exc.status == 422)
        return DONE if exc.status == 422 else FAILED
    except (SourceError, InputError) as exc:
        await report(ctx, PROJECT, body, status, False, exc.reason, str(exc), stalled=not exc.transient)
        return FAILED if exc.transient else DONE
    # woken when the Jenkins, the ConfigSync or the GitRepository reports (their status writes: a push seen
    # by the repository may add or remove a branch's environment), as when a part changes
    ctx.refer(_key(this.name), [(spec.namespace, p.obj["kind"], p.obj["metadata"]["name"]) for p in wanted
                                if p.obj["kind"] in ("Jenkins", "ConfigSync", "GitRepository")])
    ctx.observe(_key(this.name), [(p.ref["apiVersion"], p.ref["namespace"], p.ref["kind"], p.ref["name"])
                                  for p in wanted if p.obj["kind"] not in ("Namespace", "Jenkins", "ConfigSync",
                                                                           "GitRepository")])
    return await _publish(ctx, body, spec, wanted, environments)


async def _claimed_elsewhere(ctx: Context, project: str, namespace: str) -> str:
    """Why ``namespace`` may not be this Project's ("" when it may): it exists and is not labelled as its."""
    found = await ctx.kube.get(f"/api/v1/namespaces/{namespace}")
    owner = ((found or {}).get("metadata", {}).get("labels") or {}).get(PROJECT_LABEL)
    if found is None or owner == project:
        return ""
    why = f"another Project ({owner})" if owner else "no Project"
    return f"namespace {namespace} exists and belongs to {why}; nothing was created or adopted"


async def _environments(ctx: Context, this: Resource, spec: ProjectSpec) -> list[dict[str, Any]]:
    """A namespace per matching branch of the sync repository (made or kept), and the teardown of those
    whose branch is gone or older than the ttl; the status entries."""
    previous = {str(e.get("branch")): e for e in this.status.get("environments") or []}
    wanted: dict[str, Branch] = {}
    envs = spec.environments
    if envs is not None and spec.sync is not None:
        auth = await git_auth(ctx.kube, spec.namespace, {"spec": {"secretRef": {"name": spec.sync.secret_ref}}}
                              if spec.sync.secret_ref else {})
        await ctx.git.fetch(spec.sync.url, auth)
        now = time.time()
        wanted = {b.name: b for b in await ctx.git.branches(spec.sync.url, auth)
                  if wants_environment(envs, b.name) and (envs.ttl is None or now - b.committed <= envs.ttl)}
    out = []
    for branch in sorted(wanted):
        assert envs is not None
        namespace = environment_namespace(envs, this.name, branch)
        entry: dict[str, Any] = {"branch": branch, "namespace": namespace, "commit": wanted[branch].sha}
        refused = (f"namespace {namespace} is the project's own" if namespace == spec.namespace
                   else await _claimed_elsewhere(ctx, this.name, namespace))
        if refused:
            out.append({**entry, "ready": False, "message": refused, "inventory": []})
            continue
        made = parts(this.name, this.uid, environment_spec(spec, branch, namespace))
        for part in made:
            await ctx.kube.apply(await _path(ctx, part.ref), part.obj, MANAGER)
        ok, _reason, message = _ready(await ctx.kube.get(CONFIGSYNC.path(namespace, SYNC)),
                                      f"ConfigSync {namespace}/{SYNC}")
        out.append({**entry, "ready": ok, "message": message, "inventory": [p.ref for p in made]})
    for branch, gone in previous.items():
        if branch in wanted:
            continue
        waiting = await _tear_down(ctx, list(gone.get("inventory") or []))
        if waiting:  # listed until it is gone
            out.append({**gone, "ready": False, "message": f"tearing down: waiting for {waiting}"})
    return out


async def _tear_down(ctx: Context, inventory: list[dict[str, Any]]) -> str:
    """Every step in order over ``inventory``; "" when all is gone, else what the current step waits for."""
    for step in STEPS:
        waiting = await _step(ctx, step, inventory, None)
        if waiting:
            return waiting
    return ""


async def _prune(ctx: Context, inventory: list[dict[str, Any]], wanted: list[Part]) -> None:
    """What an earlier spec made and this one does not (a member removed, isolation turned off)."""
    kept = {tuple(p.ref.values()) for p in wanted}
    for ref in inventory:
        if tuple(ref.get(k, "") for k in ("apiVersion", "kind", "namespace", "name")) not in kept:
            await _delete(ctx, ref)


async def _delete(ctx: Context, ref: dict[str, Any]) -> bool:
    """Delete an inventory entry; True when it is gone."""
    try:
        path = await _path(ctx, ref)
        if await ctx.kube.get(path) is None:
            return True
        await ctx.kube.request("DELETE", path)
    except KubeError as exc:
        if exc.status != 404:
            raise
        return True
    return await ctx.kube.get(path) is None


async def _publish(ctx: Context, body: dict[str, Any], spec: ProjectSpec, wanted: list[Part],
                   environments: list[dict[str, Any]]) -> Outcome:
    this = Resource(body)
    ns = spec.namespace
    status = dict(this.status)
    answers = {NAMESPACE_READY: (True, "Ready", f"namespace {ns} is in place"),
               "AccessReady": (True, "Ready", f"{sum(1 for p in wanted if p.condition == 'AccessReady')} access "
                                              "object(s) in place")}
    jenkins = await ctx.kube.get(JENKINS.path(ns, JENKINS_NAME)) if spec.jenkins is not None else None
    answers["JenkinsReady"] = (_ready(jenkins, f"Jenkins {ns}/{JENKINS_NAME}") if spec.jenkins is not None
                               else (True, "Ready", "no Jenkins asked for"))
    sync = await ctx.kube.get(CONFIGSYNC.path(ns, SYNC)) if spec.sync is not None else None
    answers["SyncReady"] = (_ready(sync, f"ConfigSync {ns}/{SYNC}") if spec.sync is not None
                            else (True, "Ready", "no config repository asked for"))
    conditions = status.get("conditions") or []
    for kind in PARTS:
        ok, reason, message = answers[kind]
        conditions = cond.set_condition(conditions, kind, ok, reason, message, this.generation)
    status.update(conditions=conditions, namespace=ns, inventory=[p.ref for p in wanted], environments=environments,
                  jenkinsUrl=str(Resource(jenkins).status.get("url") or "") if jenkins else "")
    waiting = [answers[kind][2] for kind in PARTS if not answers[kind][0]]
    ready = not waiting
    message = "every part of the project is Ready" if ready else "; ".join(waiting)
    await write_status(ctx, PROJECT, body, with_ready(body, status, ready, "Ready" if ready else "Progressing",
                                                      message))
    # The Jenkins and the ConfigSync report on their own time: looked at again soon until they are Ready;
    # environments follow the repository's branches (and its webhook, through the GitRepository's status).
    if not ready or any(not e.get("ready") for e in environments):
        return after(ctx.tunables.dependency_recheck)
    return after(ctx.tunables.source_interval) if spec.environments is not None else DONE


# --- teardown ------------------------------------------------------------------------------------


async def finalize(ctx: Context, body: dict[str, Any]) -> Outcome:
    this = Resource(body)
    inventory: list[dict[str, Any]] = list(this.status.get("inventory") or [])
    try:
        spec = parse_project(this.spec, this.name)
    except SpecError:
        spec = None
    if spec is not None and spec.orphan:
        await _disown(ctx, this.name, inventory)
        ctx.drop(_key(this.name))
        return DONE
    teardown = dict(this.status.get("teardown") or {})
    namespace = _namespace(inventory, spec)
    if namespace and (spec is None or spec.retain_data):  # before anything that could delete a claim
        teardown["retained"] = sorted(set(teardown.get("retained") or []) | set(await _retain_volumes(ctx, namespace)))
    for environment in this.status.get("environments") or []:  # the branches' namespaces first
        waiting = await _tear_down(ctx, list(environment.get("inventory") or []))
        if waiting:
            where = f"environment {environment.get('namespace')}"
            return await _wait(ctx, body, teardown, f"the teardown of {where}", where, waiting, spec)
    done = list(teardown.get("done") or [])
    for number, step in enumerate(STEPS, 1):
        if step in done:
            continue
        waiting = await _step(ctx, step, inventory, spec)
        if waiting:
            return await _wait(ctx, body, teardown, f"step {number}/{len(STEPS)} ({_label(step)})", step, waiting,
                               spec)
        done.append(step)
        teardown.update(done=done, waitingFor="")
        await ctx.events.normal(body, "TeardownStep", f"step {number}/{len(STEPS)} done: {_label(step)}")
        await write_status(ctx, PROJECT, body, {**this.status, "teardown": teardown}, outcome=False)
    kept = teardown.get("retained") or []
    ctx.drop(_key(this.name))
    await ctx.events.normal(body, "TornDown", "every part of the project is gone"
                            + (f"; kept volumes: {', '.join(kept)}" if kept else ""))
    return DONE


async def _step(ctx: Context, step: str, inventory: list[dict[str, Any]], spec: ProjectSpec | None) -> str:
    """Do one teardown step; "" when it is done, else what it waits for."""
    namespace = _namespace(inventory, spec)
    if step == STEPS[0] and namespace:
        # The ConfigSync first (its clean-up prunes what it applied), then every HelmRelease left.
        for ref in [r for r in inventory if r["kind"] == "ConfigSync"]:
            if not await _delete(ctx, ref):
                return f"ConfigSync {namespace}/{ref['name']} to prune what it applied"
        # (an app's own release, the Jenkins's, goes with the app, at its step)
        releases = [r for r in (await ctx.kube.list(HELMRELEASE.path(namespace)) if await _exists(ctx, namespace)
                                else []) if not Resource(r).metadata.get("ownerReferences")]
        for release in releases:
            if not Resource(release).deleting:
                await ctx.kube.request("DELETE", HELMRELEASE.path(namespace, Resource(release).name))
        if releases:
            return f"{len(releases)} HelmRelease(s) in {namespace} to be uninstalled"
    for ref in [r for r in inventory if step_of(r) == step]:
        if not await _delete(ctx, ref):
            return f"{ref['kind']} {ref.get('namespace') or ''}{'/' if ref.get('namespace') else ''}{ref['name']}"
    return ""


async def _exists(ctx: Context, namespace: str) -> bool:
    return await ctx.kube.get(f"/api/v1/namespaces/{namespace}") is not None


async def _retain_volumes(ctx: Context, namespace: str) -> list[str]:
    """Switch the volumes bound to the namespace's claims to Retain; their names."""
    names: list[str] = []
    if not await _exists(ctx, namespace):
        return names
    for claim in await ctx.kube.list(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims"):
        volume = str(Resource(claim).spec.get("volumeName") or "")
        if volume:
            await ctx.kube.merge_patch(f"/api/v1/persistentvolumes/{volume}",
                                       {"spec": {"persistentVolumeReclaimPolicy": "Retain"}})
            names.append(volume)
    return names


async def _wait(ctx: Context, body: dict[str, Any], teardown: dict[str, Any], what: str, step: str, waiting: str,
                spec: ProjectSpec | None) -> Outcome:
    """Record that ``step`` (described as ``what``) waits for ``waiting``; report it once past the timeout."""
    this = Resource(body)
    now = time.time()
    if teardown.get("step") != step:
        teardown.update(step=step, since=now, reported=False)
    teardown["waitingFor"] = waiting
    limit = spec.teardown_timeout if spec else 600.0
    if now - float(teardown.get("since", now)) > limit and not teardown.get("reported"):
        teardown["reported"] = True
        await ctx.events.warning(body, "TeardownStuck", f"{what} has waited more than {limit:.0f}s for {waiting}; "
                                                        "trying again")
    await write_status(ctx, PROJECT, body, {**this.status, "teardown": teardown}, outcome=False)
    return after(ctx.tunables.cleanup_wait)


def _label(step: str) -> str:
    """A step's name for people: its condition without "Ready" (Sync, Jenkins, Access, Namespace)."""
    return step.removesuffix("Ready")


def _namespace(inventory: list[dict[str, Any]], spec: ProjectSpec | None) -> str:
    """The project namespace: the one the Project made (its inventory), else the one its spec names."""
    return next((r["name"] for r in inventory if r["kind"] == "Namespace"), spec.namespace if spec else "")


async def _disown(ctx: Context, project: str, inventory: list[dict[str, Any]]) -> None:
    """deletionPolicy Orphan: every part stays, without the Project's label and ownership."""
    for ref in inventory:
        try:
            path = await _path(ctx, ref)
            live = await ctx.kube.get(path)
            if live is None:
                continue
            owners = [o for o in Resource(live).metadata.get("ownerReferences") or [] if o.get("kind") != "Project"]
            await ctx.kube.merge_patch(path, {"metadata": {"labels": {PROJECT_LABEL: None},
                                                           "ownerReferences": owners or None}})
        except KubeError as exc:
            log.warning("Project %s: could not release %s %s: %s", project, ref["kind"], ref["name"], exc)
