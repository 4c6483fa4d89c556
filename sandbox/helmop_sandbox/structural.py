"""Validation, pruning and defaulting of an object against a structural schema.

One walker serves built-in kinds (schema from the upstream definitions) and custom resources
(``openAPIV3Schema``), with the differences the real API server has:

* built-ins are decoded into Go structs, so a wrongly typed field is a *decoding* error (400) and
  unknown fields simply cannot be stored;
* custom resources are pruned of unknown fields, get schema defaults, and every violation is a
  422 Invalid with a field path.

In both, unknown fields are reported so the caller can apply ``fieldValidation``
(Strict: 400, Warn: a warning header, Ignore: silently dropped).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from .errors import Cause
from .schemas import QUANTITY_MARK, Schema, resolve
from .store import clone

_QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[numkMGTPE]|[KMGTPE]i)?$")
_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


@dataclass
class Findings:
    unknown: list[str] = field(default_factory=list)
    type_errors: list[Cause] = field(default_factory=list)
    invalid: list[Cause] = field(default_factory=list)


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


class Node:
    """One schema node, compiled: its ``$ref`` followed and what the walk asks of it read once, its sub-schemas
    compiled when first met (recursive schemas, such as a CRD's own, stay finite)."""

    def __init__(self, schema: Schema) -> None:
        node = resolve(schema)
        self.declared: str | None = node.get("type")
        self.kind = self.declared if self.declared is not None else "object" if "properties" in node else None
        self.nullable = bool(node.get("nullable"))
        self.int_or_string = bool(node.get("x-kubernetes-int-or-string"))
        self.quantity = bool(node.get(QUANTITY_MARK))
        self.props: dict[str, Schema] | None = node.get("properties")
        extra = node.get("additionalProperties")
        self.extra: Schema | None = extra if isinstance(extra, dict) else None
        self.keep_unknown = bool(node.get("x-kubernetes-preserve-unknown-fields")) or extra is True
        self.embedded = bool(node.get("x-kubernetes-embedded-resource"))
        self.defaults = [(name, sub, resolve(sub)["default"]) for name, sub in (self.props or {}).items()
                         if "default" in resolve(sub)]
        self.required: list[str] = node.get("required", [])
        self.enum: list[Any] | None = node.get("enum") or None
        self.items: Schema | None = node.get("items") if isinstance(node.get("items"), dict) else None
        self.list_type = node.get("x-kubernetes-list-type")
        self.unique = bool(node.get("uniqueItems")) or self.list_type == "set"
        self.map_keys: list[str] = node.get("x-kubernetes-list-map-keys") or []
        self.pattern: str | None = node.get("pattern")
        self.byte = node.get("format") == "byte"
        self.bounds = {key: node[key] for key in ("minProperties", "maxProperties", "minItems", "maxItems",
                                                  "minLength", "maxLength") if node.get(key) is not None}
        self.ranged = any(node.get(key) is not None for key in ("minimum", "maximum", "multipleOf"))
        self.node = node  # the rest (numeric ranges) is read where it is rare
        self._subs: dict[int, Node] = {}

    def sub(self, schema: Schema) -> Node:
        """The compiled form of one of this node's sub-schemas (a property, additionalProperties, items)."""
        found = self._subs.get(id(schema))
        if found is None:
            found = self._subs[id(schema)] = Node(schema)  # the schema is this node's: it outlives the entry
        return found


# Compiled roots by identity: a stored schema is never changed in place (a CRD update stores a new one, with
# types of its own), so the same object is the same schema. The root is kept with it, so its id is not reused.
_COMPILED: OrderedDict[int, tuple[Schema, Node]] = OrderedDict()
_COMPILED_KEPT = 512
_NO_SCHEMA: Schema = {}  # one object for "no schema", not a new one per call


def compiled(schema: Schema) -> Node:
    entry = _COMPILED.get(id(schema))
    if entry is None or entry[0] is not schema:
        entry = _COMPILED[id(schema)] = (schema, Node(schema))
        if len(_COMPILED) > _COMPILED_KEPT:
            _COMPILED.popitem(last=False)
    else:
        _COMPILED.move_to_end(id(schema))
    return entry[1]


class Walker:
    """Walks ``value`` with a compiled schema, mutating it in place (pruning, defaulting)."""

    def __init__(self, *, custom: bool) -> None:
        self.custom = custom
        self.found = Findings()

    def walk(self, value: Any, node: Node, path: str) -> Any:
        if value is None:
            if self.custom and not node.nullable and node.declared:
                self._type_error(path, value, node.declared)
            return value
        if node.int_or_string:
            if isinstance(value, bool) or not isinstance(value, int | str):
                self._type_error(path, value, "integer or string")
            return value
        if node.quantity:
            if isinstance(value, bool) or not isinstance(value, int | float | str):
                self._type_error(path, value, "quantity")
            elif isinstance(value, str) and not _QUANTITY.match(value):
                self.found.type_errors.append(
                    Cause("FieldValueInvalid", f"quantities must match the regular expression "
                          f"'{_QUANTITY.pattern}'", path)
                )
            return value
        kind = node.kind
        if kind is not None:
            if not self._type_ok(value, kind):
                self._type_error(path, value, kind)
                return value
            if kind == "integer" and isinstance(value, float):
                value = int(value)
        if isinstance(value, dict):
            self._object(value, node, path)
        elif isinstance(value, list):
            self._array(value, node, path)
        else:
            self._scalar(value, node, path)
        return value

    @staticmethod
    def _type_ok(value: Any, kind: str) -> bool:
        if isinstance(value, bool) and kind != "boolean":
            return False
        if kind == "integer" and isinstance(value, float):
            return value.is_integer()
        return isinstance(value, _TYPES.get(kind, (object,)))

    def _type_error(self, path: str, value: Any, expected: str) -> None:
        got = _describe(value)
        self.found.type_errors.append(
            Cause(
                "FieldValueTypeInvalid",
                f'Invalid value: "{got}": {path or "body"} in body must be of type {expected}: "{got}"',
                path,
            )
        )

    def _invalid(self, reason: str, path: str, message: str) -> None:
        self.found.invalid.append(Cause(reason, message, path))

    def _object(self, value: dict[str, Any], node: Node, path: str) -> None:
        props, extra = node.props, node.extra
        # Type and object metadata of custom (and embedded) resources are the server's, not the schema's.
        embedded = node.embedded or (self.custom and not path)
        if props is not None:
            for name in list(value):
                sub = props.get(name)
                if sub is not None:
                    value[name] = self.walk(value[name], node.sub(sub), _join(path, name))
                elif embedded and name in ("apiVersion", "kind", "metadata"):
                    continue
                elif extra is not None:
                    value[name] = self.walk(value[name], node.sub(extra), _join(path, name))
                elif not node.keep_unknown:
                    self.found.unknown.append(_join(path, name))
                    del value[name]
            if self.custom:
                for name, sub, default in node.defaults:
                    if name not in value:
                        value[name] = self.walk(clone(default), node.sub(sub), _join(path, name))
        elif extra is not None:
            for name in list(value):
                value[name] = self.walk(value[name], node.sub(extra), _join(path, name))
        elif self.custom and not node.keep_unknown and node.declared == "object":
            # A structural object with no properties keeps nothing unless told to (but a resource's own type and
            # object metadata).
            for name in list(value):
                if embedded and name in ("apiVersion", "kind", "metadata"):
                    continue
                self.found.unknown.append(_join(path, name))
                del value[name]
        for name in node.required:
            if name not in value:
                self._invalid("FieldValueRequired", _join(path, name), "Required value")
        if node.bounds:
            self._bounds(len(value), node, path, "minProperties", "maxProperties", "properties")
        self._enum(value, node, path)

    def _array(self, value: list[Any], node: Node, path: str) -> None:
        if node.items is not None:
            sub = node.sub(node.items)
            for i, item in enumerate(value):
                value[i] = self.walk(item, sub, f"{path}[{i}]")
        if node.bounds:
            self._bounds(len(value), node, path, "minItems", "maxItems", "items")
        if node.unique:
            seen: set[str] = set()
            for i, item in enumerate(value):
                token = json.dumps(item, sort_keys=True)
                if token in seen:
                    self._invalid("FieldValueDuplicate", f"{path}[{i}]", f"Duplicate value: {token}")
                seen.add(token)
        elif node.list_type == "map":
            seen_keys: set[str] = set()
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    token = json.dumps({k: item.get(k) for k in node.map_keys}, sort_keys=True)
                    if token in seen_keys:
                        self._invalid("FieldValueDuplicate", f"{path}[{i}]", f"Duplicate value: {token}")
                    seen_keys.add(token)
        self._enum(value, node, path)

    def _scalar(self, value: Any, node: Node, path: str) -> None:
        self._enum(value, node, path)
        if isinstance(value, str):
            if node.bounds:
                self._bounds(len(value), node, path, "minLength", "maxLength", "characters")
            pattern = node.pattern
            if pattern and not re.search(pattern, value):
                self._invalid("FieldValueInvalid", path,
                              f'Invalid value: "{value}": {path} in body should match \'{pattern}\'')
            if node.byte and not self.custom:
                try:
                    base64.b64decode(value, validate=True)
                except (binascii.Error, ValueError):
                    self.found.type_errors.append(
                        Cause("FieldValueInvalid", f"illegal base64 data in {path}", path))
        elif isinstance(value, int | float) and not isinstance(value, bool) and node.ranged:
            self._range(value, node.node, path)

    def _range(self, value: float, node: Schema, path: str) -> None:
        low, high = node.get("minimum"), node.get("maximum")
        if low is not None and (value < low or (node.get("exclusiveMinimum") and value == low)):
            op = "greater than" if node.get("exclusiveMinimum") else "greater than or equal to"
            self._invalid("FieldValueInvalid", path,
                          f"Invalid value: {value}: {path} in body should be {op} {low}")
        if high is not None and (value > high or (node.get("exclusiveMaximum") and value == high)):
            op = "less than" if node.get("exclusiveMaximum") else "less than or equal to"
            self._invalid("FieldValueInvalid", path,
                          f"Invalid value: {value}: {path} in body should be {op} {high}")
        step = node.get("multipleOf")
        if step and (value / step) != int(value / step):
            self._invalid("FieldValueInvalid", path,
                          f"Invalid value: {value}: {path} in body should be a multiple of {step}")

    def _bounds(self, size: int, node: Node, path: str, low_key: str, high_key: str, what: str) -> None:
        low, high = node.bounds.get(low_key), node.bounds.get(high_key)
        if low is not None and size < low:
            self._invalid("FieldValueInvalid", path,
                          f"Invalid value: {size}: {path} in body should have at least {low} {what}")
        if high is not None and size > high:
            reason = "FieldValueTooLong" if what == "characters" else "FieldValueTooMany"
            self._invalid(reason, path, f"Too long: {path} in body may not have more than {high} {what}")

    def _enum(self, value: Any, node: Node, path: str) -> None:
        allowed = node.enum
        if allowed and value not in allowed:
            shown = ", ".join(json.dumps(a) for a in allowed)
            self._invalid("FieldValueNotSupported", path,
                          f"Unsupported value: {json.dumps(value)}: supported values: {shown}")


def check(obj: dict[str, Any], schema: Schema, *, custom: bool) -> Findings:
    """Validate ``obj`` in place against ``schema``; see the module docstring for the modes."""
    walker = Walker(custom=custom)
    walker.walk(obj, compiled(schema or _NO_SCHEMA), "")
    return walker.found
