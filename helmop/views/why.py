"""Why an object is not ready: what it waits for, and what that waits for, down to where the waiting starts (the
root causes), read with the reader's own client. ``helmop why`` prints it, the web UI's object page shows it.

Each link is an object with its state (Ready, Waiting, Failed, Suspended, Missing, Unreachable, Error: the API's
answer to reading it), reason and message.
What an object waits for, as the operator would wait:

* a spec.dependsOn entry (of a HelmRelease, ConfigSync, Flux HelmRelease or Kustomization) whose object is not
  ready for it, judged as the operator judges it (``ready: false``: present is enough; else its readyExpr; else
  :func:`helmop.decisions.readiness.readiness`), followed into that object whatever its kind;
* its source (a release's chart source, a ConfigSync's or Kustomization's sourceRef, a HelmChart's, an
  ExternalArtifact's producer) when that is missing or has published nothing, or is not Ready while the object
  is not Ready either (a release keeps the artifact it has when its source fails later: no wait then).

A suspended object, one whose remote cluster does not answer, and one that waits for nothing not ready are where
the chain ends. A chain that comes back to an object on it is a cycle, said and not followed; nor is a chain
followed past :data:`MAX_DEPTH` links.

Specs are tenants' input, and the reader may be the web UI's server, shared: an object reached again (a diamond:
two ways to one object) is shown in full once and then as one link "(see above)", or the tree would double with
each layer of objects that depend on the same ones; past :data:`MAX_LINKS` links, :data:`MAX_LOOKS` objects looked
at or :data:`DEADLINE` seconds, nothing more is looked at and a last link says how much was left out."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from helmop.api.conditions import READY as READY_CONDITION
from helmop.api.conditions import RECONCILING, STALLED, condition_of
from helmop.api.conditions import WAITING as WAITING_REASONS
from helmop.api.dependencies import Dependency, of_object, waiting_kind
from helmop.api.kinds import FLUX_GROUPS, GITREPOSITORY, GROUP, Kind, family_of
from helmop.api.objects import Resource
from helmop.decisions.health import FAILED as HEALTH_FAILED
from helmop.decisions.health import judge
from helmop.decisions.readiness import readiness
from helmop.infra.dependencies import target
from helmop.infra.kube import Kube, KubeError
from helmop.infra.worker import Worker, WorkerTimeout

from .fleet import UNREACHABLE as CLUSTER_UNREACHABLE
from .statuses import artifact_of, status_of
from .tree import Ref

READY, WAITING, FAILED, SUSPENDED, MISSING, UNREACHABLE, ERROR = (
    "Ready", "Waiting", "Failed", "Suspended", "Missing", "Unreachable", "Error")
CUT = "Cut"  # the state of the last link when the walk stopped early (not an object's)
DEPENDS_ON, SOURCE = "dependsOn", "source"  # how a link is waited for by the one above it
SEE_ABOVE = "(see above)"
MAX_DEPTH = 20  # links of one chain: a chain of dependencies is a few long; a longer one is not followed further
MAX_LINKS = 200  # links in all: what a person reads; more is a tree too large to read or a hostile one
MAX_LOOKS = 1000  # dependsOn entries and sources looked at (a read each, maybe an expression), links or not
DEADLINE = 10.0  # seconds of looking (each read or expression is bounded by the client and the worker)
MAX_MESSAGE = 4096  # characters of a link's message: a status's message is the object's writer's, of any length


def title(ref: Ref) -> str:
    _, kind, namespace, name = ref
    return f"{kind}/{namespace + '/' if namespace else ''}{name}" if kind else name


@dataclass
class Link:
    """One object on the chain and what it waits for."""

    ref: Ref
    state: str
    reason: str = ""
    message: str = ""
    via: str = ""  # DEPENDS_ON or SOURCE: how the link above waits for it ("": the object asked about)
    waits_for: list[Link] = field(default_factory=list)
    above: bool = False  # shown in full above: what it waits for is not repeated

    def __post_init__(self) -> None:
        if len(self.message) > MAX_MESSAGE:
            self.message = self.message[:MAX_MESSAGE] + "… (cut)"

    @property
    def title(self) -> str:
        return title(self.ref)

    def walk(self) -> list[Link]:
        return [self, *(n for link in self.waits_for for n in link.walk())]

    def json(self, *, below: bool = True) -> dict[str, Any]:
        api_version, kind, namespace, name = self.ref
        out: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "namespace": namespace, "name": name,
                               "via": self.via, "state": self.state, "reason": self.reason,
                               "message": self.message}
        return out | ({"seeAbove": self.above, "waitsFor": [link.json() for link in self.waits_for]} if below else {})


def root_causes(top: Link) -> list[Link]:
    """Where the waiting starts: the links that wait for nothing else and are not Ready (each object once; not a
    link shown above, whose own waits are there)."""
    out: dict[tuple[Ref, str], Link] = {}
    for link in top.walk():
        if not link.waits_for and link.state not in (READY, CUT) and not link.above:
            out.setdefault((link.ref, link.reason), link)
    return list(out.values())


async def why(kube: Kube, ref: Ref, cel: Worker) -> Link:
    """The chain from the object at ``ref``: Missing when it cannot be read; readyExprs evaluated with ``cel``. Any
    other error reading that object (not one it waits for) is raised: the caller says it."""
    walk = _Walk(kube, cel, time.monotonic() + DEADLINE)
    read = await walk.read(ref)
    if isinstance(read, KubeError) and read.status not in (401, 403, 404):
        raise read
    if not isinstance(read, dict):
        return _unread(ref, "", read)
    top = await walk.link(ref, read, "", None, ())
    if walk.cut:
        top.waits_for.append(Link(("", "", "", "…"), CUT, "NotFollowed", f"the chain was cut {walk.cut}: "
                                  f"{walk.left_out} more dependsOn entries and sources were not looked at"))
    return top


def _unread(ref: Ref, via: str, said: KubeError | None) -> Link:
    """The link of an object that could not be read: Missing when there is none (``said`` None), the reader may
    not read it or its kind is not served; else the API's answer (its message only), or Unreachable without one."""
    if said is None:
        return Link(ref, MISSING, "NotFound", f"{title(ref)} not found", via)
    if said.status in (401, 403, 404):
        return Link(ref, MISSING, "NotServed" if said.status == 404 else "Forbidden", said.message, via)
    return Link(ref, UNREACHABLE if said.status == 0 else ERROR, said.reason or "Error", said.message, via)


