"""Flux's object selector (``fluxcd/pkg`` ``kustomize.Selector``): the ``target`` of drift-ignore rules,
post-renderer patches and a Kustomization's ignore rules. Pure.

group, version, kind, name and namespace are regular expressions matched whole (``^(?:expr)$``, RE2 as
Go's); labelSelector and annotationSelector are Kubernetes label selectors (``k=v``, ``k!=v``,
``k in (a,b)``, ``k notin (a)``, ``k``, ``!k``) over the object's labels and annotations. An empty field
matches everything; every given field must match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .errors import SpecError
from .patterns import compile_pattern

FIELDS = ("group", "version", "kind", "name", "namespace")
MAX_TERMS = 32  # of one label selector

_SET = re.compile(r"^\s*(!?)\s*([^\s!=,()]+)\s*(?:(==|=|!=)\s*([^\s,()]*)|\s(in|notin)\s*\(([^()]*)\))?\s*$")


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # = != in notin exists !exists
    values: frozenset[str] = frozenset()

    def matches(self, labels: dict[str, Any]) -> bool:
        present = self.key in labels
        value = str(labels.get(self.key, ""))
        if self.operator == "exists":
            return present
        if self.operator == "!exists":
            return not present
        if self.operator in ("=", "in"):
            return present and value in self.values
        return not present or value not in self.values  # != and notin: Kubernetes' meaning


def _split_terms(text: str) -> list[str]:
    """Commas separate terms, except inside the parentheses of a set."""
    terms, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += (c == "(") - (c == ")")
        if c == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return [t for t in terms if t.strip()]


def parse_label_selector(text: Any, where: str) -> tuple[Requirement, ...]:
    """A label selector string's requirements; SpecError naming ``where`` when it is not one."""
    if not isinstance(text, str) or len(text) > 4096:
        raise SpecError("InvalidSpec", f"{where} must be a label selector of at most 4096 characters")
    terms = _split_terms(text)
    if len(terms) > MAX_TERMS:
        raise SpecError("InvalidSpec", f"{where} has more than {MAX_TERMS} requirements")
    out = []
    for term in terms:
        found = _SET.match(term)
        if not found:
            raise SpecError("InvalidSpec", f"{where}: {term.strip()[:80]!r} is not a label selector requirement")
        negated, key, equality, value, set_op, members = found.groups()
        if negated and (equality or set_op):
            raise SpecError("InvalidSpec", f"{where}: {term.strip()[:80]!r} is not a label selector requirement")
        if equality:
            out.append(Requirement(key, "!=" if equality == "!=" else "=", frozenset({value})))
        elif set_op:
            values = frozenset(v.strip() for v in members.split(",") if v.strip())
            out.append(Requirement(key, set_op, values))
        else:
            out.append(Requirement(key, "!exists" if negated else "exists"))
    return tuple(out)


@dataclass(frozen=True)
class Selector:
    patterns: tuple[tuple[str, Any], ...] = ()  # (field, compiled expression)
    labels: tuple[Requirement, ...] = ()
    annotations: tuple[Requirement, ...] = ()

    def matches(self, obj: dict[str, Any]) -> bool:
        group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
        meta = obj.get("metadata") or {}
        values = {"group": group, "version": version, "kind": str(obj.get("kind", "")),
                  "name": str(meta.get("name", "")), "namespace": str(meta.get("namespace") or "")}
        if any(not pattern.fullmatch(values[name]) for name, pattern in self.patterns):
            return False
        labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
        return all(r.matches(labels) for r in self.labels) and all(r.matches(annotations) for r in self.annotations)


def parse_selector(raw: Any, where: str) -> Selector:
    """A ``target`` map as a :class:`Selector` (an absent one selects every object)."""
    if raw is None:
        return Selector()
    if not isinstance(raw, dict):
        raise SpecError("InvalidSpec", f"{where} must be a map")
    patterns = tuple((name, compile_pattern(str(raw[name]), f"{where}.{name}")) for name in FIELDS if raw.get(name))
    return Selector(patterns, parse_label_selector(raw.get("labelSelector") or "", f"{where}.labelSelector"),
                    parse_label_selector(raw.get("annotationSelector") or "", f"{where}.annotationSelector"))
