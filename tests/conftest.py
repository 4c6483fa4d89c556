"""Shared fixtures: the sandbox (helmop_sandbox's pytest plugin), the real binaries (tests/tools.py)."""

from __future__ import annotations

import os

import pytest
from helmop_sandbox import Sandbox

from tests.tools import ROOT, Run, runner

TIERS = {"unit": "unit", "operations": "operations", "security": "operations", "corpus": "corpus", "image": "image"}
# The image tier (minutes of building) only when named: `pytest tests/image`, as scripts/test-image runs it.
collect_ignore = ["image"]
LONGEST_FIRST = {name: rank for rank, name in enumerate(("operations", "corpus", "security", "controllers"))}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test's tier marker, from its folder (tests/<folder>/...; anything else is integration). With
    HELMOP_TEST_PHASE=parallel the tests marked ``alone`` are left out, with =alone only they run: scripts/test
    runs the rest on both cores, then those one at a time (their bounds are on latency)."""
    for item in items:
        parts = item.path.relative_to(ROOT).parts
        folder = parts[1] if parts[0] == "tests" and len(parts) > 2 else ""
        item.add_marker(TIERS.get(folder, "integration"))
    # The longest folders first: with one module per worker, a long module started last keeps one core busy
    # alone at the end (a stable sort: each module's tests stay together and in order).
    items.sort(key=lambda i: LONGEST_FIRST.get(i.path.relative_to(ROOT).parts[1]
                                               if len(i.path.relative_to(ROOT).parts) > 2 else "", len(LONGEST_FIRST)))
    phase = os.environ.get("HELMOP_TEST_PHASE", "")
    if phase in ("parallel", "alone"):
        keep = [i for i in items if (i.get_closest_marker("alone") is not None) == (phase == "alone")]
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep


def _runner(sandbox: Sandbox) -> Run:
    return runner(sandbox.kubeconfig, sandbox.workdir)


@pytest.fixture(scope="session")
def run(sandbox: Sandbox) -> Run:
    """Run a real binary (kubectl, helm, helm3) against the sandbox."""
    return _runner(sandbox)
