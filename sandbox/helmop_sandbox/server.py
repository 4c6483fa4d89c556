"""HTTP front of the sandbox: Kubernetes REST paths, discovery, OpenAPI, watches, tables.

Maps each request onto :class:`.apiserver.ApiServer` and writes what client-go, kopf and the
Python client expect back: JSON bodies (whatever the Accept header prefers, JSON is always
allowed), ``kind: Status`` errors, chunked watch streams, ``Warning`` headers.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import dataclasses
import json
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from . import conversion, discovery, protobuf, reviews, tables
from .admitting import Admission, Request, admit
from .apiserver import ApiServer, DeleteOptions, WriteOptions, parse_body
from .errors import ApiError, bad_request
from .faults import LOST_REPLY, Decision, Faults
from .kinds import ResourceType
from .network import Network
from .openapi import OpenApi
from .patching import json_patch, merge_patch
from .rbac import RBAC, Attributes, Authenticator, Authorizer, Identity
from .selectors import field_matcher, label_matcher, required_labels, single_name
from .store import Event, Obj, VersionCache, Watcher, clone

log = logging.getLogger(__name__)
CUT_AFTER = web.RequestKey("cut_after", float)  # seconds into a watch after which a fault cuts it

PATCH_TYPES = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
    "application/apply-patch+json": "apply",
}
_PUBLIC = {"/version", "/healthz", "/livez", "/readyz"}
_VERSION = {"major": "1", "minor": "35", "gitVersion": "v1.35.2-helmop-sandbox", "gitCommit": "sandbox",
            "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.25",
            "compiler": "gc", "platform": "linux/amd64"}


@dataclass
class Target:
    rt: ResourceType
    namespace: str  # "" for cluster-scoped or all namespaces
    name: str = ""
    subresource: str = ""
    all_namespaces: bool = False


def _name_and_subresource(parts: list[str]) -> tuple[str, str]:
    return (parts[0] if parts else "", parts[1] if len(parts) > 1 else "")


MAX_REQUEST_BYTES = 3 * 1024 * 1024  # the API server's limit on a request body
# Resources whose storage sets ReturnDeletedObject: a DELETE answers the object, not a Status.
RETURNS_DELETED = {("", "pods"), ("", "services"), ("", "serviceaccounts"), ("storage.k8s.io", "storageclasses")}
_TRUE, _FALSE = {"1", "t", "T", "TRUE", "true", "True"}, {"0", "f", "F", "FALSE", "false", "False"}


def _flag(query: Any, name: str) -> bool:
    """A boolean query parameter as the API server reads it (Go's strconv.ParseBool): the Python client
    sends ``watch=True``; anything else is 400."""
    value = query.get(name)
    if value is None or value == "" or value in _FALSE:
        return False
    if value in _TRUE:
        return True
    raise bad_request(f'invalid boolean value for "{name}": {value!r}')


def _metadata_only(request: web.Request, *, listing: bool) -> str:
    """The apiVersion of the metadata-only form the client asked for ("" for whole objects), as the API
    server negotiates it: the first JSON media type of the Accept header that it can serve wins; asking
    for PartialObjectMetadata of a list (or a ...List of one object) is 406 NotAcceptable."""
    for media in request.headers.get("Accept", "").split(","):
        kind, params = media.strip().split(";")[0], dict(
            p.strip().partition("=")[::2] for p in media.split(";")[1:])
        if kind not in ("application/json", "*/*"):
            continue  # protobuf and others: the sandbox answers JSON, so a later choice decides
        wanted = params.get("as", "")
        if not wanted:
            return ""
        if wanted not in ("PartialObjectMetadata", "PartialObjectMetadataList"):
            continue  # a Table, handled by its own negotiation
        if params.get("g") != "meta.k8s.io" or params.get("v") not in ("v1", "v1beta1"):
            continue
        if (wanted == "PartialObjectMetadataList") != listing:
            expected = "is not a list" if not listing else "is a list"
            raise ApiError("NotAcceptable", f"you requested {wanted}, but the requested object {expected}")
        return f"meta.k8s.io/{params['v']}"
    return ""


def _as_new(obj: Obj) -> Obj:
    """A dry-run result as a body to create: without what the server sets."""
    meta = {k: v for k, v in obj["metadata"].items()
            if k not in ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")}
    return {**obj, "metadata": meta}


def _items(rt: ResourceType, objs: list[Obj]) -> list[Obj]:
    """A list's items as kube-apiserver writes them: built-in kinds without apiVersion and kind (their
    typed list carries them, kubernetes/kubernetes#3030), custom resources with."""
    if rt.custom:
        return objs
    return [{k: v for k, v in obj.items() if k not in ("apiVersion", "kind")} for obj in objs]


def _partial(obj: Obj, api_version: str) -> Obj:
    return {"kind": "PartialObjectMetadata", "apiVersion": api_version, "metadata": obj["metadata"]}


_HTML_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def encode_json(body: Any) -> bytes:
    """JSON as the API server's serializer (Go's json.Encoder) writes it: compact, UTF-8, HTML-safe
    escapes, one trailing newline. Clients that compare bodies byte for byte see no difference."""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).translate(_HTML_SAFE).encode() + b"\n"


