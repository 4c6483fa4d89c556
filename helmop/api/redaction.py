"""Masking secret values in text that leaves helmop (status messages, Events, logs).

A chart can echo a value it was given in transformed form (``upper``, ``b64enc``, ``trunc 10``,
``quote``, ``toJson``), so exact matching is not enough. A secret is looked for as itself, in any
letter case, base64-encoded (standard and URL-safe, with or without padding) and JSON-escaped; and
any fragment of 8 or more characters of any of those forms is masked too. Pure.
"""

from __future__ import annotations

import base64
import json

MASK = "***"
FRAGMENT = 8  # the shortest piece of a secret that is masked on its own
_SHORTEST = 4  # shorter values are too common to mask without mangling ordinary text


def _forms(secret: str) -> set[str]:
    raw = secret.encode()
    encoded = {base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()}
    return {secret, json.dumps(secret)[1:-1], *encoded, *(e.rstrip("=") for e in encoded)}


def redact(text: str, secrets: list[str]) -> str:
    """``text`` with every occurrence of a secret, in any of the forms above, replaced by ``***``."""
    low = text.lower()
    masked = [False] * len(text)
    for secret in {s for s in secrets if len(s) >= _SHORTEST}:
        for form in _forms(secret):
            form = form.lower()
            pieces = {form} if len(form) < FRAGMENT else {form[i:i + FRAGMENT] for i in range(len(form) - FRAGMENT + 1)}
            for piece in pieces:
                start = low.find(piece)
                while start >= 0:
                    masked[start:start + len(piece)] = [True] * len(piece)
                    start = low.find(piece, start + 1)
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
