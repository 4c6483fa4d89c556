"""Flux's setter markers, rewritten: a scalar followed on its line by ``# {"$imagepolicy": "<ns>:<policy>"}`` (the
whole image, ``name:tag[@digest]``), ``...:tag``, ``...:name`` or ``...:digest`` is set to what the policy chose.
Files are those Flux's automation reads: ``*.yaml``, ``*.yml`` and ``Kustomization`` holding the marker.

The edit is a splice, not a re-dump: each file is parsed only to find the scalars (where each starts and ends),
and only those characters change; comments, quoting, indentation and every other line stay as they are. A
value keeps its quoting style (a plain value that would read back as something else is double-quoted). A file
that is not YAML, or not UTF-8, is left alone and named. Pure."""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from helmop.api.status.images import ImageRef

MARKER = '"$imagepolicy"'
MAX_FILE = 2 << 20  # bytes of a file edited (a bigger one is named, not read)
_COMMENT = re.compile(r"^[ \t]+#[ \t]*(\{.*\})[ \t]*$")
_FIELDS = ("", "tag", "name", "digest")
_PROPERTIES = re.compile(r"(?:[&!]\S*\s+)*")


@dataclass(frozen=True, order=True)
class ObjectId:
    """What an object is, for the commit message (a kustomization.yaml has no name)."""

    kind: str = ""
    namespace: str = ""
    name: str = ""
    api_version: str = ""


@dataclass(frozen=True)
class Change:
    old_value: str
    new_value: str
    setter: str  # the marker's policy reference, as written ("apps:web:tag")


@dataclass
class Result:
    """What an update changed: file (relative to update.path) -> object -> its changes, in order."""

    files: dict[str, dict[ObjectId, list[Change]]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # files left alone, and why

    def add(self, path: str, obj: ObjectId, change: Change) -> None:
        self.files.setdefault(path, {}).setdefault(obj, []).append(change)

    def objects(self) -> dict[ObjectId, list[Change]]:
        out: dict[ObjectId, list[Change]] = {}
        for path in sorted(self.files):
            for obj, changes in self.files[path].items():
                out.setdefault(obj, []).extend(changes)
        return out

    def changes(self) -> list[Change]:
        return [c for changes in self.objects().values() for c in changes]


def candidate(path: str) -> bool:
    name = posixpath.basename(path)
    return name.endswith((".yaml", ".yml")) or name == "Kustomization"


def update(files: dict[str, bytes], refs: dict[str, ImageRef], namespace: str) -> tuple[dict[str, bytes], Result]:
    """The files that change (path -> new content) and what changed; ``refs``: each policy of ``namespace`` the
    automation reads -> what it chose. A marker naming another namespace's policy is never set."""
    out: dict[str, bytes] = {}
    result = Result()
    for path in sorted(files):
        data = files[path]
        if not candidate(path) or MARKER.encode() not in data:
            continue
        if len(data) > MAX_FILE:
            result.problems.append(f"{path}: larger than {MAX_FILE >> 20} MiB")
            continue
        try:
            text = data.decode()
            edited = _edit(text, path, refs, namespace, result)
        except (UnicodeDecodeError, yaml.YAMLError, RecursionError) as exc:
            result.problems.append(f"{path}: {type(exc).__name__}")
            continue
        if edited != text:
            out[path] = edited.encode()
    return out, result


def _edit(text: str, path: str, refs: dict[str, ImageRef], namespace: str, result: Result) -> str:
    splices: list[tuple[int, int, str]] = []
    for document in yaml.compose_all(text, Loader=yaml.SafeLoader):
        if document is None:
            continue
        obj = _identity(document)
        for node in _scalars(document):
            setter = _setter(text, node)
            if setter is None:
                continue
            new = _value(setter, refs, namespace)
            if new is None or new == node.value:
                continue
            start = node.start_mark.index  # past an anchor or tag before the value (&a !!str): they stay
            properties = _PROPERTIES.match(text, start, node.end_mark.index)
            start += len(properties.group(0)) if properties else 0
            splices.append((start, node.end_mark.index, _render(new, node.style)))
            result.add(path, obj, Change(str(node.value), new, setter))
    for start, end, value in sorted(splices, reverse=True):
        text = text[:start] + value + text[end:]
    return text


def _scalars(root: yaml.Node) -> list[yaml.ScalarNode]:
    """Every scalar on one line that is a mapping's value or a list's item (each node once: aliases are shared)."""
    found: list[yaml.ScalarNode] = []
    seen: set[int] = set()
    pending: list[yaml.Node] = [root]
    while pending:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            pending.extend(value for _, value in node.value)
        elif isinstance(node, yaml.SequenceNode):
            pending.extend(node.value)
        elif isinstance(node, yaml.ScalarNode) and node.start_mark.line == node.end_mark.line \
                and node.style in (None, "'", '"'):
            found.append(node)
    return sorted(found, key=lambda n: n.start_mark.index)


def _setter(text: str, node: yaml.ScalarNode) -> str | None:
    """The policy reference of the setter marker that ends the scalar's line, if any."""
    end = node.end_mark.index
    line_end = text.find("\n", end)
    match = _COMMENT.match(text[end:] if line_end < 0 else text[end:line_end])
    if match is None or MARKER not in match.group(1):
        return None
    try:
        marker = json.loads(match.group(1))
    except ValueError:
        return None
    setter = marker.get("$imagepolicy") if isinstance(marker, dict) else None
    return setter if isinstance(setter, str) else None


def _value(setter: str, refs: dict[str, ImageRef], namespace: str) -> str | None:
    parts = setter.split(":")
    if len(parts) not in (2, 3) or parts[0] != namespace:
        return None
    which = parts[2] if len(parts) == 3 else ""
    ref = refs.get(parts[1])
    if ref is None or which not in _FIELDS:
        return None
    value = {"": str(ref), "tag": ref.tag, "name": ref.name, "digest": ref.digest}[which]
    return value or None


def _render(value: str, style: str | None) -> str:
    if style == "'":
        return "'" + value.replace("'", "''") + "'"
    if style == '"' or not _plain(value):
        return json.dumps(value)
    return value


def _plain(value: str) -> bool:
    """Whether ``value`` written plain reads back as the same string (1.10 would read as a number)."""
    try:
        return bool(yaml.safe_load(value) == value) and ": " not in value and " #" not in value
    except yaml.YAMLError:
        return False


def _identity(document: yaml.Node) -> ObjectId:
    if not isinstance(document, yaml.MappingNode):
        return ObjectId()
    top = {str(k.value): v for k, v in document.value if isinstance(k, yaml.ScalarNode)}
    meta = top.get("metadata")
    fields: dict[str, Any] = {}
    if isinstance(meta, yaml.MappingNode):
        fields = {str(k.value): v.value for k, v in meta.value
                  if isinstance(k, yaml.ScalarNode) and isinstance(v, yaml.ScalarNode)}
    kind, version = top.get("kind"), top.get("apiVersion")
    return ObjectId(kind=str(kind.value) if isinstance(kind, yaml.ScalarNode) else "",
                    namespace=str(fields.get("namespace") or ""), name=str(fields.get("name") or ""),
                    api_version=str(version.value) if isinstance(version, yaml.ScalarNode) else "")
