"""What helmop implements of a Flux object's spec: the fields of helmop's own schema for the same kind. Any
other field (``spec.kubeConfig``, SOPS ``decryption``, a GitRepository's ``ref.name``) is refused by name,
never ignored."""

from __future__ import annotations

from typing import Any

from helmop.api.errors import SpecError
from helmop.api.kinds import Kind

from .crds import PAIRS, spec_schema
from .paths import FieldPath, dotted


def check(kind: Kind, spec: dict[str, Any]) -> None:
    """SpecError ``UnsupportedField`` naming the first field of ``spec`` (a Flux ``kind``'s) that helmop does not
    implement."""
    found = unknown_fields(kind, spec)
    if found:
        raise SpecError("UnsupportedField", unsupported(kind, found[0]))


def unknown_fields(kind: Kind, spec: dict[str, Any]) -> list[FieldPath]:
    """Every field of ``spec`` (a Flux ``kind``'s) that helmop does not implement, in the order written; what is
    inside such a field is not looked into."""
    ours = next(h for h, f in PAIRS if f == kind)
    return _unknown(spec, spec_schema(ours), ("spec",))


def unsupported(kind: Kind, path: FieldPath) -> str:
    return f"{dotted(path)} is not implemented by helmop; remove it, or keep this {kind.kind} on Flux's controllers"


def _unknown(value: Any, schema: dict[str, Any], at: FieldPath) -> list[FieldPath]:
    found: list[FieldPath] = []
    if isinstance(value, dict) and "properties" in schema:
        for key, child in value.items():
            if key in schema["properties"]:
                found += _unknown(child, schema["properties"][key], (*at, key))
            else:
                found.append((*at, str(key)))  # a key YAML read as a number: named as text
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            found += _unknown(item, schema["items"], (*at, i))
    return found
