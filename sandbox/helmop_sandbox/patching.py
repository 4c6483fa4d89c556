"""The three classic patch types: JSON merge (RFC 7386), JSON patch (RFC 6902), strategic merge.

Strategic merge takes its merge keys and strategies from the schema (``x-kubernetes-patch-merge-key``,
``x-kubernetes-patch-strategy``) and honours the directives kubectl writes: ``$patch``
(replace/delete/merge), ``$retainKeys``, ``$setElementOrder/<list>`` and
``$deleteFromPrimitiveList/<list>``. Server-side apply lives in :mod:`.fieldmanager`.
"""

from __future__ import annotations

import json
from typing import Any

from .errors import ApiError, bad_request
from .schemas import Schema, child, items, list_keys, patch_strategy
from .store import clone


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return clone(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# --- JSON patch --------------------------------------------------------------------------------


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request(f'invalid JSON pointer "{path}"')
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str], path: str) -> Any:
    node = doc
    for part in parts[:-1]:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise ApiError("Invalid", f"the server rejected our request due to an error in our request: "
                                      f"jsonpatch: path {path} is missing parent", {})
    return node


def _get(doc: Any, path: str) -> Any:
    node = doc
    for part in _pointer(path):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise ApiError("Invalid", f"the server rejected our request due to an error in our request: "
                                      f"jsonpatch: path {path} does not exist", {})
    return node


def _set(doc: Any, path: str, value: Any, *, insert: bool) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        if not insert and last not in parent:
            raise ApiError("Invalid", f"jsonpatch replace operation does not apply: doc is missing key: {path}")
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-" and insert:
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent) - (0 if insert else 1):
            if insert:
                parent.insert(int(last), value)
            else:
                parent[int(last)] = value
        else:
            raise ApiError("Invalid", f"jsonpatch: index out of range at {path}")
    else:
        raise ApiError("Invalid", f"jsonpatch: cannot set {path}")
    return doc


def _remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise ApiError("Invalid", f"jsonpatch remove operation does not apply: doc is missing path: {path}")


class TestFailed(Exception):
    """A ``test`` operation did not match: the apiserver answers this with 409 or 422."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


def json_patch(doc: Any, ops: Any) -> Any:
    if not isinstance(ops, list):
        raise bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = clone(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise bad_request(f"invalid JSON patch operation: {json.dumps(op)}")
        kind, path = op["op"], op["path"]
        if kind == "add":
            doc = _set(doc, path, clone(op.get("value")), insert=True)
        elif kind == "replace":
            doc = _set(doc, path, clone(op.get("value")), insert=False)
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "test":
            try:
                current = _get(doc, path)
            except ApiError:
                current = None
            if current != op.get("value"):
                raise TestFailed(path)
        elif kind in ("move", "copy"):
            value = _get(doc, op["from"])
            if kind == "move":
                _remove(doc, op["from"])
            doc = _set(doc, path, clone(value), insert=True)
        else:
            raise bad_request(f"Unexpected kind: {kind}")
    return doc


# --- strategic merge patch ---------------------------------------------------------------------


def strategic_merge(target: Any, patch: Any, schema: Schema | None) -> Any:
    if not isinstance(patch, dict):
        return clone(patch)
    if not isinstance(target, dict):
        target = {}
    if patch.get("$patch") == "replace":
        return {k: clone(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = dict(target)
    retain = patch.get("$retainKeys")
    orders = {k.split("/", 1)[1]: v for k, v in patch.items() if k.startswith("$setElementOrder/")}
    deletions = {k.split("/", 1)[1]: v for k, v in patch.items() if k.startswith("$deleteFromPrimitiveList/")}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        sub = child(schema, key)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and "merge" in patch_strategy(sub):
            result[key] = _merge_list(result.get(key), value, sub)
        elif isinstance(value, dict):
            merged = strategic_merge(result.get(key), value, sub)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = clone(value)
    for key, doomed in deletions.items():
        if isinstance(result.get(key), list):
            result[key] = [v for v in result[key] if v not in doomed]
    for key, order in orders.items():
        if isinstance(result.get(key), list):
            result[key] = _reorder(result[key], order, list_keys(child(schema, key)))
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_list(existing: Any, patch: list[Any], schema: Schema | None) -> list[Any]:
    current: list[Any] = list(existing) if isinstance(existing, list) else []
    keys = list_keys(schema)
    if not keys:  # a set of primitives: union, in order
        return current + [clone(v) for v in patch if v not in current]
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [clone(i) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    key = keys[0]
    item_schema = items(schema)
    for item in patch:
        if not isinstance(item, dict):
            current.append(clone(item))
            continue
        index = next((i for i, c in enumerate(current)
                      if isinstance(c, dict) and c.get(key) == item.get(key)), None)
        if item.get("$patch") == "delete":
            if index is not None:
                current.pop(index)
        elif index is None:
            merged = strategic_merge({}, item, item_schema)
            current.append(merged)
        else:
            current[index] = strategic_merge(current[index], item, item_schema)
    return current


def _reorder(values: list[Any], order: list[Any], keys: list[str] | None) -> list[Any]:
    def ident(v: Any) -> str:
        if keys and isinstance(v, dict):
            return json.dumps({k: v.get(k) for k in keys}, sort_keys=True)
        return json.dumps(v, sort_keys=True)

    rank = {ident(v): i for i, v in enumerate(order)}
    return sorted(values, key=lambda v: rank.get(ident(v), len(rank)))