def _encode_list(body: Obj) -> bytes:
    """A list reply, its items' JSON spliced in from a cache keyed by uid and resourceVersion: informers
    and helm's status watchers list the same unchanged objects over and over (kube-apiserver caches
    serializations for the same reason)."""
    head = encode_json({k: v for k, v in body.items() if k != "items"})
    items = b",".join(_item_json(item) for item in body.get("items") or [])
    return head[:-2] + b',"items":[' + items + b"]}\n"


def _item_json(item: Obj) -> bytes:
    meta = item.get("metadata") or {}
    if meta.get("uid") is None or meta.get("resourceVersion") is None:
        return encode_json(item)[:-1]
    key = ("json", meta["uid"], meta["resourceVersion"], item.get("apiVersion"), item.get("kind"))
    return _SERIALIZED.get(key, lambda: encode_json(item)[:-1])


_SERIALIZED = VersionCache(50_000)


def _json(body: Any, status: int = 200, warnings: list[str] | None = None) -> web.Response:
    data = _encode_list(body) if isinstance(body, dict) and isinstance(body.get("items"), list) else encode_json(body)
    return web.Response(body=data, status=status, content_type="application/json", headers=_warnings(warnings))


def _warnings(warnings: list[str] | None) -> dict[str, str]:
    return {"Warning": ", ".join(f'299 - {json.dumps(w)}' for w in warnings)} if warnings else {}


def _reply(request: web.Request, body: Obj, status: int = 200, warnings: list[str] | None = None) -> web.Response:
    """An object or list in the form the client prefers: protobuf for typed clients (built-in kinds the
    wire table fully covers), JSON otherwise, as the API server negotiates."""
    if protobuf.wants(request.headers.get("Accept", "")):
        try:
            payload = protobuf.encode(body)
        except (protobuf.Unencodable, ApiError):
            pass
        else:
            return web.Response(body=payload, status=status, content_type=protobuf.MEDIA_TYPE,
                                headers=_warnings(warnings))
    return _json(body, status, warnings)


def _error(exc: ApiError) -> web.Response:
    reply = _json(exc.status(), exc.code)
    if "retryAfterSeconds" in exc.details:
        reply.headers["Retry-After"] = str(exc.details["retryAfterSeconds"])
    return reply


