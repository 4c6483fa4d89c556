"""The docs' command blocks, for the tests that run them: every ```bash block in docs/ (and in the README)
has a name, given by an HTML comment on the line above it (``<!-- block: NAME -->``), and a test that runs
it asks for it here by page and name (tests/test_docs.py checks that each has one)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from tests.tools import ROOT

DOCS = ROOT / "docs"
_BLOCK = re.compile(r"^ *```bash\n(.*?)^ *```", re.S | re.M)
_NAME = re.compile(r"<!-- block: ([\w-]+) -->\n$")
_FILE = re.compile(r"^ *<!-- file: (\S+) -->\n *```\w*\n(.*?)^ *```", re.S | re.M)


def pages() -> list[Path]:
    return [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"]


def page_name(path: Path) -> str:
    return "README.md" if path == ROOT / "README.md" else path.relative_to(DOCS).as_posix()


def blocks(page: str) -> list[tuple[str, str]]:
    """(name, commands) of each bash block of ``page`` (a path under docs/, or README.md), in order; the
    name is "" for a block without one."""
    text = (ROOT / page if page == "README.md" else DOCS / page).read_text()
    out = []
    for match in _BLOCK.finditer(text):
        before = text[:match.start()]
        named = _NAME.search(before[before.rstrip("\n").rfind("\n") + 1:] if before else "")
        out.append((named.group(1) if named else "", textwrap.dedent(match.group(1))))
    return out


def block(page: str, name: str) -> str:
    """The commands of the block named ``name`` on ``page``."""
    found = [commands for named, commands in blocks(page) if named == name]
    assert len(found) == 1, f"{page}: {len(found)} blocks named {name!r}"
    return found[0]


def files(page: str) -> dict[str, str]:
    """The files a page shows (a ``<!-- file: PATH -->`` line above a code block): path -> content."""
    return {path: textwrap.dedent(body) for path, body in _FILE.findall((DOCS / page).read_text())}