@dataclass
class _Walk:
    kube: Kube
    cel: Worker
    deadline: float  # time.monotonic() past which nothing more is looked at
    # expanded already (shown in full once), by where and how it was judged
    done: dict[tuple[Ref, tuple[str, str] | None], Link] = field(default_factory=dict)
    made: int = 0  # links
    looked: int = 0  # dependsOn entries and sources looked at
    left_out: int = 0  # those not looked at once cut
    cut: str = ""  # why nothing more is looked at ("": everything was)

    def _look(self) -> bool:
        """Whether to look at one more dependsOn entry or source (if not, it is counted as left out)."""
        if not self.cut:
            if self.made >= MAX_LINKS:
                self.cut = f"at {MAX_LINKS} links"
            elif self.looked >= MAX_LOOKS:
                self.cut = f"after {MAX_LOOKS} objects looked at"
            elif time.monotonic() >= self.deadline:
                self.cut = f"after {DEADLINE:g} s"
        if self.cut:
            self.left_out += 1
            return False
        self.looked += 1
        return True

    def _counted(self, link: Link) -> Link:
        self.made += 1
        return link

    async def read(self, ref: Ref) -> dict[str, Any] | KubeError | None:
        """The object; None when there is none; else what the API said (about this object only: a refusal, a
        kind not served, a name or apiVersion no path can hold, a server error)."""
        try:
            return await self.kube.get(await self.kube.path_of(*ref))
        except KubeError as exc:
            return exc

    async def link(self, ref: Ref, obj: dict[str, Any], via: str, judged: tuple[str, str] | None,
                   path: tuple[Ref, ...]) -> Link:
        """The link of ``obj`` (read at ``ref``; ``judged``: why it is not ready for the one above, when its own
        state may not say it) and, unless it ends the chain or was shown above, what it waits for."""
        shown = self.done.get((ref, judged))
        if shown is not None:
            return self._counted(Link(ref, shown.state, shown.reason, SEE_ABOVE, via, above=True))
        link = self._counted(Link(ref, *_state(obj, judged), via=via))
        if link.state in (SUSPENDED, UNREACHABLE):
            return link
        path = (*path, ref)
        if len(path) >= MAX_DEPTH:
            link.message += f" (what it waits for is not followed: the chain is {MAX_DEPTH} links long)"
            return link
        link.waits_for = [*await self._dependencies(ref, obj, path), *await self._source(ref, obj, link, path)]
        self.done[(ref, judged)] = link
        return link

    async def _dependencies(self, ref: Ref, obj: dict[str, Any], path: tuple[Ref, ...]) -> list[Link]:
        own = waiting_kind(ref[0], ref[1])
        if own is None:
            return []
        found = [await self._dependency(own, obj, dep, path) for dep in of_object(own, obj) if self._look()]
        return [link for link in found if link is not None]

    async def _dependency(self, own: Kind, this: dict[str, Any], dep: Dependency,
                          path: tuple[Ref, ...]) -> Link | None:
        """The link of one dependsOn entry; None when its object is ready for it."""
        namespace = Resource(this).namespace
        try:
            found = await target(self.kube, own, namespace, dep)
        except KubeError as exc:  # a kind not served (404), an apiVersion no path can hold (400), ...
            named = (dep.api_version, dep.kind, dep.namespace or namespace, dep.name)
            return self._counted(_unread(named, DEPENDS_ON, exc))
        ref = (found.api_version or own.api_version, found.kind, found.key.namespace, found.key.name)
        read = await self.read(ref)
        if not isinstance(read, dict):
            return self._counted(_unread(ref, DEPENDS_ON, read))
        judged = await self._judged(dep, read, this)
        if judged is None:
            return None
        if ref in path:
            return self._counted(_cycle(ref, path))
        return await self.link(ref, read, DEPENDS_ON, judged, path)

    async def _judged(self, dep: Dependency, obj: dict[str, Any], this: dict[str, Any]) -> tuple[str, str] | None:
        """Why ``obj`` is not ready for ``dep`` (reason, message), as the operator judges it; None when it is."""
        if not dep.ready:
            return None  # being there is enough: nothing of it is waited for, so nothing below it is followed
        if dep.ready_expr:
            try:
                true = (await self.cel.evaluate([dep.ready_expr], this, dep=obj))[0]
            except WorkerTimeout:  # an expression that runs away: not true, as for the operator
                true = False
            return None if true else ("ReadyExprNotTrue", f"readyExpr is not true: {dep.ready_expr}")
        why = readiness(obj)
        return ("NotReady", why) if why else None

    async def _source(self, ref: Ref, obj: dict[str, Any], link: Link, path: tuple[Ref, ...]) -> list[Link]:
        found = _source_of(ref, obj)
        if found is None or not self._look():
            return []
        kind, source = found
        read = await self.read(source)
        if not isinstance(read, dict):
            return [self._counted(_unread(source, SOURCE, read))]
        judged = _unpublished(kind, read)
        why = readiness(read)
        if judged is None and (not why or link.state == READY):
            return []
        return [await self.link(source, read, SOURCE, judged or ("NotReady", why), path)]


