"""A ConfigSync's ``spec.ignore`` (Flux 2.9's Kustomization ignore rules): fields, as JSON pointers, that its
server-side apply leaves to others on the objects a rule's target selects (every object, without a target)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import pointers
from .errors import SpecError
from .fields import optional_list
from .selectors import Selector, parse_selector


@dataclass(frozen=True)
class IgnoreRule:
    paths: tuple[tuple[str, ...], ...]  # the reference tokens of each pointer
    target: Selector  # every object, when empty


def parse_ignore_rules(raw: Any) -> tuple[IgnoreRule, ...]:
    """spec.ignore; SpecError naming the rule, and the pointer, that is not one."""
    rules = []
    for i, item in enumerate(optional_list(raw, "spec.ignore")):
        where = f"spec.ignore[{i}]"
        paths = item.get("paths") if isinstance(item, dict) else None
        if not isinstance(paths, list) or not paths:
            raise SpecError("InvalidSpec", f"{where}.paths must list at least one JSON pointer")
        rules.append(IgnoreRule(tuple(pointers.parse(p, f"{where}.paths[{j}]") for j, p in enumerate(paths)),
                                parse_selector(item.get("target"), f"{where}.target")))
    return tuple(rules)


def ignored(rules: tuple[IgnoreRule, ...], obj: dict[str, Any]) -> tuple[tuple[str, ...], ...]:
    """The pointers (as tokens) the rules whose target selects ``obj`` leave out."""
    return tuple(path for rule in rules if rule.target.matches(obj) for path in rule.paths)
