"""What helmop implements of a Flux object's spec: the fields of helmop's own schema for the same kind. Any
other field (``spec.kubeConfig``, SOPS ``decryption``, a GitRepository's ``ref.name``) is refused by name,
never ignored."""

from __future__ import annotations

from typing import Any

from helmop.api.errors import SpecError
from helmop.api.kinds import Kind

from .crds import PAIRS, spec_schema


def check(kind: Kind, spec: dict[str, Any]) -> None:
    """SpecError ``UnsupportedField`` naming the first field of ``spec`` (a Flux ``kind``'s) that helmop does not
    implement."""
    ours = next(h for h, f in PAIRS if f == kind)
    found = _unknown(spec, spec_schema(ours), "spec")
    if found:
        raise SpecError("UnsupportedField", f"{found} is not implemented by helmop; remove it, or keep this "
                                            f"{kind.kind} on Flux's controllers")


def _unknown(value: Any, schema: dict[str, Any], at: str) -> str:
    if isinstance(value, dict) and "properties" in schema:
        for key, child in value.items():
            if key not in schema["properties"]:
                return f"{at}.{key}"
            found = _unknown(child, schema["properties"][key], f"{at}.{key}")
            if found:
                return found
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            found = _unknown(item, schema["items"], f"{at}[{i}]")
            if found:
                return found
    return ""
