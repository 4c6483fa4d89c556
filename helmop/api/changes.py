"""What a change to a config repository changes, object by object, between two renderings
(:class:`helmop.api.rendered.Rendering`): added, changed and removed objects with their unified diffs, grouped by the
ConfigSync, Flux Kustomization or HelmRelease they come from (each group with its own kind and apiVersion), the releases
whose chart or values change, and those that could not be rendered, with why (their objects are not compared: the rest
is); and how that is said (unified diffs, a pull-request comment's markdown, JSON). Bounded: a diff stops after
``max_lines`` lines, the list after ``max_objects`` objects, a comment at ``max_chars`` characters, each with a count of
what was left out. What the renderings saw of secrets is masked. Pure: ``helmop preview`` and the Preview kind say the
same."""

from __future__ import annotations

import difflib
import html
import json
import re
from dataclasses import dataclass, field
from typing import Any

from .redaction import redact
from .rendered import Rendering

KINDS = ("added", "changed", "removed")


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
class Unrendered:
    """A release's group that one side or both could not render: why, for each side ("" where it rendered)."""

    group: str
    base: str
    head: str

    def said(self, base: str, head: str) -> list[tuple[str, str]]:
        """(where, why): the sides named ``base`` and ``head``, together when they say the same."""
        if self.base == self.head:
            return [(f"{base}, {head}", self.base)]
        return [(side, why) for side, why in ((base, self.base), (head, self.head)) if why]

    def lines(self, base: str, head: str) -> list[str]:
        return [f"{self.group}: not rendered in {where}: {why}" for where, why in self.said(base, head)]


@dataclass(frozen=True)
class Changes:
    objects: list[Change]
    releases: list[Release]
    counts: dict[str, int]  # added, changed, removed: all of them, including any left out
    left_out: int  # objects beyond max_objects
    unrendered: list[Unrendered] = field(default_factory=list)
    groups: dict[str, str] = field(default_factory=dict)  # every group -> the apiVersion of what it is named after

    def json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"summary": dict(self.counts), "leftOut": self.left_out,
                               "releases": [{"name": r.group, "change": r.change} for r in self.releases],
                               "groups": dict(self.groups),
                               "unrendered": [{"name": u.group, "base": u.base, "head": u.head}
                                              for u in self.unrendered]}
        for kind in KINDS:
            out[kind] = [{"group": c.group, "object": c.object, "diff": c.diff} for c in self.objects
                         if c.change == kind]
        return out

    @property
    def summary(self) -> str:
        return ", ".join(f"{self.counts[kind]} {kind}" for kind in KINDS)


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
    counts = dict.fromkeys(KINDS, 0)
    unrendered = [Unrendered(group, redact(base.unrendered.get(group, ""), secrets),
                             redact(head.unrendered.get(group, ""), secrets))
                  for group in sorted(base.unrendered.keys() | head.unrendered.keys())]
    skipped = {u.group for u in unrendered}  # one side's objects unknown: not compared
    for group in sorted((base.groups.keys() | head.groups.keys()) - skipped):
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
    return Changes(objects, _releases(base, head, skipped), counts, sum(counts.values()) - len(objects), unrendered,
                   {**base.api_versions, **head.api_versions})


def _releases(base: Rendering, head: Rendering, skipped: set[str]) -> list[Release]:
    out = []
    for group in sorted((base.releases.keys() | head.releases.keys()) - skipped):
        before, after = base.releases.get(group), head.releases.get(group)
        if before is None or after is None:
            out.append(Release(group, "added" if before is None else "removed"))
            continue
        changed = [what for what, old, new in zip(("chart", "values"), before, after, strict=True) if old != new]
        if changed:
            out.append(Release(group, " and ".join(changed)))
    return out


def _summary(found: Changes, base: str, head: str) -> list[str]:
    lines = [found.summary]
    lines += [f"{release.group}: {release.change}" for release in found.releases]
    lines += [line for u in found.unrendered for line in u.lines(base, head)]
    return lines + ([f"… {found.left_out} more objects"] if found.left_out else [])


def unified(found: Changes, base: str, head: str) -> str:
    """Each object's diff under a ``#`` header line, and the summary last (the releases not rendered, with why)."""
    out = [f"# {c.group}: {c.object} ({c.change})\n{c.diff}" for c in found.objects]
    return "".join(out) + "".join(f"# {line}\n" for line in [f"{base}..{head}", *_summary(found, base, head)])


def _fence(text: str) -> str:
    """A code fence longer than any run of backticks in ``text``."""
    return "`" * max([3, *(len(run) + 1 for run in re.findall(r"`+", text))])


def _code(text: str) -> str:
    """``text`` as inline code, whatever backticks it holds."""
    fence = "`" * max([1, *(len(run) + 1 for run in re.findall(r"`+", text))])
    return f"{fence} {text} {fence}" if "`" in text else f"`{text}`"


def heading(base: str, head: str) -> str:
    """A comment's first line: which revisions it compares."""
    return f"### helmop preview: {_code(base)} → {_code(head)}\n"


def markdown(found: Changes, base: str, head: str, *, max_chars: int = 0) -> str:
    """A pull-request comment: the counts, the releases that change, then one collapsible section per object with
    its diff; at most ``max_chars`` characters (0: no limit), the objects left out counted."""
    counts = found.counts
    out = [f"{heading(base, head)}\n| added | changed | removed |\n|---|---|---|\n"
           f"| {counts['added']} | {counts['changed']} | {counts['removed']} |\n"]
    if found.releases:
        out.append("\n**Releases whose chart or values change**\n\n" + "".join(
            f"- {_code(release.group)}: {release.change}\n" for release in found.releases))
    if found.unrendered:
        out.append("\n**Releases not rendered** (their objects are not compared)\n\n" + "".join(
            f"- {_code(u.group)}: not rendered in {_code(where)}: {html.escape(why, quote=False)}\n"
            for u in found.unrendered for where, why in u.said(base, head)))
    group, shown, reserve = "", 0, 200  # room for the closing line
    for change in found.objects:
        fence = _fence(change.diff)
        kind = found.groups.get(change.group, "")
        section = (f"\n#### {html.escape(change.group)}" + (f" <sub>{html.escape(kind)}</sub>" if kind else "")
                   + "\n" if change.group != group else "") + (
            f"\n<details><summary>{change.change}: <code>{html.escape(change.object)}</code></summary>\n\n"
            f"{fence}diff\n{change.diff}{fence}\n</details>\n")
        if max_chars and sum(map(len, out)) + len(section) + reserve > max_chars:
            break
        out.append(section)
        group, shown = change.group, shown + 1
    left = found.left_out + len(found.objects) - shown
    if left:
        out.append(f"\n… {left} more objects\n")
    return "".join(out)


def as_json(found: Changes, base: str, head: str) -> str:
    return json.dumps({"base": base, "head": head, **found.json()}, indent=2) + "\n"
