"""The pages: what each shows is read with the viewer's client (``access.Viewer.kube``) at the time it is asked
for, and each action is the CLI's (``views.requests``), so a page shows and does what ``helmop get``, ``tree``,
``events``, ``logs`` and ``reconcile`` would for the same person.

Every name in a path or a query is checked before it reaches the API (a kind must be one the registry shows,
names and namespaces must be Kubernetes names, a search or label selector is bounded), and what the API refuses
the viewer is said on the page with the API's own words. What a page shows of a status is read through the typed
models (``views.statuses``)."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
import yaml
from aiohttp import web

from helmop.api.conditions import condition_of
from helmop.api.kinds import BUILTIN, Kind, is_namespace_name, is_object_name
from helmop.api.objects import Resource
from helmop.api.requests import MAX_TEXT, Asked
from helmop.api.status import Controlled, Status
from helmop.api.status.helmrelease import HelmReleaseStatus
from helmop.api.status.receiver import ReceiverStatus
from helmop.api.status.sources import GitRepositoryStatus
from helmop.infra.kube import Kube, KubeError
from helmop.infra.worker import Worker
from helmop.views import attention, operator_logs, requests
from helmop.views.cells import DELIVERING, HEALTHS, LOCAL, cluster, health, last_seen, revision, since, source
from helmop.views.fleet import fleet
from helmop.views.statuses import artifact_of, read, status_of
from helmop.views.tree import Ref, tree
from helmop.views.values_diff import values_diff
from helmop.views.why import ERROR, Link, root_causes, why

from . import graph
from .access import COOKIE, Access, Viewer
from .feed import Feed
from .guard import Guard, local_path
from .kinds import Registry, families, page_of

MAX_QUERY = 256  # characters of a search, a label selector
RECENT = 20  # events on the overview
ATTENTION_SHOWN = 50  # rows of what needs attention on the overview
SEARCH_SHOWN = 50  # matches of each kind shown by a search (the kind's list, filtered alike, has them all)
LOG_LINES = 40  # operator log lines on a page
SPEC_SHOWN = 64 << 10  # characters of a spec shown
ACTIONS = ("reconcile", "reset", "force", "suspend", "resume", "rollback", "pin", "unpin", "approve", "approve-now")
HELD = ("rollback", "pin", "unpin", "approve", "approve-now")  # change control: a request helmop's kinds act on
HELM_REVISION = re.compile(r"[1-9][0-9]{0,8}")  # what a rollback goes back to
MAX_REVISION = 128  # characters of an approved revision (a digest)
LOGIN = "login"  # what the login form's anti-forgery token is derived from
WAITING_TIMEOUT = 20.0  # seconds to follow what an object waits for (views.why stops looking after its DEADLINE)

log = logging.getLogger(__name__)


def url_of(kind: Kind, namespace: str, name: str) -> str:
    """The page of an object: a path of this UI whatever the names hold (each quoted whole)."""
    where = f"{quote(namespace, safe='')}/" if kind.namespaced else ""
    return f"/{page_of(kind)}/{where}{quote(name, safe='')}"


@dataclass(frozen=True)
class Row:
    kind: Kind
    obj: dict[str, Any]

    @property
    def this(self) -> Resource:
        return Resource(self.obj)

    @property
    def url(self) -> str:
        return url_of(self.kind, self.this.namespace, self.this.name)

    @property
    def health(self) -> str:
        return health(self.obj)

    @property
    def ready(self) -> dict[str, Any]:
        return condition_of(self.obj, "Ready")

    @property
    def revision(self) -> str:
        return revision(self.obj)

    @property
    def age(self) -> str:
        return since(self.this.metadata.get("creationTimestamp"))

    @property
    def changed(self) -> str:
        return str(self.ready.get("lastTransitionTime") or "")

    @property
    def cluster(self) -> str:
        return cluster(self.obj)


@dataclass
class Listing:
    rows: list[Row] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # what the viewer may not read, in the API's words


def _text(request: web.Request, name: str) -> str:
    value = request.query.get(name, "").strip()
    if len(value) > MAX_QUERY:
        raise web.HTTPBadRequest(text=f"?{name}= is longer than {MAX_QUERY} characters")
    return value


def _namespace(request: web.Request) -> str:
    namespace = _text(request, "namespace")
    if namespace and not is_namespace_name(namespace):
        raise web.HTTPBadRequest(text="?namespace= is not a namespace name")
    return namespace


async def _collect(viewer: Viewer, kind: Kind, namespace: str, label: str, out: Listing) -> None:
    """The viewer's objects of ``kind``: in ``namespace``, else in every namespace, else (refused that) in each
    namespace the viewer is known to work in."""
    try:
        out.rows += [Row(kind, o) for o in await viewer.kube.list(kind.path(namespace or None), label)]
        return
    except KubeError as exc:
        if exc.status == 404:  # not served here (its CRD is not installed)
            return
        if exc.status != 403 or namespace or not kind.namespaced or not viewer.namespaces:
            out.refused.append(exc.message)
            return
    for place in viewer.namespaces:
        try:
            out.rows += [Row(kind, o) for o in await viewer.kube.list(kind.path(place), label)]
        except KubeError as exc:
            if exc.status not in (403, 404):
                raise
            if exc.status == 403:
                out.refused.append(exc.message)


async def listing(viewer: Viewer, kinds: list[Kind], namespace: str = "", label: str = "") -> Listing:
    out = Listing()
    await asyncio.gather(*(_collect(viewer, kind, namespace, label, out) for kind in kinds))
    return out


async def events(viewer: Viewer, kinds: list[Kind], namespace: str, field_selector: str = "") -> list[dict[str, Any]]:
    """Events about objects of ``kinds``' groups, newest first, where the viewer may list them."""
    params = {"fieldSelector": field_selector} if field_selector else None
    found: list[dict[str, Any]] = []
    for place in [namespace] if namespace else ["", *viewer.namespaces]:
        path = f"/api/v1/namespaces/{place}/events" if place else "/api/v1/events"
        try:
            found += (await viewer.kube.request("GET", path, params=params)).get("items") or []
        except KubeError as exc:
            if exc.status != 403:
                raise
            continue
        if not place:  # every namespace at once
            break
    groups = {kind.group for kind in kinds}
    found = [e for e in found if str((e.get("involvedObject") or {}).get("apiVersion", "")).rpartition("/")[0]
             in groups]
    return sorted(found, key=last_seen, reverse=True)


