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
import copy
import json
import re
from dataclasses import dataclass, field
from typing import Any

from .errors import Cause
from .schemas import QUANTITY_MARK, Schema, resolve

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


class Walker:
    """Walks ``value`` with ``schema``, mutating it in place (pruning, defaulting)."""

    def __init__(self, *, custom: bool) -> None:
        self.custom = custom
        self.found = Findings()

    def walk(self, value: Any, schema: Schema, path: str) -> Any:
        node = resolve(schema)
        if value is None:
            if self.custom and not node.get("nullable") and node.get("type"):
                self._type_error(path, value, node["type"])
            return value
        if node.get("x-kubernetes-int-or-string"):
            if isinstance(value, bool) or not isinstance(value, int | str):
                self._type_error(path, value, "integer or string")
            return value
        if node.get(QUANTITY_MARK):
            if isinstance(value, bool) or not isinstance(value, int | float | str):
                self._type_error(path, value, "quantity")
            elif isinstance(value, str) and not _QUANTITY.match(value):
                self.found.type_errors.append(
                    Cause("FieldValueInvalid", f"quantities must match the regular expression "
                          f"'{_QUANTITY.pattern}'", path)
                )
            return value
        kind = node.get("type")
        if kind is None and "properties" in node:
            kind = "object"
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

    def _object(self, value: dict[str, Any], node: Schema, path: str) -> None:
        props: dict[str, Schema] | None = node.get("properties")
        extra = node.get("additionalProperties")
        keep_unknown = bool(node.get("x-kubernetes-preserve-unknown-fields"))
        # Type and object metadata of custom (and embedded) resources are the server's, not the schema's.
        embedded = bool(node.get("x-kubernetes-embedded-resource")) or (self.custom and not path)
        if props is not None:
            for name in list(value):
                sub = props.get(name)
                if sub is not None:
                    value[name] = self.walk(value[name], sub, _join(path, name))
                elif embedded and name in ("apiVersion", "kind", "metadata"):
                    continue
                elif isinstance(extra, dict):
                    value[name] = self.walk(value[name], extra, _join(path, name))
                elif not keep_unknown and extra is not True:
                    self.found.unknown.append(_join(path, name))
                    del value[name]
            if self.custom:
                for name, sub in props.items():
                    if name not in value and "default" in resolve(sub):
                        value[name] = self.walk(copy.deepcopy(resolve(sub)["default"]), sub,
                                                _join(path, name))
        elif isinstance(extra, dict):
            for name in list(value):
                value[name] = self.walk(value[name], extra, _join(path, name))
        elif self.custom and not keep_unknown and extra is not True and node.get("type") == "object":
            # A structural object with no properties keeps nothing unless told to.
            for name in list(value):
                self.found.unknown.append(_join(path, name))
                del value[name]
        for name in node.get("required", []):
            if name not in value:
                self._invalid("FieldValueRequired", _join(path, name), "Required value")
        self._bounds(len(value), node, path, "minProperties", "maxProperties", "properties")
        self._enum(value, node, path)

    def _array(self, value: list[Any], node: Schema, path: str) -> None:
        sub = node.get("items")
        if isinstance(sub, dict):
            for i, item in enumerate(value):
                value[i] = self.walk(item, sub, f"{path}[{i}]")
        self._bounds(len(value), node, path, "minItems", "maxItems", "items")
        list_type = node.get("x-kubernetes-list-type")
        if node.get("uniqueItems") or list_type == "set":
            seen: set[str] = set()
            for i, item in enumerate(value):
                token = json.dumps(item, sort_keys=True)
                if token in seen:
                    self._invalid("FieldValueDuplicate", f"{path}[{i}]", f"Duplicate value: {token}")
                seen.add(token)
        elif list_type == "map":
            keys = node.get("x-kubernetes-list-map-keys") or []
            seen_keys: set[str] = set()
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    token = json.dumps({k: item.get(k) for k in keys}, sort_keys=True)
                    if token in seen_keys:
                        self._invalid("FieldValueDuplicate", f"{path}[{i}]", f"Duplicate value: {token}")
                    seen_keys.add(token)
        self._enum(value, node, path)

    def _scalar(self, value: Any, node: Schema, path: str) -> None:
        self._enum(value, node, path)
        if isinstance(value, str):
            self._bounds(len(value), node, path, "minLength", "maxLength", "characters")
            pattern = node.get("pattern")
            if pattern and not re.search(pattern, value):
                self._invalid("FieldValueInvalid", path,
                              f'Invalid value: "{value}": {path} in body should match \'{pattern}\'')
            if node.get("format") == "byte" and not self.custom:
                try:
                    base64.b64decode(value, validate=True)
                except (binascii.Error, ValueError):
                    self.found.type_errors.append(
                        Cause("FieldValueInvalid", f"illegal base64 data in {path}", path))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            self._range(value, node, path)

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

    def _bounds(self, size: int, node: Schema, path: str, low_key: str, high_key: str, what: str) -> None:
        low, high = node.get(low_key), node.get(high_key)
        if low is not None and size < low:
            self._invalid("FieldValueInvalid", path,
                          f"Invalid value: {size}: {path} in body should have at least {low} {what}")
        if high is not None and size > high:
            reason = "FieldValueTooLong" if what == "characters" else "FieldValueTooMany"
            self._invalid(reason, path, f"Too long: {path} in body may not have more than {high} {what}")

    def _enum(self, value: Any, node: Schema, path: str) -> None:
        allowed = node.get("enum")
        if allowed and value not in allowed:
            shown = ", ".join(json.dumps(a) for a in allowed)
            self._invalid("FieldValueNotSupported", path,
                          f"Unsupported value: {json.dumps(value)}: supported values: {shown}")


def check(obj: dict[str, Any], schema: Schema, *, custom: bool) -> Findings:
    """Validate ``obj`` in place against ``schema``; see the module docstring for the modes."""
    walker = Walker(custom=custom)
    walker.walk(obj, schema, "")
    return walker.found
