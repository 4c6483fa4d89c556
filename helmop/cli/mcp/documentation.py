"""``helmop mcp``'s docs tool: helmop's own documentation (the Markdown pages under ``docs/``) searched by words.

The pages ship in the repository, next to the package, not inside it: a checkout or an editable install has them
(:data:`DOCS`), a wheel does not, and there the tool is not offered (:func:`installed`)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import helmop

from ..errors import Failed
from .reads import CUT, bounded

DOCS = Path(helmop.__file__).resolve().parent.parent / "docs"
MAX_PAGES = 20  # pages in an answer at most
EXCERPTS = 3  # passages of a page
EXCERPT = 600  # characters of a passage
MAX_WORDS = 20


def installed(root: Path = DOCS) -> Path | None:
    """The docs folder, when its pages are there."""
    return root if root.is_dir() and any(root.rglob("*.md")) else None


async def search(root: Path, words: str, limit: int) -> dict[str, Any]:
    """The pages holding the most of ``words`` (then the most occurrences), each with its best passages."""
    wanted = list(dict.fromkeys(w.lower() for w in re.findall(r"[\w.-]+", words)))[:MAX_WORDS]
    if not wanted:
        raise Failed("give words to look for")
    found = await asyncio.to_thread(_matches, root, wanted)
    limit = max(1, min(limit, MAX_PAGES))
    return bounded({"pages": found[:limit], "more": max(0, len(found) - limit)})


def _matches(root: Path, wanted: list[str]) -> list[dict[str, Any]]:
    ranked: list[tuple[tuple[int, int], dict[str, Any]]] = []
    for page in sorted(root.rglob("*.md")):
        text = page.read_text(errors="replace")
        lower = text.lower()
        score = (sum(w in lower for w in wanted), sum(lower.count(w) for w in wanted))
        if not score[0]:
            continue
        title = next((line[2:].strip() for line in text.splitlines() if line.startswith("# ")), page.stem)
        ranked.append((score, {"page": str(page.relative_to(root)), "title": title,
                               "excerpts": _passages(text, wanted)}))
    ranked.sort(key=lambda r: r[0], reverse=True)  # (stable: equal scores stay in the pages' order)
    return [found for _, found in ranked]


def _passages(text: str, wanted: list[str]) -> list[str]:
    """The paragraphs holding the most of the words, in the page's order, each cut to :data:`EXCERPT`."""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    scored = [(sum(w in p.lower() for w in wanted), i) for i, p in enumerate(paragraphs)]
    best = sorted(i for _, i in sorted((s for s in scored if s[0]), key=lambda s: -s[0])[:EXCERPTS])
    return [p if len(p) <= EXCERPT else p[:EXCERPT] + CUT for p in (paragraphs[i] for i in best)]
