"""Masking secret values in text that leaves helmop (status messages, Events, logs).

A chart can echo a value it was given in transformed form (``upper``, ``b64enc``, ``trunc 7``, ``quote``,
``toJson``, ``urlquery``, ``wrap``, a hex or base32 dump, inside a longer string), so exact matching is not
enough. A secret is looked for as itself, in any letter case, JSON-escaped, URL-encoded, hex, base32, and
base64 (standard and URL-safe, with or without padding, at each of the three alignments it can have
inside a longer encoded string); whitespace in the text is ignored while matching (a wrapped or split
value still matches), and any fragment of 6 or more characters of any of those forms is masked too. Pure.
"""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import quote, quote_plus, urlsplit, urlunsplit

MASK = "***"
FRAGMENT = 6  # the shortest piece of a secret that is masked on its own
_SHORTEST = 4  # shorter values are too common to mask without mangling ordinary text


def _base64_forms(raw: bytes) -> set[str]:
    """The secret's base64 as it appears when the secret starts 0, 1 or 2 bytes into what was encoded:
    only the characters made of the secret's bits alone (the first ones carry the preceding bytes' bits,
    the last ones the following bytes')."""
    out = set()
    for offset, skip in ((0, 0), (1, 2), (2, 3)):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            text = encode(b"\0" * offset + raw).decode()
            if offset == 0:
                out |= {text, text.rstrip("=")}
            whole = (offset + len(raw)) // 3 * 4  # characters of complete groups
            out.add(text[skip:whole])
    return {form for form in out if form}


def _forms(secret: str) -> set[str]:
    raw = secret.encode()
    base32 = base64.b32encode(raw).decode()
    return {secret, json.dumps(secret)[1:-1], quote(secret, safe=""), quote_plus(secret, safe=""), raw.hex(),
            base32, base32.rstrip("="), *_base64_forms(raw)}


def redact(text: str, secrets: list[str]) -> str:
    """``text`` with every occurrence of a secret, in any of the forms above, replaced by ``***``."""
    low = text.lower()
    kept = [i for i, c in enumerate(low) if not c.isspace()]  # positions of the text without whitespace
    squeezed = "".join(low[i] for i in kept)
    masked = [False] * len(text)
    for secret in {s for s in secrets if len(s) >= _SHORTEST}:
        for form in _forms(secret):
            form = "".join(form.lower().split())
            if not form:
                continue
            pieces = {form} if len(form) < FRAGMENT else {form[i:i + FRAGMENT] for i in range(len(form) - FRAGMENT + 1)}
            for piece in pieces:
                start = squeezed.find(piece)
                while start >= 0:
                    first, last = kept[start], kept[start + len(piece) - 1]
                    masked[first:last + 1] = [True] * (last + 1 - first)
                    start = squeezed.find(piece, start + 1)
    out, i = [], 0
    while i < len(text):
        if masked[i]:
            while i < len(text) and masked[i]:
                i += 1
            out.append(MASK)
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def redact_data(value: Any, secrets: list[str]) -> Any:
    """``value`` (data: maps, lists, scalars) with every string masked as :func:`redact` masks text: the same
    data, still writable as YAML or JSON."""
    if isinstance(value, dict):
        return {k: redact_data(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_data(v, secrets) for v in value]
    return redact(value, secrets) if isinstance(value, str) else value


def safe_url(url: str) -> str:
    """The URL without user:password, for messages and status."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
