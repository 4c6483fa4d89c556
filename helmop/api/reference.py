"""The CRD reference as Markdown, generated from the CRD schemas themselves (so it cannot drift:
tests/test_docs.py checks the copy in docs/reference/crds.md). ``python -m helmop.api.reference`` prints it."""

from __future__ import annotations

import json
from typing import Any

from . import crds


def _type(node: dict[str, Any]) -> str:
    if node.get("x-kubernetes-int-or-string"):
        return "int or string"
    kind = str(node.get("type", "any"))
    if kind == "array":
        return f"[]{_type(node.get('items') or {})}"
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        return f"map of {_type(node['additionalProperties'])}"
    return kind


def _rows(node: dict[str, Any], prefix: str) -> list[str]:
    rows = []
    required = set(node.get("required") or [])
    for name, sub in (node.get("properties") or {}).items():
        path = f"{prefix}.{name}" if prefix else name
        notes = []
        if name in required:
            notes.append("required")
        if "default" in sub:
            notes.append(f"default `{json.dumps(sub['default'])}`")
        if "enum" in sub:
            notes.append("one of " + ", ".join(f"`{v}`" for v in sub["enum"]))
        if "pattern" in sub:
            notes.append("a duration such as `5m`" if "ms|s|m|h" in sub["pattern"] else f"pattern `{sub['pattern']}`")
        if "maxLength" in sub:
            notes.append(f"at most {sub['maxLength']} characters")
        description = " ".join(str(sub.get("description", "")).split())
        facts = ", ".join(notes)
        text = f"{description.rstrip('.')}. {facts[:1].upper()}{facts[1:]}." if description and facts else \
            (description or (facts[:1].upper() + facts[1:] + "." if facts else ""))
        rows.append(f"| `{path}` | {_type(sub)} | {text.replace('|', '/')} |")
        child = sub.get("items") if sub.get("type") == "array" else sub
        if isinstance(child, dict) and child.get("properties"):
            rows += _rows(child, path + ("[]" if sub.get("type") == "array" else ""))
    return rows


def markdown() -> str:
    parts = []
    for crd in crds.definitions():
        spec = crd["spec"]
        version = spec["versions"][0]
        schema = version["schema"]["openAPIV3Schema"]
        names = spec["names"]
        short = ", ".join(f"`{s}`" for s in names.get("shortNames", []))
        parts.append(f"### {names['kind']} (`{spec['group']}/{version['name']}`, short name {short})\n")
        if schema.get("description"):
            parts.append(schema["description"] + "\n")
        parts.append("| field | type | meaning |\n|---|---|---|")
        parts.append("\n".join(_rows(schema["properties"]["spec"], "spec")) + "\n")
    return "\n".join(parts)


if __name__ == "__main__":
    print(markdown(), end="")
