"""Offline validation of helmop resources in a tree of manifests against helmop's CRD schemas, as
strict as ``kubectl apply --validate=strict`` (the default): wrong types, missing required fields,
values outside an enum or pattern, and unknown fields (which the API server would silently prune),
each reported as ``file:line: Kind namespace/name: field: problem``. Pure: files in, messages out.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import jsonschema
import yaml

from . import crds, yamlc
from .manifests import YamlProblem


def _strict(node: dict[str, Any]) -> dict[str, Any]:
    """An OpenAPI v3 structural schema as a JSON Schema that also refuses unknown fields."""
    out = copy.deepcopy(node)
    if out.pop("x-kubernetes-int-or-string", False):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if out.pop("nullable", False) and "type" in out:
        out["type"] = [out["type"], "null"]
    if "properties" in out:
        out["properties"] = {k: _strict(v) for k, v in out["properties"].items()}
        if not out.get("x-kubernetes-preserve-unknown-fields") and "additionalProperties" not in out:
            out["additionalProperties"] = False
    if isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = _strict(out["additionalProperties"])
    if isinstance(out.get("items"), dict):
        out["items"] = _strict(out["items"])
    return out


def _validators() -> dict[tuple[str, str], jsonschema.Draft7Validator]:
    out = {}
    for crd in crds.definitions():
        spec = crd["spec"]
        for version in spec["versions"]:
            schema = _strict(version["schema"]["openAPIV3Schema"])
            # metadata is the API server's to check, beyond what the manifest parser already requires
            schema["properties"]["metadata"] = {"type": "object"}
            schema["properties"].update(apiVersion={"type": "string"}, kind={"type": "string"})
            out[(f"{spec['group']}/{version['name']}", spec["names"]["kind"])] = jsonschema.Draft7Validator(schema)
    return out


def _line(node: yaml.Node, path: list[str | int]) -> int:
    """The 1-based line of ``path`` in a composed YAML document (as deep as the document goes)."""
    line: int = node.start_mark.line + 1
    for step in path:
        if isinstance(node, yaml.MappingNode):
            found = next(((k, v) for k, v in node.value if k.value == step), None)
            if found is None:
                break
            line = found[0].start_mark.line + 1
            node = found[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(step, int) and step < len(node.value):
            node = node.value[step]
            line = node.start_mark.line + 1
        else:
            break
    return line


def _field(path: list[str | int]) -> str:
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return out or "(the object)"


def _problems(validator: jsonschema.Draft7Validator, obj: dict[str, Any]) -> Iterator[tuple[list[str | int], str]]:
    for error in validator.iter_errors(obj):
        path = list(error.absolute_path)
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            known = set(error.schema.get("properties") or {})
            for key in sorted(set(error.instance) - known):
                yield [*path, key], "unknown field"
        elif error.validator == "required":
            yield path, error.message.replace("is a required property", "is required")
        else:
            yield path, error.message


def tree(files: dict[str, bytes]) -> list[str]:
    """Problems of every helmop resource in ``files`` (YAML that does not parse is reported too)."""
    validators = _validators()
    out: list[str] = []
    for name in sorted(files):
        if not name.endswith((".yaml", ".yml")):
            continue
        try:
            text = files[name].decode()
            parsed = yamlc.documents(text)
        except (UnicodeDecodeError, yaml.YAMLError) as exc:
            broken = YamlProblem.of(exc)
            out.append(f"{name}{f':{broken.line}' if broken.line else ''}: not a valid YAML file: {broken.problem}")
            continue
        for node, doc in parsed:
            if not isinstance(doc, dict):
                continue
            items = doc.get("items") if str(doc.get("kind", "")).endswith("List") else None
            objects: list[tuple[list[str | int], Any]] = (
                [(["items", i], o) for i, o in enumerate(items)] if isinstance(items, list) else [([], doc)])
            for prefix, obj in objects:
                if not isinstance(obj, dict):
                    continue
                validator = validators.get((str(obj.get("apiVersion")), str(obj.get("kind"))))
                if validator is None:
                    continue
                meta = obj.get("metadata") or {}
                what = f"{obj['kind']} {meta.get('namespace') or '(namespace)'}/{meta.get('name')}"
                found = sorted((_line(node, [*prefix, *path]), _field(path), problem)
                               for path, problem in _problems(validator, obj))
                out += [f"{name}:{line}: {what}: {field}: {problem}" for line, field, problem in found]
    return out
