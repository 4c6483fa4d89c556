"""Shared fixtures: the sandbox (helmop_sandbox's pytest plugin), the real binaries (tests/tools.py)."""

from __future__ import annotations

import collections
import json
import os
import signal
from pathlib import Path

import pytest
from helmop_sandbox import Sandbox

from tests.tools import ROOT, Run, runner

# The Go tools the tests run (kubectl and helm, ~3700 processes a run, two fifths of the suite's CPU) live for a
# fraction of a second: a garbage collector four times as lazy takes ~20% off each (measured), as helmop's own helm
# runs (helm.engine.HELM_GOGC). Set before any process is started, so the operators' children have it too.
os.environ.setdefault("GOGC", "400")
# A run started in the background of a script inherits SIGINT ignored (a shell without job control ignores it in
# asynchronous commands), and so would every process a test starts: one a test interrupts (--watch, --follow) would
# never stop. The tests' processes take SIGINT as from a terminal.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

TIERS = {"unit": "unit", "operations": "operations", "security": "operations", "corpus": "corpus", "image": "image"}
# The image tier (minutes of building) only when named: `pytest tests/image`, as scripts/test-image runs it.
collect_ignore = ["image"]
# Seconds each module's tests took in a run (tests/durations.json): scripts/test has xdist hand the modules out in
# that order, the longest first, so that no long module starts last and keeps one core busy alone at the end. A
# module it does not name yet counts :data:`NEW_MODULE` seconds. `HELMOP_DURATIONS=tests/durations.json scripts/test`
# writes it anew from that run's figures.
DURATIONS = ROOT / "tests" / "durations.json"
NEW_MODULE = 10.0
_took: collections.Counter[str] = collections.Counter()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test's tier marker, from its folder (tests/<folder>/...; anything else is integration). With
    HELMOP_TEST_PHASE=parallel the tests marked ``alone`` are left out, with =alone only they run: scripts/test
    runs the rest on both cores, then those one at a time (their bounds are on latency)."""
    for item in items:
        parts = item.path.relative_to(ROOT).parts
        folder = parts[1] if parts[0] == "tests" and len(parts) > 2 else ""
        item.add_marker(TIERS.get(folder, "integration"))
    took = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    # a stable sort: each module's tests stay together and in their order
    items.sort(key=lambda i: -took.get(i.nodeid.split("::")[0], NEW_MODULE))
    phase = os.environ.get("HELMOP_TEST_PHASE", "")
    if phase in ("parallel", "alone"):
        keep = [i for i in items if (i.get_closest_marker("alone") is not None) == (phase == "alone")]
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if os.environ.get("HELMOP_DURATIONS"):
        _took[report.nodeid.split("::")[0]] += report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """With HELMOP_DURATIONS set, the seconds each module took, merged into that file (in the process that sees every
    worker's reports)."""
    out = os.environ.get("HELMOP_DURATIONS")
    if out and _took and not hasattr(session.config, "workerinput"):
        path = Path(out)
        took = json.loads(path.read_text()) if path.exists() else {}
        took.update({module: round(seconds, 1) for module, seconds in _took.items()})
        path.write_text(json.dumps(dict(sorted(took.items())), indent=0) + "\n")


def _runner(sandbox: Sandbox) -> Run:
    return runner(sandbox.kubeconfig, sandbox.workdir)


@pytest.fixture(scope="session")
def run(sandbox: Sandbox) -> Run:
    """Run a real binary (kubectl, helm, helm3) against the sandbox."""
    return _runner(sandbox)