class HttpApi:
    def __init__(self, api: ApiServer, token: str, *, bookmark_interval: float = 10.0, faults: Faults | None = None,
                 signing_key: bytes | None = None, cluster_network: bool = True) -> None:
        self.api = api
        self.auth = Authenticator(token, signing_key) if signing_key else Authenticator(token)
        self.faults = faults
        self.network = Network(api.store, api.selection, cluster_network)
        self.admission = Admission(api.store, self.network)
        # who asked for what, as an audit log would: tests use it to show that every RBAC rule is
        # needed by something a client really did
        self.audit: deque[tuple[str, Attributes]] = deque(maxlen=200_000)
        self.served = 0  # resource requests authorized since the start (the audit keeps only the latest)
        self.authz = Authorizer(api.store, self._audited)
        self.openapi = OpenApi(api.registry)
        self.bookmark_interval = bookmark_interval
        self.address = ""
        self._streams: set[web.StreamResponse] = set()
        self.stopping = asyncio.Event()
        # aggregated discovery documents by (version, core, registry revision): every helm process asks for both
        self._discovered: dict[tuple[str, bool, int], bytes] = {}

    def _audited(self, entry: tuple[str, Attributes]) -> None:
        self.audit.append(entry)
        self.served += 1

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            who = None
            if request.path not in _PUBLIC:
                who = self.auth.identify(request.headers.get("Authorization"))
                if who is None:
                    raise ApiError("Unauthorized", "Unauthorized")
                who = self.authz.impersonate(who, request.headers.get("Impersonate-User"),
                                             request.headers.getall("Impersonate-Group", []))
            return await self._route(request, who)
        except ApiError as exc:
            return _error(exc)
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception as exc:  # a sandbox bug must still answer like an API server
            log.exception("sandbox: internal error on %s %s", request.method, request.path_qs)
            return _error(ApiError("InternalError", f"sandbox internal error: {exc!r}"))

    # --- routing -----------------------------------------------------------------------------------

    async def _route(self, request: web.Request, who: Identity | None) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        if request.path in ("/healthz", "/livez", "/readyz"):
            return web.Response(text="ok")
        if request.path == "/version":
            return _json(_VERSION)
        if parts[:1] == ["openapi"]:
            return self._openapi(request, parts)
        if parts in (["api"], ["apis"]):
            return self._discovery(request, core=parts == ["api"])
        if parts[:1] == ["apis"] and len(parts) == 2:
            group = next((g for g in discovery.group_list(self.api.registry)["groups"] if g["name"] == parts[1]),
                         None)
            if group is None:
                raise ApiError("NotFound", "the server could not find the requested resource")
            return _json({"kind": "APIGroup", "apiVersion": "v1", **group})
        if parts[:1] == ["api"] and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError("NotFound", "the server could not find the requested resource")
        if not rest:
            resource_list = discovery.resource_list(self.api.registry, group, version)
            if resource_list is None:
                raise ApiError("NotFound", "the server could not find the requested resource")
            return _json(resource_list)
        if reviews.is_review(group, version, rest):
            if request.method != "POST" or who is None:
                raise ApiError("MethodNotAllowed", "reviews can only be created")
            return _json(reviews.answer(self.authz, who, group, version, rest, await self._body(request),
                                        self.auth.identify), 201)
        target = self._target(group, version, rest)
        attributes = self._attributes(request, target)
        if who is not None:
            self.authz.check(who, attributes)
        converted = [*conversion.deprecation(self.api.store, target.rt),
                     *conversion.check(self.api.store, self.network, target.rt, request.method)] \
            if target.rt.custom else []
        if self.faults is None:
            response = await self._serve(request, target, who)
        else:
            response = await self._with_faults(request, target, who, attributes.verb)
        if not response.prepared:  # a watch's stream has started: its headers are sent
            for warning in converted:
                response.headers.add("Warning", _warnings([warning])["Warning"])
        return response

    async def _with_faults(self, request: web.Request, t: Target, who: Identity | None,
                           verb: str) -> web.StreamResponse:
        body = await request.read() if verb in ("patch", "delete") else b""  # aiohttp keeps it for the handler
        preconditioned = verb == "update" or b'"resourceVersion"' in body or b'"preconditions"' in body
        decision = self.faults.decide(verb, t.rt.plural, t.namespace, t.name,
                                      preconditioned=preconditioned) if self.faults else Decision()
        if decision.delay:
            await asyncio.sleep(decision.delay)
        if decision.error is not None:
            raise decision.error
        if decision.cut_after is not None:
            request[CUT_AFTER] = decision.cut_after
        response = await self._serve(request, t, who)
        if decision.lose_reply and response.status < 300:
            raise LOST_REPLY
        return response

    @staticmethod
    def _attributes(request: web.Request, t: Target) -> Attributes:
        method = request.method
        if method == "GET":
            verb = "watch" if _flag(request.query, "watch") else ("get" if t.name else "list")
        elif method == "DELETE":
            verb = "delete" if t.name else "deletecollection"
        else:
            verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())
        return Attributes(verb, t.rt.group, t.rt.plural, t.subresource, t.namespace, t.name)

    def _target(self, group: str, version: str, rest: list[str]) -> Target:
        def lookup(plural: str) -> ResourceType:
            rt = self.api.registry.get(group, version, plural)
            if rt is None:
                raise ApiError("NotFound", "the server could not find the requested resource")
            return rt

        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            rt = lookup(rest[2])
            if not rt.namespaced:
                raise ApiError("NotFound", "the server could not find the requested resource")
            return Target(rt, rest[1], *_name_and_subresource(rest[3:5]))
        rt = lookup(rest[0])
        if len(rest) > 3:
            raise ApiError("NotFound", "the server could not find the requested resource")
        if rt.namespaced and len(rest) > 1:
            raise ApiError("NotFound", "the server could not find the requested resource")
        return Target(rt, "", *_name_and_subresource(rest[1:3]), all_namespaces=rt.namespaced)

    # --- discovery ---------------------------------------------------------------------------------

    def _discovery(self, request: web.Request, *, core: bool) -> web.Response:
        version = discovery.aggregated_version(request.headers.get("Accept", ""))
        if version is None:
            if core:
                return _json({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": self.address}]})
            return _json(discovery.group_list(self.api.registry))
        key = (version, core, self.api.registry.revision)  # the document changes only with the types served
        body = self._discovered.get(key)
        if body is None:
            self._discovered = {k: v for k, v in self._discovered.items() if k[2] == key[2]}
            body = self._discovered[key] = encode_json(discovery.aggregated(self.api.registry, version, core=core))
        return web.Response(body=body, headers={"Content-Type": discovery.media_type(version), "Vary": "Accept"})

    def _openapi(self, request: web.Request, parts: list[str]) -> web.Response:
        accept = request.headers.get("Accept", "*/*")
        if parts == ["openapi", "v2"]:
            if "json" not in accept and "*/*" not in accept:
                # Only the protobuf form was asked for; clients fall back to their built-in types.
                raise ApiError("NotAcceptable", "the sandbox serves /openapi/v2 as JSON only")
            return web.Response(body=self.openapi.v2(), content_type="application/json")
        if parts == ["openapi", "v3"]:
            return web.Response(body=self.openapi.v3_root(), content_type="application/json")
        if len(parts) >= 4 and parts[:2] == ["openapi", "v3"]:
            gv = "/".join(parts[3:]) if parts[2] == "apis" else parts[3]
            if not self.openapi.has_group_version(gv):
                raise ApiError("NotFound", "the server could not find the requested resource")
            return web.Response(body=self.openapi.v3_group_version(gv), content_type="application/json")
        raise ApiError("NotFound", "the server could not find the requested resource")

    # --- resources ---------------------------------------------------------------------------------

    async def _body(self, request: web.Request) -> Any:
        raw = await request.read()  # read whole (up to client_max_size), so the connection stays usable
        if len(raw) > MAX_REQUEST_BYTES:
            raise ApiError("RequestEntityTooLarge", f"Request entity too large: limit is {MAX_REQUEST_BYTES}")
        ctype = request.content_type
        if ctype == "application/vnd.kubernetes.protobuf":
            return protobuf.decode(raw)
        return parse_body(raw, ctype)

    def _write_options(self, request: web.Request) -> WriteOptions:
        q = request.query
        validation = q.get("fieldValidation", "Warn")
        if validation not in ("Strict", "Warn", "Ignore"):
            raise bad_request(f"fieldValidation must be one of Strict, Warn, Ignore, not {validation!r}")
        agent = request.headers.get("User-Agent", "unknown").split("/")[0]
        manager = q.get("fieldManager") or ("" if request.content_type.startswith("application/apply-patch")
                                            else agent)
        return WriteOptions(manager=manager, dry_run=q.get("dryRun") == "All", field_validation=validation,
                            force=_flag(q, "force"))

    async def _serve(self, request: web.Request, t: Target, who: Identity | None) -> web.StreamResponse:
        method, q = request.method, request.query
        if t.subresource and t.subresource not in t.rt.subresources:
            raise ApiError("NotFound", "the server could not find the requested resource")
        if t.subresource == "scale":
            return await self._scale(request, t)
        if t.subresource == "token":
            return self._token_request(t) if method == "POST" else _error(ApiError("MethodNotAllowed", "POST only"))
        if method == "GET" and _flag(q, "watch"):
            return await self._watch(request, t)
        if not t.name:
            if method == "GET":
                return self._list(request, t)
            if method == "POST":
                opts = self._write_options(request)
                body = await self._body(request)
                self._no_escalation(who, t, body)
                if self.admission.active():
                    mutated = await self._admitted(t, who, "CREATE", opts, None, lambda o: self.api.create(
                        t.rt, t.namespace, clone(body), o))
                    body = _as_new(mutated) if mutated is not None else body
                obj = self.api.create(t.rt, t.namespace, body, opts)
                return _reply(request, obj, 201, opts.warnings)
            if method == "DELETE" and t.rt.storage_key != ("", "namespaces"):
                return await self._delete_collection(request, t)
            raise ApiError("MethodNotAllowed", f"{method} is not supported on a collection")
        if method == "GET":
            return self._render(request, t, self.api.get(t.rt, t.namespace, t.name))
        if method == "PUT":
            opts = self._write_options(request)
            body = await self._body(request)
            self._no_escalation(who, t, body)
            if self.admission.active():
                current = self.api.get(t.rt, t.namespace, t.name)
                mutated = await self._admitted(t, who, "UPDATE", opts, current, lambda o: self.api.update(
                    t.rt, t.namespace, t.name, clone(body), o, t.subresource))
                body = mutated if mutated is not None else body
            obj = self.api.update(t.rt, t.namespace, t.name, body, opts, t.subresource)
            return _reply(request, obj, 200, opts.warnings)
        if method == "PATCH":
            patch_type = PATCH_TYPES.get(request.content_type)
            if patch_type is None:
                raise ApiError("UnsupportedMediaType", f"the body of the request was in an unknown format - "
                               f"accepted media types include: {', '.join(PATCH_TYPES)}")
            opts = self._write_options(request)
            existed = self.api.store.get(t.rt.storage_key, t.namespace, t.name) is not None
            body = await self._body(request)
            if who is not None and t.rt.group == RBAC:  # judge what the patch would make, before making it
                trial = self.api.patch(t.rt, t.namespace, t.name, patch_type, clone(body),
                                       dataclasses.replace(opts, dry_run=True, warnings=[]), t.subresource)
                self._no_escalation(who, t, trial)
            if self.admission.active():
                stored = self.api.store.get(t.rt.storage_key, t.namespace, t.name)
                before = self.api.view(stored, t.rt) if stored is not None else None
                mutated = await self._admitted(
                    t, who, "UPDATE" if existed else "CREATE", opts, before,
                    lambda o: self.api.patch(t.rt, t.namespace, t.name, patch_type, clone(body), o,
                                             t.subresource))
                if mutated is not None:  # a webhook changed the result: store that result
                    obj = (self.api.update(t.rt, t.namespace, t.name, mutated, opts, t.subresource) if existed
                           else self.api.create(t.rt, t.namespace, _as_new(mutated), opts))
                    return _reply(request, obj, 200 if existed else 201, opts.warnings)
            obj = self.api.patch(t.rt, t.namespace, t.name, patch_type, body, opts, t.subresource)
            return _reply(request, obj, 200 if existed or patch_type != "apply" else 201, opts.warnings)
        if method == "DELETE":
            options = await self._delete_options(request)
            if self.admission.active():
                current = self.api.get(t.rt, t.namespace, t.name)
                await admit(self.admission, Request("DELETE", t.rt, t.namespace, t.name, None, current, who,
                                                    options.dry_run, t.subresource))
            obj, gone = self.api.delete(t.rt, t.namespace, t.name, options)
            if gone and t.rt.storage_key not in RETURNS_DELETED:
                meta = obj["metadata"]
                return _json({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                              "details": {"name": meta["name"], "group": t.rt.group, "kind": t.rt.plural,
                                          "uid": meta.get("uid")}})
            return _reply(request, obj)
        raise ApiError("MethodNotAllowed", f"{method} is not supported")

    async def _admitted(self, t: Target, who: Identity | None, operation: str, opts: WriteOptions, old: Obj | None,
                        write: Callable[[WriteOptions], Obj]) -> Obj | None:
        """Admission of the object the write would store (found by a dry run of it); the mutated object
        when a webhook changed it, else None. Denials raise."""
        candidate = write(dataclasses.replace(opts, dry_run=True, warnings=[]))
        req = Request(operation, t.rt, t.namespace, candidate["metadata"].get("name", t.name), candidate, old, who,
                      opts.dry_run, t.subresource)
        final = await admit(self.admission, req)
        opts.warnings.extend(req.warnings)
        return final if final is not candidate else None

    def _no_escalation(self, who: Identity | None, t: Target, obj: Any) -> None:
        if who is not None and t.rt.group == RBAC and isinstance(obj, dict):
            reviews.check_escalation(self.authz, who, t.rt.plural, t.namespace, obj)

    def _token_request(self, t: Target) -> web.Response:
        """TokenRequest: a token for the ServiceAccount (`kubectl create token`)."""
        self.api.get(t.rt, t.namespace, t.name)  # 404 for an unknown ServiceAccount
        token = self.auth.issue(t.namespace, t.name)
        return _json({"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
                      "metadata": {"name": t.name, "namespace": t.namespace},
                      "spec": {"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": 3600},
                      "status": {"token": token, "expirationTimestamp": "2099-01-01T00:00:00Z"}}, 201)

    async def _scale(self, request: web.Request, t: Target) -> web.Response:
        if request.method == "GET":
            return _json(self.api.get_scale(t.rt, t.namespace, t.name))
        body = await self._body(request)
        if request.method == "PATCH":
            patch_type = PATCH_TYPES.get(request.content_type)
            current = self.api.get_scale(t.rt, t.namespace, t.name)
            if patch_type == "json":
                body = json_patch(current, body)
            elif patch_type in ("merge", "strategic"):
                body = merge_patch(current, body)
            else:
                raise ApiError("UnsupportedMediaType", "the scale subresource takes JSON or merge patches")
            body.get("metadata", {}).pop("resourceVersion", None)
        elif request.method != "PUT":
            raise ApiError("MethodNotAllowed", f"{request.method} is not supported on scale")
        return _json(self.api.set_scale(t.rt, t.namespace, t.name, body, self._write_options(request)))

    async def _delete_options(self, request: web.Request) -> DeleteOptions:
        body = await self._body(request) if request.can_read_body else None
        body = body if isinstance(body, dict) else {}
        q = request.query
        pre = body.get("preconditions") or {}
        policy = q.get("propagationPolicy") or body.get("propagationPolicy")
        orphan = body.get("orphanDependents", q.get("orphanDependents"))
        if policy is None and orphan in (True, "true"):
            policy = "Orphan"
        if policy not in (None, "Foreground", "Background", "Orphan"):
            raise bad_request(f"propagationPolicy {policy!r} is not one of Foreground, Background, Orphan")
        dry = q.get("dryRun") == "All" or "All" in (body.get("dryRun") or [])
        return DeleteOptions(policy, pre.get("uid"), pre.get("resourceVersion"), dry)

    async def _delete_collection(self, request: web.Request, t: Target) -> web.Response:
        options = await self._delete_options(request)
        objs, rv = self._select(request, t)
        for obj in objs:
            with contextlib.suppress(ApiError):
                self.api.delete(t.rt, obj["metadata"].get("namespace", ""), obj["metadata"]["name"], options)
        return _reply(request, {"kind": t.rt.list_kind, "apiVersion": t.rt.api_version,
                                "metadata": {"resourceVersion": rv}, "items": _items(t.rt, objs)})

    def _select(self, request: web.Request, t: Target) -> tuple[list[Obj], str]:
        q = request.query
        labels = label_matcher(q.get("labelSelector"))
        fields = field_matcher(q.get("fieldSelector"), t.rt.kind)
        namespace = None if t.all_namespaces else t.namespace
        name = single_name(q.get("fieldSelector"))
        if name is not None and (namespace is not None or not t.rt.namespaced):
            obj = self.api.store.get(t.rt.storage_key, namespace or "", name)
            found = [self.api.view(obj, t.rt)] if obj and (labels is None or labels(obj)) else []
            return found, str(self.api.store.rv)
        return self.api.list_objects(t.rt, namespace, labels, fields, required_labels(q.get("labelSelector")))

    def _list(self, request: web.Request, t: Target) -> web.Response:
        objs, rv = self._select(request, t)
        q = request.query
        meta: dict[str, Any] = {"resourceVersion": rv}
        if q.get("continue"):
            try:
                token = json.loads(base64.urlsafe_b64decode(q["continue"]))
                after = tuple(token["start"])
            except (ValueError, KeyError, TypeError, binascii.Error):
                raise bad_request("continue key is not valid") from None
            objs = [o for o in objs if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) > after]
        limit = int(q.get("limit") or 0)
        if limit > 0 and len(objs) > limit:
            last = objs[limit - 1]["metadata"]
            meta["continue"] = base64.urlsafe_b64encode(json.dumps(
                {"rv": rv, "start": [last.get("namespace", ""), last["name"]]}).encode()).decode()
            meta["remainingItemCount"] = len(objs) - limit
            objs = objs[:limit]
        table = self._table_request(request)
        if table is not None:
            return _json(tables.table(t.rt, objs, meta, table))
        partial = _metadata_only(request, listing=True)
        if partial:
            return _json({"kind": "PartialObjectMetadataList", "apiVersion": partial, "metadata": meta,
                          "items": [_partial(o, partial) for o in objs]})
        return _reply(request, {"kind": t.rt.list_kind, "apiVersion": t.rt.api_version, "metadata": meta,
                                 "items": _items(t.rt, objs)})

    @staticmethod
    def _table_request(request: web.Request) -> str | None:
        """includeObject policy when the client asked for a Table, else None."""
        accept = request.headers.get("Accept", "")
        if "as=Table" not in accept:
            return None
        return request.query.get("includeObject", "Metadata")

    def _render(self, request: web.Request, t: Target, obj: Obj) -> web.Response:
        table = self._table_request(request)
        if table is not None:
            version = {"resourceVersion": obj["metadata"].get("resourceVersion", "")}
            return _json(tables.table(t.rt, [obj], version, table))
        partial = _metadata_only(request, listing=False)
        return _json(_partial(obj, partial)) if partial else _reply(request, obj)

    # --- watch -------------------------------------------------------------------------------------

    async def _watch(self, request: web.Request, t: Target) -> web.StreamResponse:
        q = request.query
        field_text = q.get("fieldSelector")
        if t.name:  # the old single-object watch path
            field_text = f"metadata.name={t.name}" + (f",{field_text}" if field_text else "")
        watcher = Watcher(None if t.all_namespaces else (t.namespace if t.rt.namespaced else None),
                          label_matcher(q.get("labelSelector")), field_matcher(field_text, t.rt.kind),
                          asyncio.get_running_loop())
        initial = _flag(q, "sendInitialEvents")
        bookmarks = _flag(q, "allowWatchBookmarks")
        timeout = float(q["timeoutSeconds"]) if q.get("timeoutSeconds") else None
        table = self._table_request(request)
        partial = _metadata_only(request, listing=False)  # a watch streams objects, not lists
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        try:
            rv, current = self.api.watch(t.rt, watcher, q.get("resourceVersion"), initial)
        except ApiError as exc:
            if exc.reason != "Expired":
                raise
            # As the watch cache does: the stream opens, says 410 Gone in an ERROR event, and ends.
            await response.prepare(request)
            await response.write(encode_json({"type": "ERROR", "object": exc.status()}))
            await response.write_eof()
            return response
        await response.prepare(request)
        self._streams.add(response)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout if timeout else None
        cut = loop.time() + cut_after if (cut_after := request.get(CUT_AFTER)) is not None else None
        try:
            for synthetic in current:
                await self._send(response, t, synthetic, table, partial)
            if initial:
                await self._bookmark(response, t, rv, initial_end=True)
            while not self.stopping.is_set():
                wait = self.bookmark_interval
                if cut is not None:
                    wait = min(wait, cut - loop.time())
                    if wait <= 0:
                        if request.transport is not None:
                            request.transport.abort()  # an injected fault: the connection just drops
                        return response
                if deadline is not None:
                    wait = min(wait, deadline - loop.time())
                    if wait <= 0:
                        break
                try:
                    event = await asyncio.wait_for(watcher.queue.get(), wait)
                except TimeoutError:
                    if bookmarks:
                        await self._bookmark(response, t, str(self.api.store.rv))
                    continue
                if event is None:
                    break
                await self._send(response, t, event, table, partial)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.api.store.unwatch(t.rt.storage_key, watcher)
            self._streams.discard(response)
        with contextlib.suppress(ConnectionResetError, RuntimeError):
            await response.write_eof()
        return response

    async def _send(self, response: web.StreamResponse, t: Target, event: Event, table: str | None,
                    partial: str) -> None:
        obj = self.api.view(event.obj, t.rt)
        if table is not None:
            obj = tables.table(t.rt, [obj], {"resourceVersion": obj["metadata"].get("resourceVersion", "")}, table)
        elif partial:
            obj = _partial(obj, partial)
        else:  # the object's JSON from the cache lists use: informers start by streaming every object
            await response.write(b'{"type":"' + event.type.encode() + b'","object":' + _item_json(obj) + b"}\n")
            return
        await response.write(encode_json({"type": event.type, "object": obj}))

    async def _bookmark(self, response: web.StreamResponse, t: Target, rv: str, *, initial_end: bool = False) -> None:
        meta: dict[str, Any] = {"resourceVersion": rv}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        body = {"type": "BOOKMARK", "object": {"kind": t.rt.kind, "apiVersion": t.rt.api_version, "metadata": meta}}
        await response.write(encode_json(body))
