"""Label and field selectors in the query-string syntax of list and watch requests."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .errors import bad_request

Matcher = Callable[[dict[str, Any]], bool]

_SET_EXPR = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")
_CMP_EXPR = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(==|=|!=|<|>)\s*([A-Za-z0-9_.-]*)\s*$")


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not inside ``in (...)`` parentheses."""
    terms, depth, current = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += ch
    if current.strip():
        terms.append(current)
    return terms


def _label_term(term: str) -> Callable[[dict[str, str]], bool]:
    m = _CMP_EXPR.match(term)
    if m:
        key, op, value = m.groups()
        if op in ("=", "=="):
            return lambda labels: labels.get(key) == value
        if op == "!=":
            return lambda labels: labels.get(key) != value
        try:
            bound = int(value)
        except ValueError:
            raise bad_request(f"unable to parse requirement: for 'Gt', 'Lt' operators, the value must "
                              f"be an integer: {term}") from None
        if op == "<":
            return lambda labels: key in labels and labels[key].isdigit() and int(labels[key]) < bound
        return lambda labels: key in labels and labels[key].isdigit() and int(labels[key]) > bound
    m = _SET_EXPR.match(term)
    if not m:
        raise bad_request(f"unable to parse requirement: found '{term}', expected a valid selector")
    negate, key, op, values_text = m.groups()
    if op:
        if negate:
            raise bad_request(f"unable to parse requirement: '!' cannot be used with '{op}'")
        values = {v.strip() for v in values_text.split(",")}
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if negate:
        return lambda labels: key not in labels
    return lambda labels: key in labels


def label_matcher(text: str | None) -> Matcher | None:
    if not text or not text.strip():
        return None
    terms = [_label_term(t) for t in _split_terms(text)]

    def match(obj: dict[str, Any]) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(t(labels) for t in terms)

    return match


def required_labels(text: str | None) -> dict[str, str]:
    """The labels every object a selector picks must carry (its ``k=v``, ``k==v`` and ``k in (v)`` terms): what a
    list can look up in an index before matching the whole selector. Malformed terms are left to the matcher."""
    required: dict[str, str] = {}
    for term in _split_terms(text or ""):
        m = _CMP_EXPR.match(term)
        if m and m.group(2) in ("=", "=="):
            required[m.group(1)] = m.group(3)
            continue
        m = _SET_EXPR.match(term)
        if m and m.group(3) == "in" and not m.group(1):
            values = {v.strip() for v in m.group(4).split(",")}
            if len(values) == 1:
                required[m.group(2)] = values.pop()
    return required


def _field_value(obj: dict[str, Any], path: str) -> str:
    node: Any = obj
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if node is None:
        return ""
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)


# Fields each kind can be selected by, beyond metadata.name/namespace (what kubectl and helm use).
SELECTABLE = {
    "Pod": {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
            "status.phase", "status.podIP", "status.nominatedNodeName"},
    "Event": {"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
              "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
              "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"},
    "Secret": {"type"},
    "Namespace": {"status.phase"},
    "ReplicaSet": {"status.replicas"},
    "Job": {"status.successful"},
    "Node": {"spec.unschedulable"},
}


def field_matcher(text: str | None, kind: str) -> Matcher | None:
    if not text or not text.strip():
        return None
    allowed = {"metadata.name", "metadata.namespace"} | SELECTABLE.get(kind, set())
    checks: list[tuple[str, bool, str]] = []
    for term in _split_terms(text):
        m = re.match(r"^\s*([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*?)\s*$", term)
        if not m:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        name, op, value = m.groups()
        if name not in allowed:
            raise bad_request(f'field label not supported: {name}')
        checks.append((name, op != "!=", value))

    def match(obj: dict[str, Any]) -> bool:
        return all((_field_value(obj, name) == value) == equal for name, equal, value in checks)

    return match


def single_name(text: str | None) -> str | None:
    """The name a field selector pins (``metadata.name=x``), so a list can skip the scan."""
    if not text:
        return None
    m = re.fullmatch(r"\s*metadata\.name\s*==?\s*([^,\s]+)\s*", text)
    return m.group(1) if m else None


def selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A LabelSelector object (matchLabels, matchExpressions) against labels; none or {} matches all."""
    selector = selector or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
        present = key in labels
        if (op == "In" and labels.get(key) not in values) or (op == "NotIn" and present and labels[key] in values) \
                or (op == "Exists" and not present) or (op == "DoesNotExist" and present):
            return False
    return True
