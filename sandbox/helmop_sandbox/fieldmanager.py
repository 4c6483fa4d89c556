"""Field ownership (``metadata.managedFields``) and server-side apply.

Each write records which manager owns which fields, in the FieldsV1 trie format real servers use
(``f:<field>``, ``k:<keys json>`` for items of associative lists, ``v:<json>`` for set members).
Apply merges the applied configuration into the live object, removes fields the applier owned
before but no longer sets (unless someone else owns them too), and reports a conflict when it would
change a value another manager owns — unless ``force`` is given, which takes the fields over.
Status is left out of ownership for kinds with a status subresource, as status writers differ.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .errors import ApiError, Cause
from .schemas import Schema, child, is_set, items, list_keys
from .store import clone

Path = tuple[str, ...]
_MISSING = object()
# Metadata the server owns; never part of anybody's field set.
_SERVER_META = {"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
                "managedFields", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_SHADOWED = object()  # a leaf of a list item with the key of an earlier item: value_at finds that earlier one


@dataclass
class Fields:
    nodes: set[Path]
    leaves: dict[Path, Any]  # each with its value, kept as it was met: no walk from the root to compare it

    @property
    def all(self) -> set[Path]:
        return self.nodes | self.leaves.keys()

    def value(self, obj: Any, path: Path) -> Any:
        """``value_at(obj, path)``, ``obj`` being what these fields were collected from."""
        found = self.leaves.get(path, _SHADOWED)
        return value_at(obj, path) if found is _SHADOWED else found


# Defaults of list-map key fields: an applied `ports: [{containerPort: 80}]` must match the live
# item that defaulting gave `protocol: TCP` (upstream declares this default in its OpenAPI).
_KEY_DEFAULTS = {"protocol": "TCP"}


def _item_key(item: dict[str, Any], keys: list[str]) -> str:
    return "k:" + json.dumps({k: item.get(k, _KEY_DEFAULTS.get(k)) for k in keys}, separators=(",", ":"))


def collect(obj: dict[str, Any], schema: Schema | None, *, skip_status: bool) -> Fields:
    """Every field path of ``obj`` that can be owned."""
    out = Fields(set(), {})
    for key, value in obj.items():
        if key in ("apiVersion", "kind") or (key == "status" and skip_status):
            continue
        if key == "metadata" and isinstance(value, dict):
            value = {k: v for k, v in value.items() if k not in _SERVER_META}
            if not value:
                continue
        _collect(value, child(schema, key), ("f:" + key,), out)
    return out


def _collect(value: Any, schema: Schema | None, prefix: Path, out: Fields, shadowed: bool = False) -> None:
    if isinstance(value, dict) and value:
        out.nodes.add(prefix)
        for key, sub in value.items():
            _collect(sub, child(schema, key), (*prefix, "f:" + key), out, shadowed)
    elif isinstance(value, list) and value:
        keys = list_keys(schema)
        if keys and all(isinstance(i, dict) for i in value):
            out.nodes.add(prefix)
            for item in value:
                path = (*prefix, _item_key(item, keys))
                duplicate = shadowed or path in out.nodes
                out.nodes.add(path)
                for key, sub in item.items():
                    _collect(sub, child(items(schema), key), (*path, "f:" + key), out, duplicate)
        elif is_set(schema):
            out.nodes.add(prefix)
            for item in value:
                out.leaves.setdefault((*prefix, "v:" + json.dumps(item, separators=(",", ":"))),
                                      _SHADOWED if shadowed else item)
        else:
            out.leaves.setdefault(prefix, _SHADOWED if shadowed else value)
    else:
        out.leaves.setdefault(prefix, _SHADOWED if shadowed else value)


def _matches(item: dict[str, Any], key_json: str) -> bool:
    return _item_key(item, list(json.loads(key_json))) == "k:" + key_json


def value_at(obj: Any, path: Path) -> Any:
    node = obj
    for step in path:
        kind, _, rest = step.partition(":")
        if kind == "f" and isinstance(node, dict) and rest in node:
            node = node[rest]
        elif kind == "k" and isinstance(node, list):
            node = next((i for i in node if isinstance(i, dict) and _matches(i, rest)), _MISSING)
        elif kind == "v" and isinstance(node, list):
            value = json.loads(rest)
            node = value if value in node else _MISSING
        else:
            return _MISSING
        if node is _MISSING:
            return _MISSING
    return node


def remove_at(obj: Any, path: Path) -> None:
    parent = value_at(obj, path[:-1])
    kind, _, rest = path[-1].partition(":")
    if kind == "f" and isinstance(parent, dict):
        parent.pop(rest, None)
    elif kind == "k" and isinstance(parent, list):
        parent[:] = [i for i in parent if not (isinstance(i, dict) and _matches(i, rest))]
    elif kind == "v" and isinstance(parent, list):
        value = json.loads(rest)
        parent[:] = [i for i in parent if i != value]


# --- FieldsV1 (de)serialisation ----------------------------------------------------------------


def to_fields_v1(paths: set[Path]) -> dict[str, Any]:
    root: dict[str, Any] = {}
    for path in sorted(paths):
        node = root
        for step in path:
            node = node.setdefault(step, {})
        if path[-1].startswith("k:"):
            node.setdefault(".", {})
    return root


def from_fields_v1(tree: dict[str, Any], prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    for step, sub in tree.items():
        if step == ".":
            continue
        path = (*prefix, step)
        out.add(path)
        if isinstance(sub, dict):
            out |= from_fields_v1(sub, path)
    return out


@dataclass
class Entry:
    manager: str
    operation: str
    api_version: str
    time: str
    paths: set[Path]
    subresource: str = ""

    def to_json(self) -> dict[str, Any]:
        out = {"manager": self.manager, "operation": self.operation, "apiVersion": self.api_version,
               "time": self.time, "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(self.paths)}
        if self.subresource:
            out["subresource"] = self.subresource
        return out


def entries_of(obj: dict[str, Any]) -> list[Entry]:
    out = []
    for raw in obj.get("metadata", {}).get("managedFields") or []:
        if not isinstance(raw, dict):
            continue
        out.append(Entry(raw.get("manager", ""), raw.get("operation", "Update"), raw.get("apiVersion", ""),
                         raw.get("time", ""), from_fields_v1(raw.get("fieldsV1") or {}),
                         raw.get("subresource", "")))
    return out


def _store(obj: dict[str, Any], entries: list[Entry]) -> None:
    kept = [e.to_json() for e in entries if e.paths]
    if kept:
        obj.setdefault("metadata", {})["managedFields"] = kept
    else:
        obj.get("metadata", {}).pop("managedFields", None)


def _leaves_only(paths: set[Path], fields: Fields) -> set[Path]:
    return paths & fields.leaves.keys()


def track_update(old: dict[str, Any] | None, new: dict[str, Any], manager: str, api_version: str,
                 schema: Schema | None, *, skip_status: bool) -> None:
    """Record in ``new`` that ``manager`` changed what differs from ``old`` (create, update, patch)."""
    entries = entries_of(old) if old is not None else []
    new_fields = collect(new, schema, skip_status=skip_status)
    if old is None:
        changed, removed = new_fields.all, set()
    else:
        old_fields = collect(old, schema, skip_status=skip_status)
        removed = old_fields.all - new_fields.all
        changed = {p for p in new_fields.all if p not in old_fields.all
                   or (p in new_fields.leaves and old_fields.value(old, p) != new_fields.value(new, p))}
    if not changed and not removed:
        _store(new, entries)
        return
    # kube-apiserver's BuildManagerIdentifier: an Update entry is one per manager and apiVersion (only an
    # applier's is the same whatever version it applies in)
    mine = next((e for e in entries if e.manager == manager and e.operation == "Update"
                 and e.api_version == api_version), None)
    for e in entries:
        if e is not mine:
            e.paths -= removed | changed
    if mine is None:
        mine = Entry(manager, "Update", api_version, _now(), set())
        entries.append(mine)
    mine.paths = (mine.paths - removed) | changed
    mine.time = _now()
    _store(new, entries)


def _display(path: Path) -> str:
    out = ""
    for step in path:
        kind, _, rest = step.partition(":")
        if kind == "f":
            out += "." + rest
        elif kind == "k":
            out += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in json.loads(rest).items()) + "]"
        else:
            out += f"[={rest}]"
    return out


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _merge(live: Any, cfg: Any, schema: Schema | None) -> Any:
    if isinstance(cfg, dict) and isinstance(live, dict):
        out = dict(live)
        for key, value in cfg.items():
            out[key] = _merge(live.get(key), value, child(schema, key))
        return out
    if isinstance(cfg, list) and isinstance(live, list):
        keys = list_keys(schema)
        if keys and all(isinstance(i, dict) for i in cfg + live):
            merged = list(live)
            for item in cfg:
                ident = _item_key(item, keys)
                index = next((i for i, cur in enumerate(merged) if _item_key(cur, keys) == ident), None)
                if index is None:
                    merged.append(clone(item))
                else:
                    merged[index] = _merge(merged[index], item, items(schema))
            return merged
        if is_set(schema):
            return list(live) + [clone(v) for v in cfg if v not in live]
    return clone(cfg)


def _changes(live: Any, cfg: Any, path: Path) -> bool:
    """Whether applying ``cfg`` would change the live value at ``path``: a conflict needs a change. An
    empty map applied over a map that others fill (``data: {}``) merges into it and changes nothing."""
    before = value_at(live, path)
    if before is _MISSING:
        return False
    wanted = value_at(cfg, path)
    return bool(before != (_merge(before, wanted, None) if isinstance(wanted, dict) else wanted))


def apply(live: dict[str, Any] | None, cfg: dict[str, Any], manager: str, api_version: str,
          schema: Schema | None, *, force: bool, skip_status: bool) -> dict[str, Any]:
    """Server-side apply of ``cfg`` by ``manager``; returns the new object (live is not changed)."""
    cfg = _without_nulls(cfg)
    applied = collect(cfg, schema, skip_status=skip_status)
    entries = entries_of(live) if live is not None else []
    base = clone(live) if live is not None else {}
    mine = next((e for e in entries if e.manager == manager and e.operation == "Apply"), None)
    others = [e for e in entries if e is not mine]
    conflicts = [(e, p) for e in others for p in sorted(_leaves_only(e.paths, applied)) if _changes(base, cfg, p)]
    if conflicts and not force:
        causes = [Cause("FieldManagerConflict", f'conflict with "{e.manager}" using {e.api_version}',
                        _display(p)) for e, p in conflicts]
        plural = "s" if len(causes) > 1 else ""
        listed = "; ".join(f"{c.message}: {c.field}" for c in causes)
        raise ApiError("Conflict", f"Apply failed with {len(causes)} conflict{plural}: {listed}",
                       {}, causes)
    for e, p in conflicts:
        e.paths.discard(p)
    if mine is not None:
        still_owned = set().union(*(e.paths for e in others)) if others else set()
        dropped = {p for p in mine.paths - applied.all if p not in still_owned}
        for path in dropped:
            # Removing an item or map removes what is under it; its children need no visit (and
            # would change the item's key before the item itself is looked up).
            if not any(path[:i] in dropped for i in range(1, len(path))):
                remove_at(base, path)
    result: dict[str, Any] = _merge(base, cfg, schema)
    if mine is None:
        mine = Entry(manager, "Apply", api_version, _now(), set())
        entries.append(mine)
    mine.paths, mine.time, mine.api_version = applied.all, _now(), api_version
    _store(result, entries)
    return result
