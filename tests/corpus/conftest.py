"""The corpus module's table of results, printed at the end of the run (in CI's output too)."""

from __future__ import annotations

import pytest

RESULTS: list[dict[str, str]] = []
COLUMNS = ("chart", "version", "raw helm", "helmop", "upgrade", "helm test", "seconds")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not RESULTS:
        return
    terminalreporter.section("public-chart corpus: raw helm 4 and helmop")
    widths = [max(len(c), *(len(r.get(c, "")) for r in RESULTS)) for c in COLUMNS]
    for row in (dict(zip(COLUMNS, COLUMNS, strict=True)), *RESULTS):
        terminalreporter.write_line("  ".join(row.get(c, "-").ljust(w) for c, w in zip(COLUMNS, widths, strict=True)))
