"""JSON pointers (RFC 6901) over decoded JSON: parsed, and a value read, removed or set where one points. Pure.

A pointer is a string of ``/``-led reference tokens (``~1`` stands for ``/``, ``~0`` for ``~``); a token names a
map's key, or a list's index in decimal. What a pointer names may be absent: reading gives :data:`MISSING`,
removing does nothing."""

from __future__ import annotations

import re
from typing import Any

from .errors import SpecError

MISSING: Any = object()  # what a pointer reads where nothing is
_INDEX = re.compile(r"0|[1-9][0-9]*")


def parse(text: Any, where: str) -> tuple[str, ...]:
    """The reference tokens of ``text``; SpecError naming ``where`` when it is no pointer to a field (the whole
    document, ``""``, is none either)."""
    if not isinstance(text, str) or not text.startswith("/") or len(text) > 1024:
        raise SpecError("InvalidSpec", f"{where}: {str(text)[:80]!r} is not a JSON pointer (RFC 6901: /-separated "
                                       "tokens, such as /spec/replicas)")
    tokens = text[1:].split("/")
    if any(re.search(r"~(?![01])", token) for token in tokens):
        raise SpecError("InvalidSpec", f"{where}: {text[:80]!r} is not a JSON pointer (~ must be written ~0)")
    return tuple(token.replace("~1", "/").replace("~0", "~") for token in tokens)


def _step(node: Any, token: str) -> Any:
    if isinstance(node, dict):
        return node.get(token, MISSING)
    if isinstance(node, list) and _INDEX.fullmatch(token) and int(token) < len(node):
        return node[int(token)]
    return MISSING


def get(doc: Any, tokens: tuple[str, ...]) -> Any:
    """The value at ``tokens`` in ``doc``, or :data:`MISSING`."""
    node = doc
    for token in tokens:
        node = _step(node, token)
        if node is MISSING:
            break
    return node


def remove(doc: Any, tokens: tuple[str, ...]) -> None:
    """Remove what ``tokens`` point at in ``doc`` (in place), when it is there."""
    parent = get(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        parent.pop(last, None)
    elif isinstance(parent, list) and _INDEX.fullmatch(last) and int(last) < len(parent):
        del parent[int(last)]


def put(doc: dict[str, Any], tokens: tuple[str, ...], value: Any) -> None:
    """Set what ``tokens`` point at in ``doc`` to ``value`` (in place), making the maps on the way; a list index
    on the way or at the end must exist."""
    node: Any = doc
    for token in tokens[:-1]:
        following = _step(node, token)
        if following is MISSING and isinstance(node, dict):
            following = node[token] = {}
        if following is MISSING:
            return
        node = following
    last = tokens[-1]
    if isinstance(node, dict):
        node[last] = value
    elif isinstance(node, list) and _INDEX.fullmatch(last) and int(last) < len(node):
        node[int(last)] = value
