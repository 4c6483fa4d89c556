"""Schemas of the built-in kinds, loaded from the upstream OpenAPI definitions.

The PyPI package ``kubernetes-validate`` ships the definitions of every built-in type per Kubernetes
version. They are written as JSON Schema 2020-12 (``"type": ["string", "null"]``, ``$defs``), which
OpenAPI 3.0 parsers in client-go reject, so they are normalised once into the structural form CRDs
use (single ``type`` plus ``nullable``). Built-ins and CRDs then share one validator, one merge-key
lookup and one OpenAPI writer.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from importlib import resources
from typing import Any

Schema = dict[str, Any]

KUBE_VERSION = "v1.35.0"
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
# Marker for Quantity: a string like "500m" or a JSON number; not expressible as one OpenAPI type.
QUANTITY_MARK = "x-sandbox-quantity"


def _normalise(node: Any) -> Any:
    if isinstance(node, list):
        return [_normalise(n) for n in node]
    if not isinstance(node, dict):
        return node
    out: Schema = {}
    for key, value in node.items():
        if key == "type" and isinstance(value, list):
            kinds = [t for t in value if t != "null"]
            if len(kinds) != len(value):
                out["nullable"] = True
            if kinds:
                out["type"] = kinds[0]
        elif key == "$ref":
            out["$ref"] = value.rsplit("/", 1)[-1]
        elif key == "properties":
            out[key] = {name: _normalise(sub) for name, sub in value.items()}
        else:
            out[key] = _normalise(value)
    return out


@functools.cache
def definitions() -> dict[str, Schema]:
    """All built-in type definitions by their OpenAPI name, normalised (loaded once per process)."""
    path = resources.files("kubernetes_validate").joinpath(
        f"kubernetes-json-schema/{KUBE_VERSION}-local/_definitions.json"
    )
    raw = json.loads(path.read_text())["$defs"]
    defs: dict[str, Schema] = {name: _normalise(body) for name, body in raw.items()}
    defs[INT_OR_STRING] = {"x-kubernetes-int-or-string": True}
    defs[QUANTITY] = {QUANTITY_MARK: True}
    return defs


@functools.cache
def definition_for_kind() -> dict[tuple[str, str, str], str]:
    """(group, version, kind) -> definition name."""
    out: dict[tuple[str, str, str], str] = {}
    for name, body in definitions().items():
        for gvk in body.get("x-kubernetes-group-version-kind", []):
            out.setdefault((gvk["group"], gvk["version"], gvk["kind"]), name)
    return out


def resolve(node: Schema) -> Schema:
    """Follow ``$ref`` to the named built-in definition (CRD schemas have none)."""
    while "$ref" in node:
        node = definitions()[node["$ref"]]
    return node


def child(node: Schema | None, name: str) -> Schema | None:
    """Schema of field ``name`` of an object node, or of a map's values; None when unknown."""
    if node is None:
        return None
    node = resolve(node)
    props = node.get("properties")
    if props is not None:
        sub = props.get(name)
        return resolve(sub) if sub is not None else None
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        return resolve(extra)
    return None


def items(node: Schema | None) -> Schema | None:
    if node is None:
        return None
    sub = resolve(node).get("items")
    return resolve(sub) if isinstance(sub, dict) else None


def list_keys(node: Schema | None) -> list[str] | None:
    """Keys identifying items of an associative list (SSA list-type map or SMP merge key)."""
    if node is None:
        return None
    node = resolve(node)
    if node.get("x-kubernetes-list-type") == "map":
        return list(node.get("x-kubernetes-list-map-keys") or [])
    key = node.get("x-kubernetes-patch-merge-key")
    return [key] if key else None


def is_set(node: Schema | None) -> bool:
    if node is None:
        return False
    node = resolve(node)
    if node.get("x-kubernetes-list-type") == "set":
        return True
    strategy = node.get("x-kubernetes-patch-strategy", "")
    return "merge" in strategy.split(",") and "x-kubernetes-patch-merge-key" not in node


def patch_strategy(node: Schema | None) -> set[str]:
    if node is None:
        return set()
    return set(filter(None, resolve(node).get("x-kubernetes-patch-strategy", "").split(",")))


# --- OpenAPI documents -------------------------------------------------------------------------


def to_openapi(node: Any, ref_prefix: str) -> Any:
    """Turn a normalised schema into OpenAPI form: refs become ``ref_prefix + name``."""
    if isinstance(node, list):
        return [to_openapi(n, ref_prefix) for n in node]
    if not isinstance(node, dict):
        return node
    out: Schema = {}
    for key, value in node.items():
        if key == "$ref":
            out[key] = ref_prefix + value
        elif key == QUANTITY_MARK:
            out["type"] = "string"
        elif key == "x-kubernetes-int-or-string":
            out[key] = value
            out.setdefault("type", "string")
            out.setdefault("format", "int-or-string")
        elif key == "properties":
            out[key] = {name: to_openapi(sub, ref_prefix) for name, sub in value.items()}
        else:
            out[key] = to_openapi(value, ref_prefix)
    return out


def referenced(names: list[str]) -> Iterator[str]:
    """The named definitions and everything they reference, transitively."""
    defs = definitions()
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen or name not in defs:
            continue
        seen.add(name)
        yield name
        todo.extend(_refs(defs[name]))


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):  # (JSONSchemaProps has a *property* "$ref")
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)
