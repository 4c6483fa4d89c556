"""Whether a chart needs helm's own ``--wait``: helm runs ``post-install``/``post-upgrade`` hooks after its
wait, so a chart with such a hook (a migration Job that needs the database up) must get it; without one,
helm may skip waiting for the objects and helmop judges them from its shared watches. Pure: reads a chart
directory or archive (its size already bounded), subcharts included, nested archives to a fixed depth.

The look is textual and errs towards helm's wait: a hook annotation whose value is templated, or not on
its line, counts as a post hook; so does a subchart archive too deep to open. An archive is looked into
once while it is unchanged (1000 releases of one chart read one cached archive)."""

from __future__ import annotations

import io
import re
import tarfile
import zlib
from pathlib import Path

from helmop.infra.filememo import FileMemo

_HOOK = re.compile(r"""["']?helm\.sh/hook["']?\s*:(.*)""")
_POST = ("post-install", "post-upgrade")
_DEPTH = 3  # archives within archives (a chart's charts/*.tgz)
_MAX_FILE = 5 << 20  # what helmop reads of one file (a subchart archive's files are not bounded by the fetch)
_MAX_ENTRIES, _MAX_WALKED = 20_000, 100 << 20  # entries and bytes of one look, as the fetch bounds a chart


def _post_hook(text: str) -> bool:
    for match in _HOOK.finditer(text):
        value = match.group(1)
        if any(event in value for event in _POST) or "{{" in value or not value.strip(" \t\"'"):
            return True
    return False


def _template(name: str) -> bool:
    return "/templates/" in f"/{name}"


def _subchart(name: str) -> bool:
    return name.endswith(".tgz") and "/charts/" in f"/{name}"


class _Budget:
    """What one look may walk through, all archives together: a subchart archive inside a chart is not bounded
    by the fetch's checks, and each of its headers and bytes costs time even when passed over."""

    def __init__(self) -> None:
        self.entries, self.size = _MAX_ENTRIES, _MAX_WALKED

    def spend(self, member: tarfile.TarInfo) -> bool:
        self.entries -= 1
        self.size -= member.size
        return self.entries >= 0 and self.size >= 0


_looked: FileMemo[str] = FileMemo()  # each archive's reason (the charts cache holds few)


def _look_into(chart: Path) -> str:
    with tarfile.open(chart) as archive:
        return _archive_reason(archive, 0, _Budget())


def _archive_reason(archive: tarfile.TarFile, depth: int, budget: _Budget) -> str:
    for member in archive:
        if not budget.spend(member):
            return "the chart is too large to look into"
        if not member.isfile() or not (_template(member.name) or _subchart(member.name)):
            continue
        if member.size > _MAX_FILE:
            return f"{member.name} is too large to look into"
        data = archive.extractfile(member)
        if data is None:
            continue
        if _subchart(member.name):
            if depth >= _DEPTH:
                return f"{member.name} is nested too deep to look into"
            with tarfile.open(fileobj=io.BytesIO(data.read())) as inner:
                reason = _archive_reason(inner, depth + 1, budget)
            if reason:
                return reason
        elif _post_hook(data.read().decode(errors="replace")):
            return f"{member.name} has a post-install or post-upgrade hook"
    return ""


def needs_helm_wait(chart: Path) -> str:
    """Why helm must wait for the release's objects itself ("": helmop may judge them)."""
    try:
        return _look(chart)
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        return f"the chart could not be looked into ({type(exc).__name__})"


def _look(chart: Path) -> str:
    if not chart.is_dir():
        return _looked.read(chart, _look_into)
    budget = _Budget()
    for file in sorted(chart.rglob("*")):
        name = file.relative_to(chart).as_posix()
        if file.is_symlink() or not file.is_file() or not (_template(name) or _subchart(name)):
            continue
        if file.stat().st_size > _MAX_FILE:
            return f"{name} is too large to look into"
        if _subchart(name):
            with tarfile.open(file) as archive:
                reason = _archive_reason(archive, 1, budget)
        elif _post_hook(file.read_text(errors="replace")):
            reason = f"{name} has a post-install or post-upgrade hook"
        else:
            continue
        if reason:
            return reason
    return ""
