"""CRD validation rules (``x-kubernetes-validations``), evaluated with CEL as kube-apiserver does.

Each rule of a schema node is evaluated with ``self`` bound to the value there; a rule that names
``oldSelf`` is a transition rule, evaluated on updates only, where the old object has a value at the
same place (object properties, and list-map items matched by their keys), with ``oldSelf`` bound to it.
A failing rule gives a field error at the node (plus its ``fieldPath``) with its ``reason`` (default
FieldValueInvalid) and its ``message``, its ``messageExpression``'s value, or ``failed rule: RULE``.
The CEL library is the one helmop's health checks use (``cel``).
"""

from __future__ import annotations

import functools
from typing import Any

import cel

from .errors import Cause
from .schemas import Schema, resolve

_PREFIX = {"FieldValueInvalid": "Invalid value", "FieldValueForbidden": "Forbidden",
           "FieldValueRequired": "Required value", "FieldValueDuplicate": "Duplicate value"}


@functools.lru_cache(maxsize=1024)
def program(rule: str) -> Any:
    return cel.compile(rule)


def compile_problems(schema: Schema, path: str) -> list[Cause]:
    """Rules of a CRD's schema that do not compile (the CRD is refused, as upstream)."""
    out: list[Cause] = []
    node = resolve(schema)
    for i, rule in enumerate(node.get("x-kubernetes-validations") or []):
        for key in ("rule", "messageExpression"):
            if rule.get(key):
                try:
                    program(str(rule[key]))
                except ValueError as exc:
                    out.append(Cause("FieldValueInvalid", f"Invalid value: {rule[key]!r}: compilation failed: "
                                     f"{str(exc).splitlines()[0]}", f"{path}.x-kubernetes-validations[{i}].{key}"))
    for name, sub in (node.get("properties") or {}).items():
        out += compile_problems(sub, f"{path}.properties[{name}]")
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            out += compile_problems(node[key], f"{path}.{key}")
    return out


def violations(obj: Any, old: Any, schema: Schema) -> list[Cause]:
    out: list[Cause] = []
    _walk(obj, old, old is not None, schema, "", out)
    return out


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _walk(value: Any, old: Any, correlated: bool, schema: Schema, path: str, out: list[Cause]) -> None:
    node = resolve(schema)
    for rule in node.get("x-kubernetes-validations") or []:
        cause = _evaluate(rule, value, old, correlated, node, path)
        if cause is not None:
            out.append(cause)
    if isinstance(value, dict):
        props, extra = node.get("properties"), node.get("additionalProperties")
        for key, sub in value.items():
            sub_schema = (props or {}).get(key) if props is not None else extra if isinstance(extra, dict) else None
            if sub_schema is not None:
                paired = correlated and isinstance(old, dict) and key in old
                _walk(sub, old.get(key) if paired else None, paired, sub_schema, _join(path, key), out)
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        keys = node.get("x-kubernetes-list-map-keys") if node.get("x-kubernetes-list-type") == "map" else None
        previous = {_key(item, keys): item for item in old} if keys and correlated and isinstance(old, list) else {}
        for i, item in enumerate(value):
            before = previous.get(_key(item, keys)) if keys else None
            _walk(item, before, before is not None, node["items"], f"{path}[{i}]", out)


def _key(item: Any, keys: list[str] | None) -> Any:
    return tuple(item.get(k) for k in keys or []) if isinstance(item, dict) else item


def _evaluate(rule: dict[str, Any], value: Any, old: Any, correlated: bool, node: Schema,
              path: str) -> Cause | None:
    text = str(rule.get("rule", ""))
    try:
        compiled = program(text)
        transition = "oldSelf" in compiled.variables()
        if transition and not correlated:
            return None  # a transition rule has nothing to compare on create or for a new item
        context = {"self": value, **({"oldSelf": old} if transition else {})}
        if compiled.execute(context) is True:
            return None
        message = str(rule.get("message") or "")
        if rule.get("messageExpression"):
            message = str(program(str(rule["messageExpression"])).execute(context)) or message
        message = message or f"failed rule: {text}"
    except (KeyError, ValueError, TypeError) as exc:  # a runtime error fails the rule, as upstream
        message = f"{exc} evaluating rule: {text}"
    reason = str(rule.get("reason") or "FieldValueInvalid")
    field = path + str(rule.get("fieldPath") or "")
    shown = f'"{node.get("type", "object")}": ' if reason == "FieldValueInvalid" else ""
    return Cause(reason, f"{_PREFIX.get(reason, 'Invalid value')}: {shown}{message}", field.lstrip("."))
