"""Who owns an object's fields, from its ``metadata.managedFields`` (the FieldsV1 trie: ``f:<field>``,
``k:<merge keys>`` and ``v:<value>`` for list items), and what a ConfigSync's apply does about fields it leaves
to others (spec.ignore; kustomize-controller's ``fluxcd/pkg/ssa`` semantics). Pure.

An ignored field whose value the apply would change is resolved by ownership: when another manager applied it
(server-side apply), it is left out of the apply, so that manager keeps it; otherwise (this ConfigSync applied
it, or only updates such as ``kubectl edit`` wrote it) the live value is applied, so the field stays this
ConfigSync's without being reverted.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from helmop.api import pointers

Tokens = tuple[str, ...]


def _item_key(node: dict[str, Any], item: Any) -> str | None:
    """The key under which the trie ``node`` (a list's) holds ``item``: its merge keys or its value."""
    for key in node:
        kind, _, raw = key.partition(":")
        try:
            said = json.loads(raw) if kind in ("k", "v") else None
        except ValueError:
            continue
        if kind == "k" and isinstance(said, dict) and isinstance(item, dict) \
                and all(item.get(k) == v for k, v in said.items()):
            return key
        if kind == "v" and said == item:
            return key
    return None


def _owns(fields: dict[str, Any], live: dict[str, Any], tokens: Tokens) -> bool:
    """Whether the trie ``fields`` of one manager holds the field ``tokens`` point at in ``live`` (a field
    inside one it owns whole counts)."""
    node = fields
    for i, token in enumerate(tokens):
        if not node and i:
            return True  # an atomic value owned whole
        in_list = isinstance(pointers.get(live, tokens[:i]), list)
        key = _item_key(node, pointers.get(live, tokens[:i + 1])) if in_list else f"f:{token}"
        child = node.get(key) if key is not None else None
        if not isinstance(child, dict):
            return False
        node = child
    return True


def applied_by_others(live: dict[str, Any], tokens: Tokens, manager: str) -> bool:
    """Whether a manager other than ``manager`` applied (server-side apply) the field at ``tokens``."""
    for entry in (live.get("metadata") or {}).get("managedFields") or []:
        if entry.get("operation") != "Apply" or entry.get("manager") == manager or entry.get("subresource"):
            continue
        if _owns(entry.get("fieldsV1") or {}, live, tokens):
            return True
    return False


def resolved(desired: dict[str, Any], live: dict[str, Any], dry_run: dict[str, Any],
             ignored: tuple[Tokens, ...], manager: str) -> dict[str, Any]:
    """``desired`` as applied over ``live`` under ``manager``: each ignored field the apply would change (the dry
    run says how) left out when another manager applied it, else set to its live value."""
    out = copy.deepcopy(desired)
    for tokens in ignored:
        now = pointers.get(live, tokens)
        if now == pointers.get(dry_run, tokens):
            continue
        if now is pointers.MISSING or applied_by_others(live, tokens, manager):
            pointers.remove(out, tokens)
        else:
            pointers.put(out, tokens, copy.deepcopy(now))
    return out


# Managers whose fields a ConfigSync takes over before it applies (unless the object says ssa: Merge), so that what
# they wrote and git does not hold is removed, as kustomize-controller does: kubectl's (any verb: the name is a
# prefix, kubectl-edit, kubectl-client-side-apply...), client-side apply's first write, and kustomize-controller's
# own updates from before it applied server-side.
TAKEN_OVER = (("kubectl", "Apply"), ("kubectl", "Update"), ("before-first-apply", "Update"),
              ("kustomize-controller", "Update"))
# Marks of client-side apply and of old Flux versions, removed with them
STALE_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration", "kustomize.toolkit.fluxcd.io/checksum",
                     "fluxcd.io/sync-checksum")
STALE_LABELS = ("fluxcd.io/sync-gc-mark",)


def _union(into: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    """Two FieldsV1 tries as one (the fields of both)."""
    out = copy.deepcopy(into)
    for key, child in more.items():
        both = isinstance(out.get(key), dict) and isinstance(child, dict)
        out[key] = _union(out[key], child) if both else copy.deepcopy(child)
    return out


def _taken(entry: dict[str, Any]) -> bool:
    return not entry.get("subresource") and any(
        str(entry.get("manager", "")).startswith(name) and entry.get("operation") == operation
        for name, operation in TAKEN_OVER)


def taken_over(live: dict[str, Any], manager: str) -> list[dict[str, Any]]:
    """A JSON patch giving ``manager`` (as an Apply entry) the fields of the managers in TAKEN_OVER, and removing
    STALE_ANNOTATIONS and STALE_LABELS; none when ``live`` has nothing of them."""
    meta = live.get("metadata") or {}
    entries = meta.get("managedFields") or []
    taken = [entry for entry in entries if _taken(entry)]
    patch: list[dict[str, Any]] = []
    if taken:
        kept = [copy.deepcopy(entry) for entry in entries if not _taken(entry)]
        ours = next((entry for entry in kept if entry.get("manager") == manager
                     and entry.get("operation") == "Apply" and not entry.get("subresource")), None)
        if ours is None:
            ours = {"manager": manager, "operation": "Apply", "apiVersion": live.get("apiVersion", ""),
                    "fieldsType": "FieldsV1", "fieldsV1": {}}
            kept.append(ours)
        for entry in taken:
            ours["fieldsV1"] = _union(ours.get("fieldsV1") or {}, entry.get("fieldsV1") or {})
        patch.append({"op": "replace", "path": "/metadata/managedFields", "value": kept})
    for part, keys in (("annotations", STALE_ANNOTATIONS), ("labels", STALE_LABELS)):
        patch += [{"op": "remove", "path": f"/metadata/{part}/{key.replace('~', '~0').replace('/', '~1')}"}
                  for key in keys if key in (meta.get(part) or {})]
    return patch
