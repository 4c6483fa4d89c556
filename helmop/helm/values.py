"""Values merging with Helm's semantics: maps merge deeply, lists and scalars replace.

(pyhelm3's ``mergeconcat`` concatenates lists, which Helm never does, so merging happens here.)
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import re
from typing import Any

import yaml

from helmop.api import yamlc
from helmop.api.helmrelease import ValuesReference
from helmop.api.manifests import YamlProblem

Values = dict[str, Any]


def merge(base: Values, override: Values) -> Values:
    """``override`` over ``base``, as ``helm -f base -f override`` does; a null deletes a key."""
    out = copy.deepcopy(base)
    _merge_into(out, override, owned=False)
    return out


def _merge_into(out: Values, override: Values, *, owned: bool) -> None:
    """``override`` merged into ``out`` in place; its values are copied unless ``owned`` (built for this
    merge alone). One copy at most, whatever the depth: large values documents merge in linear time."""
    for key, value in override.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            _merge_into(out[key], value, owned=owned)
        else:
            out[key] = value if owned else copy.deepcopy(value)


def parse_values(text: str, where: str) -> Values:
    """A values document; ValueError naming ``where`` when it is not a YAML map."""
    try:
        loaded = yamlc.load(text)
    except yaml.YAMLError as exc:
        found = YamlProblem.of(exc)
        raise ValueError(f"{where} is not valid YAML{found.at}: {found.problem}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ValueError(f"{where} must be a YAML map of values, not a {type(loaded).__name__}")
    return loaded


_SEGMENT = re.compile(r"((?:\\.|[^.\[\]])+)((?:\[\d+\])*)")


def _split_path(path: str) -> list[str | int]:
    """``a.b\\.c[0].d`` -> ["a", "b.c", 0, "d"] (helm's --set path syntax)."""
    out: list[str | int] = []
    pos = 0
    while pos < len(path):
        m = _SEGMENT.match(path, pos)
        if not m:
            raise ValueError(f"invalid targetPath {path!r} at position {pos}")
        out.append(m.group(1).replace("\\.", ".").replace("\\\\", "\\"))
        out.extend(int(i) for i in re.findall(r"\[(\d+)\]", m.group(2)))
        pos = m.end()
        if pos < len(path):
            if path[pos] != ".":
                raise ValueError(f"invalid targetPath {path!r} at position {pos}")
            pos += 1
    if not out:
        raise ValueError("targetPath is empty")
    return out


def set_path(values: Values, path: str, value: Any) -> Values:
    """A copy of ``values`` with ``value`` at ``path`` (like ``helm --set-string path=value``)."""
    out = copy.deepcopy(values)
    parts = _split_path(path)
    node: Any = out
    for part, following in itertools.pairwise(parts):
        fresh: Any = [] if isinstance(following, int) else {}
        if isinstance(part, int):
            while len(node) <= part:
                node.append(None)
            if not isinstance(node[part], dict | list):
                node[part] = fresh
            node = node[part]
        else:
            if not isinstance(node.get(part), dict | list):
                node[part] = fresh
            node = node[part]
    last = parts[-1]
    if isinstance(last, int):
        while len(node) <= last:
            node.append(None)
    node[last] = value
    return out


def typed(text: str) -> Any:
    """A ``--set`` style scalar: true/false/null and integers are typed, the rest stays a string
    (how Flux types a valuesFrom targetPath value)."""
    low = text.strip()
    if low in ("true", "false"):
        return low == "true"
    if low == "null":
        return None
    digits = low.lstrip("-")
    if digits.isdigit() and not (len(digits) > 1 and digits.startswith("0")):
        return int(low)
    return text


def compose(pieces: list[tuple[ValuesReference, str]], inline: Values, base: Values | None = None) -> Values:
    """A release's values, as Flux composes them: ``base`` (a git chart's valuesFiles), then each
    valuesFrom piece in order (a whole document merged, or one value at its targetPath: typed as ``--set`` types
    it, or with ``literal`` the string as it is), then the
    spec's inline ``values`` over all. ValueError names the piece at fault."""
    values = copy.deepcopy(base or {})
    for ref, text in pieces:
        if ref.target_path:
            values = set_path(values, ref.target_path, text if ref.literal else typed(text))
        else:  # a document parsed here and now: merged without copying it
            _merge_into(values, parse_values(text, f"{ref.kind} {ref.name} key {ref.values_key}"), owned=True)
    _merge_into(values, inline, owned=False)
    return values


def digest(*parts: Any) -> str:
    """A stable digest of JSON-able data: same content, same digest, whatever the key order."""
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
