"""Where a field stands in an object, and how Flux's documentation writes it. Pure."""

from __future__ import annotations

FieldPath = tuple[str | int, ...]  # ("spec", "postRenderers", 0, "kustomize"): keys and list indexes


def dotted(path: FieldPath) -> str:
    """``spec.postRenderers[0].kustomize``, as Flux's documentation writes a field."""
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path).lstrip(".")
