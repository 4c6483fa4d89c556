"""The image tier's report: how its build went (each step's duration, the image's size), after the results."""

from __future__ import annotations

import pytest

BUILT = pytest.StashKey[str]()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if BUILT in config.stash:
        terminalreporter.section("the image's build")
        terminalreporter.write(config.stash[BUILT])