def _filtered(rows: list[Row], q: str, wanted: str, on: str) -> list[Row]:
    q = q.lower()
    return [r for r in rows if (not q or q in f"{r.this.namespace}/{r.this.name}".lower())
            and (not wanted or r.health == wanted) and (not on or r.cluster == on)]


def _delivering(kind: Kind) -> bool:
    """helmop's and Flux's kinds that act on a cluster, remote or not (an app kind of the same name does not):
    the kinds under change control too (pins, approvals)."""
    return kind.kind in DELIVERING and (kind in BUILTIN or kind.flux)


def _applies(kind: Kind, action: str) -> bool:
    """Whether ``action`` is one of ``kind``'s: change control is the delivering kinds', a rollback a release's."""
    if action == "rollback":
        return _delivering(kind) and kind.kind == "HelmRelease"
    return action not in HELD or _delivering(kind)


def _form_text(form: Any, name: str, limit: int) -> str:
    value = form.get(name, "")
    value = value.strip() if isinstance(value, str) else ""
    if len(value) > limit:
        raise web.HTTPBadRequest(text=f"{name} is longer than {limit} characters")
    return value


class Pages:
    def __init__(self, access: Access, guard: Guard, feed: Feed, registry: Registry, *, actions: bool,
                 operator_namespace: str | None, log_file: str | None) -> None:
        self.access, self.guard, self.feed, self.registry = access, guard, feed, registry
        self.actions, self.operator_namespace, self.log_file = actions, operator_namespace, log_file
        self.cel = Worker()  # the readyExprs of what an object waits for
        self.templates = jinja2.Environment(loader=jinja2.PackageLoader("helmop.ui"), autoescape=True,
                                            trim_blocks=True, lstrip_blocks=True)
        self.templates.globals.update(healths=HEALTHS, since=since, last_seen=last_seen, url_of=url_of,
                                      page_of=page_of, families=families, local=LOCAL)

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/", self._page(self.overview)), web.get("/graph", self._page(self.graph)),
                web.get("/fleet", self._page(self.fleet)), web.get("/search", self._page(self.search)),
                web.get("/feed", self._page(self.live)),
                web.get("/login", self.login_form), web.post("/login", self.login), web.post("/logout", self.logout),
                web.get("/{plural}", self._page(self.kind_list)),
                web.get("/{plural}/{name}", self._page(self.object)),
                web.get("/{plural}/{namespace}/{name}", self._page(self.object)),
                web.post("/{plural}/{name}/{action}", self._page(self.act)),
                web.post("/{plural}/{namespace}/{name}/{action}", self._page(self.act))]

    async def close(self) -> None:
        await self.cel.close()

    # --- plumbing ------------------------------------------------------------------------------------

    def _page(self, handler: Callable[[web.Request, Viewer], Awaitable[web.StreamResponse]]
              ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def page(request: web.Request) -> web.StreamResponse:
            viewer = await self.access.viewer(request)
            if viewer is None:
                if self.access.login:
                    raise web.HTTPSeeOther("/login?" + urlencode({"next": request.path_qs}))
                raise web.HTTPUnauthorized(text="no viewer")
            try:
                return await handler(request, viewer)
            except KubeError as exc:
                return self.render(request, viewer, "message.html", status=exc.status if exc.status >= 400 else 502,
                                   title="The API server refused", message=exc.message)
        return page

    def render(self, request: web.Request, viewer: Viewer | None, template: str, status: int = 200,
               **context: Any) -> web.Response:
        html = self.templates.get_template(template).render(
            viewer=viewer, csrf=self.guard.csrf(viewer.key if viewer else LOGIN), login=self.access.login,
            actions=self.actions, path=request.path, **{"kinds": self.registry.current, **context})
        return web.Response(text=html, status=status, content_type="text/html")

    async def _kind(self, request: web.Request) -> Kind:
        kind = (await self.registry.kinds()).get(request.match_info["plural"])
        if kind is None:
            raise web.HTTPNotFound(text=f"no such page: {request.path}")
        return kind

    async def _object_ref(self, request: web.Request) -> tuple[Kind, str, str]:
        kind = await self._kind(request)
        namespace, name = request.match_info.get("namespace", ""), request.match_info["name"]
        if kind.namespaced != bool(namespace) or (namespace and not is_namespace_name(namespace)) \
                or not is_object_name(name):
            raise web.HTTPNotFound(text=f"no such page: {request.path}")
        return kind, namespace, name

    # --- pages ---------------------------------------------------------------------------------------

    async def overview(self, request: web.Request, viewer: Viewer) -> web.StreamResponse:
        """What needs a person first (views.attention), then the counts of the kinds that hold anything (the
        others folded: a Flux user's overview does not open on a wall of helmop's empty kinds), then Events."""
        namespace, shown = _namespace(request), await self.registry.kinds()
        kinds = list(shown.values())
        found, recent = await asyncio.gather(listing(viewer, kinds, namespace), events(viewer, kinds, namespace))
        counts: dict[str, dict[str, int]] = {}
        for row in found.rows:
            counts.setdefault(page_of(row.kind), dict.fromkeys(HEALTHS, 0))[row.health] += 1
        held = {page: kind for page, kind in shown.items() if page in counts}
        needs = attention.ordered([(r, n) for r in found.rows if (n := attention.need_of(r.obj)) is not None])
        return self.render(request, viewer, "overview.html", title="Overview", kinds=shown, held=held,
                           empty=[(page, kind) for page, kind in shown.items() if page not in counts],
                           counts=counts, attention=needs[:ATTENTION_SHOWN], more=len(needs) - ATTENTION_SHOWN,
                           recent=recent[:RECENT], refused=found.refused, namespace=namespace, total=len(found.rows))

    async def search(self, request: web.Request, viewer: Viewer) -> web.StreamResponse:
        """Every kind the viewer may list, by name or namespace (a substring of namespace/name, as a list's
        search) and label selector (the API server's), grouped by kind, ``SEARCH_SHOWN`` of each."""
        namespace, q, label = _namespace(request), _text(request, "q"), _text(request, "label")
        groups: list[tuple[str, Kind, list[Row]]] = []
        found = Listing()
        if q or label:
            shown = await self.registry.kinds()
            found = await listing(viewer, list(shown.values()), namespace, label)  # a bad selector: `refused`
            matched: dict[str, list[Row]] = {}
            for row in _filtered(found.rows, q, "", ""):
                matched.setdefault(page_of(row.kind), []).append(row)
            groups = [(page, kind, sorted(matched[page], key=lambda r: (r.this.namespace, r.this.name)))
                      for page, kind in shown.items() if page in matched]
        return self.render(request, viewer, "search.html", title="Search", q=q, label=label, namespace=namespace,
                           groups=groups, shown_each=SEARCH_SHOWN, refused=list(dict.fromkeys(found.refused)),
                           query=urlencode({k: v for k, v in (("q", q), ("label", label), ("namespace", namespace))
                                            if v}),
                           matches=sum(len(rows) for _, _, rows in groups))

    async def kind_list(self, request: web.Request, viewer: Viewer) -> web.StreamResponse:
        kind = await self._kind(request)
        namespace, q, wanted, label = (_namespace(request), _text(request, "q"), _text(request, "health"),
                                       _text(request, "label"))
        on = _text(request, "cluster") if _delivering(kind) else ""
        if wanted and wanted not in HEALTHS:
            raise web.HTTPBadRequest(text=f"?health= is one of {', '.join(HEALTHS)}")
        found = await listing(viewer, [kind], namespace, label)  # a bad selector: the API's 400 among `refused`
        rows = sorted(_filtered(found.rows, q, wanted, on), key=lambda r: (r.this.namespace, r.this.name))
        # the Cluster column and filter once anything of the kind delivers to a remote (as `helmop get`)
        names = sorted({r.cluster for r in found.rows} | ({on} if on else set()))
        remote = bool(on) or any(name != LOCAL for name in names)
        return self.render(request, viewer, "list.html", title=kind.kind, kind=kind, rows=rows,
                           refused=found.refused, namespace=namespace, q=q, wanted=wanted, label=label, on=on,
                           clusters=names if remote and _delivering(kind) else [])

    async def object(self, request: web.Request, viewer: Viewer, refused: str = "") -> web.StreamResponse:
        kind, namespace, name = await self._object_ref(request)
        obj = await viewer.kube.get(kind.path(namespace, name))
        if obj is None:
            return self.render(request, viewer, "message.html", status=404, title="Not found",
                               message=f"{kind.kind} {namespace + '/' if namespace else ''}{name} does not exist")
        row, state = Row(kind, obj), status_of(obj) or Status()
        selector = f"involvedObject.apiVersion={kind.api_version},involvedObject.kind={kind.kind}," \
                   f"involvedObject.name={name}"
        ref = (kind.api_version, kind.kind, namespace, name)
        # (a remote cluster's objects are not read by the UI: the inventory is shown as its status lists it)
        inventory, about, (waiting, causes) = await asyncio.gather(
            tree(viewer.kube, ref), events(viewer, [kind], namespace, selector) if namespace else _none(),
            waiting_for(viewer.kube, ref, self.cel))
        context: dict[str, Any] = {"controlled": _delivering(kind), "may_approve": await self._may_approve(
            viewer, kind, namespace, name, state)}
        if isinstance(state, HelmReleaseStatus):  # helmop's or Flux's
            context |= await self._release(request, viewer, obj)
        return self.render(request, viewer, "object.html", status=403 if refused else 200,
                           title=f"{kind.kind} {name}", kind=kind, row=row, refused=refused, namespace=namespace,
                           state=state, artifact=artifact_of(state), webhook=_webhook(state), source=source(obj),
                           children=inventory.children, target=inventory.cluster, events=about,
                           waiting=waiting, root_causes=causes,
                           logs=await self._logs(viewer, kind, namespace, name), spec=_spec(obj),
                           flash=_text(request, "done"), **context)

    async def _release(self, request: web.Request, viewer: Viewer, obj: dict[str, Any]) -> dict[str, Any]:
        history = read(HelmReleaseStatus, obj).history
        shown: dict[str, Any] = {"history": history, "diff": None, "diff_refused": "",
                                 "revisions": sorted({h.revision for h in history if h.revision > 0}),
                                 "current": history[0].revision if history else 0}  # (newest first)
        older, newer = _text(request, "from"), _text(request, "to")
        if older.isdigit() and newer.isdigit():
            shown |= {"older": int(older), "newer": int(newer)}
            try:
                shown["diff"] = await values_diff(viewer.kube, obj, int(older), int(newer))
            except requests.Refused as exc:
                shown["diff_refused"] = str(exc)
        return shown

    async def _may_approve(self, viewer: Viewer, kind: Kind, namespace: str, name: str, state: Status) -> bool:
        """Whether to offer the viewer an approval: something waits for one and RBAC lets them give it (asked only
        then; an answer the API server does not give offers nothing)."""
        if not (self.actions and isinstance(state, Controlled) and state.pending_revision and _delivering(kind)):
            return False
        try:
            return await requests.may_approve(viewer.kube, kind, namespace, name)
        except KubeError:
            return False

    async def _logs(self, viewer: Viewer, kind: Kind, namespace: str, name: str) -> list[str] | None:
        """The operator's last lines about the object (None: no operator log the viewer may read)."""
        if self.log_file:
            try:
                with Path(self.log_file).open("rb") as handle:  # the end of the file only: it may be large
                    handle.seek(max(0, handle.seek(0, 2) - (1 << 20)))
                    lines = handle.read().decode(errors="replace").splitlines()
            except OSError:
                return None
        else:
            pods = await operator_logs.operator_pods(viewer.kube, self.operator_namespace)
            if not pods:
                return None
            lines = [line async for line in operator_logs.pod_lines(viewer.kube, pods, follow=False, tail=500)]
        return [operator_logs.readable(line) for line in lines
                if operator_logs.about(line, kind.kind, namespace, name)][-LOG_LINES:]

    async def graph(self, request: web.Request, viewer: Viewer) -> web.StreamResponse:
        namespace = _namespace(request)
        drawn = [k for k in (await self.registry.kinds()).values() if k.kind not in graph.NOT_DRAWN]
        found = await listing(viewer, drawn, namespace)
        rows = found.rows[:graph.MAX_NODES]
        return self.render(request, viewer, "graph.html", title="Dependencies", namespace=namespace,
                           layout=graph.layout([(r.kind, r.obj) for r in rows]), refused=found.refused,
                           box=(graph.BOX_W, graph.BOX_H), cut=len(found.rows) > graph.MAX_NODES)

    async def fleet(self, request: web.Request, viewer: Viewer) -> web.StreamResponse:
        """Each cluster the viewer's HelmReleases, ConfigSyncs and Kustomizations deliver to (views.fleet)."""
        namespace = _namespace(request)
        kinds = [k for k in (await self.registry.kinds()).values() if _delivering(k)]
        found = await listing(viewer, kinds, namespace)
        return self.render(request, viewer, "fleet.html", title="Fleet", namespace=namespace,
                           clusters=fleet([(r.kind, r.obj) for r in found.rows]), refused=found.refused)

    async def live(self, request: web.Request, viewer: Viewer) -> web.StreamResponse:
        return await self.feed.stream(request, viewer)

    # --- actions and logging in ------------------------------------------------------------------------

    async def act(self, request: web.Request, viewer: Viewer) -> web.StreamResponse:
        kind, namespace, name = await self._object_ref(request)
        action = request.match_info["action"]
        form = await request.post()
        self.guard.check_form(request, viewer.key, str(form.get("csrf", "")))
        if action not in ACTIONS or not _applies(kind, action):
            raise web.HTTPNotFound(text=f"no such action: {action}")
        if not self.actions:
            raise web.HTTPForbidden(text="this UI is read-only (start it with --actions to allow actions)")
        reason, revision = _form_text(form, "reason", MAX_TEXT), _form_text(form, "revision", MAX_REVISION)
        if action == "rollback" and not HELM_REVISION.fullmatch(revision):
            raise web.HTTPBadRequest(text="the revision to roll back to is a helm revision: a number, 1 or more")
        try:
            await self._ask(viewer, kind, namespace, name, action, reason, revision)
        except (requests.Refused, KubeError) as exc:
            return await self.object(request, viewer, refused=str(exc) if isinstance(exc, requests.Refused)
                                     else exc.message)
        raise web.HTTPSeeOther(url_of(kind, namespace, name) + "?" + urlencode({"done": action}))

    async def _ask(self, viewer: Viewer, kind: Kind, namespace: str, name: str, action: str, reason: str,
                   revision: str) -> None:
        """Make the viewer's request, in their name as the UI knows it (the name the API server gave it, so no
        SelfSubjectReview): the CLI's requests, the same annotations."""
        if action in ("suspend", "resume"):
            await requests.set_suspended(viewer.kube, kind, namespace, name, action == "suspend", reason=reason,
                                         by=viewer.name)
            return
        obj = await viewer.kube.get(kind.path(namespace, name))
        if obj is None:
            raise requests.Refused(f"{kind.kind} {namespace}/{name} does not exist")
        if action not in HELD:
            await requests.ask_reconcile(viewer.kube, kind, obj, reset=action == "reset", force=action == "force",
                                         reason=reason, by=viewer.name)
            return
        if action in ("approve", "approve-now"):
            await _approvable(viewer, kind, obj, revision)
        elif action != "rollback":
            revision = ""  # a pin holds what is there, an unpin ends it: no revision of the viewer's
        await requests.ask(viewer.kube, kind, namespace, name, Asked(action), reason=reason, revision=revision,
                           by=viewer.name)

    async def login_form(self, request: web.Request) -> web.StreamResponse:
        if not self.access.login:
            raise web.HTTPSeeOther("/")
        return self.render(request, None, "login.html", title="Log in", next=local_path(request.query.get("next", "/")),
                           failed="")

    async def login(self, request: web.Request) -> web.StreamResponse:
        if not self.access.login:
            raise web.HTTPSeeOther("/")
        form = await request.post()
        token, after = str(form.get("token", "")).strip(), local_path(str(form.get("next", "/")))
        # No viewer yet to derive a form token from: the same one for everyone, so what stops another site's
        # form here is the browser's word on where it came from (Origin, Sec-Fetch-Site).
        self.guard.check_form(request, LOGIN, str(form.get("csrf", "")))
        if await self.access.of_token(token) is None:
            return self.render(request, None, "login.html", status=401, title="Log in", next=after,
                               failed="the API server does not know this token")
        response = web.HTTPSeeOther(after)
        response.set_cookie(COOKIE, token, httponly=True, samesite="Strict", path="/",
                            secure=request.secure or request.headers.get("X-Forwarded-Proto") == "https")
        raise response

    async def logout(self, request: web.Request) -> web.StreamResponse:
        viewer = await self.access.viewer(request)
        form = await request.post()
        self.guard.check_form(request, viewer.key if viewer else LOGIN, str(form.get("csrf", "")))
        response = web.HTTPSeeOther("/login")
        response.del_cookie(COOKIE, path="/")
        raise response


async def _approvable(viewer: Viewer, kind: Kind, obj: dict[str, Any], revision: str) -> None:
    """Refuse an approval the viewer may not give, or of another revision than the one waiting now: the viewer
    approves what their page showed them, never what came after."""
    this = Resource(obj)
    if not await requests.may_approve(viewer.kube, kind, this.namespace, this.name):
        raise requests.Refused(f'forbidden: {viewer.name} may not approve {kind.kind} {this.namespace}/{this.name} '
                               f'(RBAC verb "approve" on {kind.plural}.{kind.group} is needed)')
    waiting = requests.waiting_revision(obj)
    if not waiting:
        raise requests.Refused(f"nothing waits for an approval on {kind.kind} {this.namespace}/{this.name} now")
    if revision != waiting:
        raise requests.Refused("the revision waiting changed: look again")


async def _none() -> list[dict[str, Any]]:
    return []


async def waiting_for(kube: Kube, ref: Ref, cel: Worker) -> tuple[Link, list[Link]]:
    """What the object waits for (views.why) and its root causes; when that cannot be followed, one link saying
    why, in its section: the rest of the page (state, inventory, events) shows all the same."""
    try:
        async with asyncio.timeout(WAITING_TIMEOUT):
            top = await why(kube, ref, cel)
        return top, root_causes(top)
    except KubeError as exc:
        note = exc.message
    except TimeoutError:
        note = f"not followed within {WAITING_TIMEOUT:g} s"
    except Exception:  # a defect, not the viewer's to read: the log has it
        log.exception("following what %s waits for failed", ref)
        note = "it could not be followed (the UI's log says why)"
    return Link(ref, ERROR, waits_for=[Link(ref, ERROR, "NotFollowed", note, "not followed")]), []


def _webhook(state: Status) -> str:
    """Where a sender posts: a Receiver's path (Flux's), a GitRepository's push webhook (helmop's)."""
    return state.webhook_path if isinstance(state, ReceiverStatus | GitRepositoryStatus) else ""


def _spec(obj: dict[str, Any]) -> str:
    text = yaml.safe_dump(Resource(obj).spec, sort_keys=False, default_flow_style=False)
    return text if len(text) <= SPEC_SHOWN else text[:SPEC_SHOWN] + "\n# … (cut)"