def _state(obj: dict[str, Any], judged: tuple[str, str] | None) -> tuple[str, str, str]:
    """(state, reason, message) of an object: its own, unless it is ready by its own account and still not
    for the one that waits for it (``judged``: a readyExpr not true, no artifact)."""
    if Resource(obj).spec.get("suspend") is True:
        return SUSPENDED, "Suspended", "spec.suspend is true"
    ready = condition_of(obj, READY_CONDITION)
    reason, message = str(ready.get("reason") or ""), str(ready.get("message") or "")
    if ready.get("status") != "True" and reason == CLUSTER_UNREACHABLE:
        return UNREACHABLE, reason, message
    why = readiness(obj)
    if not why:
        return (WAITING, *judged) if judged else (READY, reason, message)
    if ready.get("status") == "True":  # but for an older generation, or still at work
        return WAITING, "", why
    return (FAILED if _failed(obj, ready) else WAITING), reason, message or why


def _failed(obj: dict[str, Any], ready: dict[str, Any]) -> bool:
    """Whether the object gave up rather than waits or works: stalled, Ready False for a reason other than a wait
    and not at work again, or kstatus' Failed for a kind without a Ready condition."""
    if condition_of(obj, STALLED).get("status") == "True":
        return True
    if ready:
        return (ready.get("status") == "False" and ready.get("reason") not in WAITING_REASONS
                and condition_of(obj, RECONCILING).get("status") != "True")
    return judge(obj)[0] == HEALTH_FAILED


def _source_of(ref: Ref, obj: dict[str, Any]) -> tuple[Kind, Ref] | None:
    """The source an object of helmop's or Flux's reads its content from (of the same family), or None."""
    group = ref[0].rpartition("/")[0]
    if group != GROUP and not group.endswith(FLUX_GROUPS):
        return None
    family = family_of(group)
    if ref[1] not in (family.helmrelease.kind, family.configsync.kind, family.helmchart.kind,
                      family.externalartifact.kind):
        return None
    source = Resource(obj).source_ref
    wanted = str(source.get("kind") or GITREPOSITORY.kind)
    kind = family.source(wanted) or (family.artifactgenerator if wanted == family.artifactgenerator.kind else None)
    if not source.get("name") or kind is None:
        return None  # (a kind it cannot read: its own status says so)
    return kind, (kind.api_version, kind.kind, str(source.get("namespace") or ref[2]), str(source["name"]))


def _unpublished(kind: Kind, obj: dict[str, Any]) -> tuple[str, str] | None:
    """Why a source has nothing to read yet; None when it has an artifact, or publishes none by design (an
    ArtifactGenerator, whose ExternalArtifacts do; an OCI HelmRepository, a registry read directly)."""
    if kind.kind == "ArtifactGenerator" or (kind.kind == "HelmRepository" and Resource(obj).spec.get("type") == "oci"):
        return None
    artifact = artifact_of(status_of(obj))
    return None if artifact is not None and artifact.revision else ("NoArtifact", "no artifact yet")


def _cycle(ref: Ref, path: tuple[Ref, ...]) -> Link:
    names = " -> ".join(title(r) for r in (*path[path.index(ref):], ref))
    return Link(ref, FAILED, "DependencyCycle", f"spec.dependsOn makes a cycle: {names}", DEPENDS_ON)
