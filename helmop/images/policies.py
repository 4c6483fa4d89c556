"""Which tag an ImagePolicy chooses, as Flux's image-reflector-controller does: filterTags first (an RE2 pattern,
unanchored as Go's, and ``extract`` expanded as Go's ``Regexp.Expand``: ``$1``, ``${name}``), then the policy
over what is left: the highest semantic version in ``semver.range`` (a pre-release only when the range names one),
the last in alphabetical or numerical order (``desc``: the first). Pure."""

from __future__ import annotations

import re
from typing import Any

from helmop.api.images import ImagePolicySpec
from helmop.api.patterns import compile_pattern
from helmop.api.semver import Constraint, Version
from helmop.sources.errors import SourceError

_REFERENCE = re.compile(r"\$(?:\$|\{(\w+)\}|(\w+))")


def choose(spec: ImagePolicySpec, tags: tuple[str, ...] | list[str]) -> str:
    """The tag ``spec`` chooses among ``tags`` (as listed); SourceError TagNotFound when none fits."""
    candidates = _filtered(spec, tags)
    chosen = _latest(spec, list(candidates)) if candidates else None
    if chosen is None:
        what = f"{len(candidates)} of {len(tags)} tags" if spec.pattern else f"{len(tags)} tags"
        raise SourceError("TagNotFound", f"no tag fits the {spec.policy} policy ({_describe(spec)}) among {what}",
                          transient=False)
    return candidates[chosen]


def _describe(spec: ImagePolicySpec) -> str:
    return f"range {spec.argument!r}" if spec.policy == "semver" else f"order {spec.argument}"


def _filtered(spec: ImagePolicySpec, tags: tuple[str, ...] | list[str]) -> dict[str, str]:
    """What the policy orders -> the tag it stands for (the last tag wins a value two extract alike)."""
    if not spec.pattern:
        return {tag: tag for tag in tags}
    pattern = compile_pattern(spec.pattern, "spec.filterTags.pattern")
    out: dict[str, str] = {}
    for tag in tags:
        found = pattern.search(tag)
        if found is not None:
            out[expand(spec.extract, found) if spec.extract else tag] = tag
    return out


def expand(template: str, found: Any) -> str:
    """``template`` with ``$n``, ``${n}``, ``$name``, ``${name}`` replaced by the match's groups (absent: empty),
    ``$$`` by ``$``, as Go's Regexp.Expand."""
    def group(ref: re.Match[str]) -> str:
        if ref.group(0) == "$$":
            return "$"
        name = ref.group(1) or ref.group(2)
        try:
            value = found.group(int(name) if name.isdigit() else name)
        except (IndexError, KeyError, ValueError, TypeError):
            return ""
        return str(value or "")

    return _REFERENCE.sub(group, template)


def _latest(spec: ImagePolicySpec, values: list[str]) -> str | None:
    if spec.policy == "semver":
        rule = Constraint(spec.argument)
        versions = [v for v in (Version.parse(t) for t in values) if v is not None and rule.allows(v)]
        return max(versions, key=Version.key).text if versions else None
    if spec.policy == "alphabetical":
        return max(values) if spec.argument == "asc" else min(values)
    numbers = []
    for value in values:
        try:
            numbers.append((float(value), value))
        except ValueError:
            raise SourceError("TagNotFound", f"the numerical policy orders numbers: {value[:130]!r} is not one (use "
                                             "spec.filterTags to keep only numeric tags)", transient=False) from None
    return (max if spec.argument == "asc" else min)(numbers, key=lambda n: n[0])[1]
