"""What a change to a config repository changes, object by object, between two renderings: added, changed and
removed objects with their unified diffs, grouped by the ConfigSync or HelmRelease they come from, and the
releases whose chart or values change. Bounded: a diff stops after ``max_lines`` lines, the list after
``max_objects`` objects, each with a count of what was left out. What the renderings saw of secrets is masked."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from helmop.api.redaction import redact

if TYPE_CHECKING:
    from .rendering import Rendering


@dataclass(frozen=True)
class Change:
    group: str  # "ConfigSync apps", "HelmRelease shop/web"
    object: str  # kind/namespace/name
    change: str  # added | changed | removed
    diff: str  # unified


@dataclass(frozen=True)
class Release:
    group: str
    change: str  # added | removed | chart | values | chart and values


@dataclass(frozen=True)
class Changes:
    objects: list[Change]
    releases: list[Release]
    counts: dict[str, int]  # added, changed, removed: all of them, including any left out
    left_out: int  # objects beyond max_objects

    def json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"summary": dict(self.counts), "leftOut": self.left_out,
                               "releases": [{"name": r.group, "change": r.change} for r in self.releases]}
        for kind in ("added", "changed", "removed"):
            out[kind] = [{"group": c.group, "object": c.object, "diff": c.diff} for c in self.objects
                         if c.change == kind]
        return out


def _diff(old: str, new: str, name: str, max_lines: int) -> str:
    lines = list(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                      fromfile=f"a/{name}", tofile=f"b/{name}"))
    if len(lines) > max_lines:
        lines = [*lines[:max_lines], f"… {len(lines) - max_lines} more lines\n"]
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def compare(base: Rendering, head: Rendering, *, max_lines: int = 500, max_objects: int = 200) -> Changes:
    """The objects that differ; each side masked before it is diffed (not the diff: masking may take the
    whitespace around a secret, and with it a diff line's marker)."""
    secrets = base.secrets + head.secrets
    objects: list[Change] = []
    counts = {"added": 0, "changed": 0, "removed": 0}
    for group in sorted(base.groups.keys() | head.groups.keys()):
        before, after = base.groups.get(group, {}), head.groups.get(group, {})
        for name in sorted(before.keys() | after.keys()):
            old, new = before.get(name, ""), after.get(name, "")
            if old == new:
                continue
            change = "added" if not old else "removed" if not new else "changed"
            counts[change] += 1
            if len(objects) < max_objects:
                masked = _diff(redact(old, secrets), redact(new, secrets), name, max_lines)
                objects.append(Change(group, name, change, masked))
    return Changes(objects, _releases(base, head), counts, sum(counts.values()) - len(objects))


def _releases(base: Rendering, head: Rendering) -> list[Release]:
    out = []
    for group in sorted(base.releases.keys() | head.releases.keys()):
        before, after = base.releases.get(group), head.releases.get(group)
        if before is None or after is None:
            out.append(Release(group, "added" if before is None else "removed"))
            continue
        changed = [what for what, old, new in zip(("chart", "values"), before, after, strict=True) if old != new]
        if changed:
            out.append(Release(group, " and ".join(changed)))
    return out
