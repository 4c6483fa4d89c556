"""OpenAPI v2 and v3 documents built from the served types.

Clients read them for two reasons: to find out whether the server validates fields itself (a PATCH
operation of the kind taking the ``fieldValidation`` query parameter: then kubectl and helm skip
their own schema validation and send ``fieldValidation=Strict``), and for schemas (``kubectl
explain``). Documents are cached per registry revision, so CRD changes show up at once.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .kinds import Registry, ResourceType
from .schemas import OBJECT_META, Schema, definitions, referenced, to_openapi

_V3_REF = "#/components/schemas/"
_V2_REF = "#/definitions/"


def _query(name: str, description: str, kind: str = "string") -> dict[str, Any]:
    return {"name": name, "in": "query", "description": description, "schema": {"type": kind},
            "uniqueItems": True}


_WRITE_PARAMS = [
    _query("dryRun", "When present, indicates that modifications should not be persisted."),
    _query("fieldManager", "fieldManager is a name associated with the actor or entity making changes."),
    _query("fieldValidation", "fieldValidation instructs the server on how to handle objects in the request "
                              "containing unknown or duplicate fields: Ignore, Warn or Strict."),
]
_PATCH_PARAMS = [*_WRITE_PARAMS, _query("force", "Force is going to force Apply requests.", "boolean")]
_PATCH_TYPES = ["application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json"]


def schema_name(rt: ResourceType) -> str:
    if not rt.custom:
        return rt.schema["$ref"] if rt.schema else ""
    group = ".".join(reversed(rt.group.split(".")))
    return f"{group}.{rt.version}.{rt.kind}"


def _custom_schema(rt: ResourceType, ref_prefix: str) -> Schema:
    body = to_openapi(rt.schema or {}, ref_prefix)
    props = dict(body.get("properties") or {})
    props["apiVersion"] = {"type": "string", "description": "APIVersion defines the versioned schema."}
    props["kind"] = {"type": "string", "description": "Kind is a string value representing the REST resource."}
    props["metadata"] = {"$ref": ref_prefix + OBJECT_META}
    return {**body, "type": "object", "properties": props,
            "x-kubernetes-group-version-kind": [{"group": rt.group, "version": rt.version, "kind": rt.kind}]}


def _operations(rt: ResourceType, ref: str, v3: bool) -> dict[str, Any]:
    """Paths of one resource with the operations clients inspect."""
    prefix = f"/apis/{rt.group}/{rt.version}" if rt.group else f"/api/{rt.version}"
    base = f"{prefix}/namespaces/{{namespace}}/{rt.plural}" if rt.namespaced else f"{prefix}/{rt.plural}"
    gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}

    def params(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if v3:
            return items
        return [{k: v for k, v in {**p, "type": p["schema"]["type"]}.items() if k != "schema"} for p in items]

    def body(action: str) -> dict[str, Any]:
        if not v3:
            return {}
        # a PATCH names the patch types it takes, as kube-apiserver's does: kubectl apply builds a strategic merge
        # patch from these schemas only where it is among them (built-in types; never custom resources)
        types = ([*_PATCH_TYPES, "application/strategic-merge-patch+json"] if not rt.custom else _PATCH_TYPES) \
            if action == "patch" else ["*/*"]
        return {"requestBody": {"content": {t: {"schema": {"$ref": ref}} for t in types}, "required": True}}

    ok = {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": ref}}}}
          if v3 else {"200": {"description": "OK", "schema": {"$ref": ref}}}}

    def op(action: str, operation_id: str, extra: list[dict[str, Any]], with_body: bool) -> dict[str, Any]:
        out = {"operationId": f"{operation_id}{rt.kind}", "parameters": params(extra), "responses": ok,
               "x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk}
        if with_body:
            out.update(body(action))
        return out

    item = {
        "get": op("get", "read", [], False),
        "put": op("put", "replace", _WRITE_PARAMS, True),
        "patch": op("patch", "patch", _PATCH_PARAMS, True),
        "delete": op("delete", "delete", [_query("dryRun", "dry run")], False),
    }
    collection = {
        "get": op("list", "list", [], False),
        "post": op("post", "create", _WRITE_PARAMS, True),
        "delete": op("deletecollection", "deleteCollection", [], False),
    }
    out = {base: collection, f"{base}/{{name}}": item}
    if "status" in rt.subresources:
        out[f"{base}/{{name}}/status"] = {
            "get": op("get", "readStatus", [], False),
            "put": op("put", "replaceStatus", _WRITE_PARAMS, True),
            "patch": op("patch", "patchStatus", _PATCH_PARAMS, True),
        }
    return out


class OpenApi:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._cache: dict[tuple[str, int], bytes] = {}

    def _cached(self, key: str, build: Any) -> bytes:
        token = (key, self.registry.revision)
        if token not in self._cache:
            self._cache = {k: v for k, v in self._cache.items() if k[1] == self.registry.revision}
            self._cache[token] = json.dumps(build()).encode()
        return self._cache[token]

    def _types_of(self, group_version: str) -> list[ResourceType]:
        return [rt for rt in self.registry.all() if rt.group_version == group_version]

    def v3_root(self) -> bytes:
        def build() -> dict[str, Any]:
            paths = {}
            for gv in sorted({rt.group_version for rt in self.registry.all()}):
                path = f"apis/{gv}" if "/" in gv else f"api/{gv}"
                digest = hashlib.sha512(self.v3_group_version(gv)).hexdigest()[:64].upper()
                paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
            return {"paths": paths}

        return self._cached("v3", build)

    def v3_group_version(self, group_version: str) -> bytes:
        def build() -> dict[str, Any]:
            types = self._types_of(group_version)
            return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.35.2"},
                    "paths": self._paths(types, _V3_REF, v3=True),
                    "components": {"schemas": self._schemas(types, _V3_REF)}}

        return self._cached("v3:" + group_version, build)

    def v2(self) -> bytes:
        def build() -> dict[str, Any]:
            types = self.registry.all()
            return {"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.35.2"},
                    "paths": self._paths(types, _V2_REF, v3=False),
                    "definitions": self._schemas(types, _V2_REF)}

        return self._cached("v2", build)

    def has_group_version(self, group_version: str) -> bool:
        return bool(self._types_of(group_version))

    @staticmethod
    def _paths(types: list[ResourceType], ref_prefix: str, v3: bool) -> dict[str, Any]:
        paths: dict[str, Any] = {}
        for rt in types:
            paths.update(_operations(rt, ref_prefix + schema_name(rt), v3))
        return paths

    @staticmethod
    def _schemas(types: list[ResourceType], ref_prefix: str) -> dict[str, Any]:
        defs = definitions()
        names = [schema_name(rt) for rt in types if not rt.custom]
        names.append(OBJECT_META)
        out = {name: to_openapi(defs[name], ref_prefix) for name in referenced(names)}
        for rt in types:
            if rt.custom:
                out[schema_name(rt)] = _custom_schema(rt, ref_prefix)
        return out
