"""Shared fixtures: the sandbox (helmop_sandbox's pytest plugin), the real binaries (tests/tools.py)."""

from __future__ import annotations

import pytest
from helmop_sandbox import Sandbox

from tests.tools import ROOT, Run, runner

TIERS = {"unit": "unit", "operations": "operations", "security": "operations", "corpus": "corpus"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test's tier marker, from its folder (tests/<folder>/...; anything else is integration)."""
    for item in items:
        parts = item.path.relative_to(ROOT).parts
        folder = parts[1] if parts[0] == "tests" and len(parts) > 2 else ""
        item.add_marker(TIERS.get(folder, "integration"))


def _runner(sandbox: Sandbox) -> Run:
    return runner(sandbox.kubeconfig, sandbox.workdir)


@pytest.fixture(scope="session")
def run(sandbox: Sandbox) -> Run:
    """Run a real binary (kubectl, helm, helm3) against the sandbox."""
    return _runner(sandbox)
