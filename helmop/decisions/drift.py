"""Drift: how a live object differs from what the release says it should be. Pure.

The controller asks the API server what applying the release's manifest would make of the object (a
server-side-apply dry run under helm's field manager, forced); what differs from the live object
is drift, except paths the spec says to ignore and fields another manager took over on purpose with a
server-side apply of its own (an autoscaler applying ``spec.replicas``, say). Edits with ``kubectl
scale``/``edit``/``patch`` are updates, not applies: they are drift.
"""

from __future__ import annotations

from typing import Any

from helmop.api.selectors import Selector

# Bookkeeping the API server keeps; never drift.
_IGNORED = ("/status", "/metadata/managedFields", "/metadata/resourceVersion", "/metadata/generation",
            "/metadata/uid", "/metadata/creationTimestamp", "/metadata/selfLink")


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def owned_by_others(managed_fields: list[dict[str, Any]], ours: tuple[str, ...]) -> set[str]:
    """JSON pointers of the fields that managers other than ``ours`` (the release's own) took with a
    server-side apply."""
    out: set[str] = set()

    def walk(node: dict[str, Any], prefix: str) -> None:
        for key, child in node.items():
            if key == ".":
                continue
            kind, _, name = key.partition(":")
            if kind == "f":
                path = f"{prefix}/{_escape(name)}"
                if not child or "." in child:  # the field itself (a leaf, or a map owned as a whole)
                    out.add(path)
                walk(child or {}, path)
            elif kind in ("k", "v"):  # list items by key or value: the whole list counts
                out.add(prefix)

    for entry in managed_fields:
        if entry.get("operation") == "Apply" and entry.get("manager") not in ours:
            walk(entry.get("fieldsV1") or {}, "")
    return out


def _covered(path: str, prefixes: set[str] | tuple[str, ...]) -> bool:
    return any(path == p or path.startswith(p + "/") for p in prefixes)


def differences(wanted: Any, live: Any, ignore: tuple[str, ...] = (), foreign: set[str] | None = None,
                path: str = "") -> list[str]:
    """JSON pointers where ``live`` differs from ``wanted`` (the dry run's result), leaves first found."""
    if wanted == live:  # nothing below differs (compared as the leaves are): most of an object, most of the time
        return []
    if _covered(path, _IGNORED) or _covered(path, ignore) or (foreign and path and _covered(path, foreign)):
        return []
    if isinstance(wanted, dict) and isinstance(live, dict):
        out: list[str] = []
        for key in sorted(set(wanted) | set(live)):
            out += differences(wanted.get(key), live.get(key), ignore, foreign, f"{path}/{_escape(str(key))}")
        return out
    if isinstance(wanted, list) and isinstance(live, list) and len(wanted) == len(live):
        return [d for i, (w, v) in enumerate(zip(wanted, live, strict=True))
                for d in differences(w, v, ignore, foreign, f"{path}/{i}")]
    return [] if wanted == live else [path or "/"]


def ignored_paths(rules: tuple[tuple[tuple[str, ...], Selector], ...], obj: dict[str, Any]) -> tuple[str, ...]:
    """The JSON pointers spec.driftDetection.ignore leaves out for this object (every rule whose target
    selects it adds up)."""
    return tuple(path for paths, target in rules if target.matches(obj) for path in paths)


OPT_OUT = "helm.toolkit.fluxcd.io/driftDetection"  # "disabled" (any case), as a label or an annotation


def excluded(obj: dict[str, Any]) -> bool:
    """Whether an object opted out of drift detection and correction (on the chart's object or the live one)."""
    meta = obj.get("metadata") or {}
    return any(str((meta.get(part) or {}).get(OPT_OUT, "")).lower() == "disabled" for part in ("labels", "annotations"))
