"""The architecture as checked rules: the import-linter contracts in pyproject.toml (layers, sub-layers
inside the operator, third-party clients only where they belong, the sandbox standing alone), and no
dead code (vulture)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from helmop.api import crds, kinds
from tests.tools import ROOT

BIN = ROOT / ".venv" / "bin"

# One import per contract that breaks it and no other (written into a copy of the package).
VIOLATIONS = {
    "helmop/sources/_probe.py": "import helmop.helm.values",  # a lower layer imports a higher one
    "helmop/controllers/context.py": "from . import status",  # operator sub-layers
    "helmop/controllers/apps.py": "from . import configsyncs",  # kind controllers are independent (sub-layers)
    "helmop/cli/verbs.py": "import helmop.controllers.context",  # a CLI verb reaching into the operator
    "helmop/ui/graph.py": "import helmop.controllers.context",  # the web UI never through the operator
    "helmop/decisions/_probe.py": "import asyncio",  # decisions do no I/O
    "helmop/controllers/status.py": "import kopf",  # kopf only in the handlers' wiring
    "helmop/helm/storage.py": "import pyhelm3",  # pyhelm3 only in the engine
    "helmop/helm/_probe.py": "import aiohttp",  # HTTP only in clients and servers
    "helmop_sandbox/_probe.py": "import helmop.cli",  # the sandbox stands alone
    "helmop/infra/_probe.py": "import helmop_sandbox",  # the operator never depends on the sandbox
}
CONTRACTS = 10  # the sub-layer violations above break the same contract


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "lint-imports"), "--no-cache"], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_import_contracts_hold() -> None:
    done = _lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{CONTRACTS} kept, 0 broken" in done.stdout


def test_import_contracts_catch_violations(tmp_path: Path) -> None:
    # Each rule must be able to fail: the package is copied (tests never write into the source tree) and
    # each contract gets one import that breaks it.
    for package, source in (("helmop", ROOT / "helmop"), ("helmop_sandbox", ROOT / "sandbox" / "helmop_sandbox")):
        shutil.copytree(source, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__", "data"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    for name, line in VIOLATIONS.items():
        path = tmp_path / name
        path.write_text((path.read_text() if path.exists() else "") + f"\n{line}  # noqa\n")
    done = _lint_imports(tmp_path)
    assert done.returncode != 0
    assert f"0 kept, {CONTRACTS} broken" in done.stdout, done.stdout
    for name in VIOLATIONS:
        assert name.removesuffix(".py").replace("/", ".") in done.stdout, name


def test_no_dead_code() -> None:
    done = subprocess.run([str(BIN / "vulture")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_kind_names_are_the_crds() -> None:
    """api.kinds is the one place code spells a kind's group, version and plural: it must match the CRDs."""
    served = {(c["spec"]["group"], c["spec"]["versions"][0]["name"], c["spec"]["names"]["kind"],
               c["spec"]["names"]["plural"], tuple(c["spec"]["names"].get("shortNames", ())))
              for c in crds.definitions()}
    assert served == {(k.group, k.version, k.kind, k.plural, k.short_names) for k in kinds.BUILTIN}


def test_constants_are_defined_once() -> None:
    spelled = [str(p.relative_to(ROOT)) for p in (ROOT / "helmop").rglob("*.py")
               if '"helmop.dev/requestedAt"' in p.read_text() or '"helmreleases"' in p.read_text()]
    assert spelled == ["helmop/api/kinds.py"], spelled


def test_the_operator_process_imports_neither_the_kubernetes_client_nor_the_ui(tmp_path: Path) -> None:
    """kopf imports the `kubernetes` client whenever it is installed (the test extras install it): `helmop run`
    keeps it out, as in the operator's image, and the web UI's pages are imported by `helmop ui` only."""
    import sys

    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "helmop.cli", "run", "--kubeconfig",
                           str(tmp_path / "absent")], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert "kubeconfig" in done.stderr and "does not exist" in done.stderr  # it went as far as reading it
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert {"kopf", "helmop.controllers.operator"} <= imported
    # (kopf's attempt at `kubernetes.client` is listed; the package itself, loaded, would be `kubernetes`)
    assert not {name for name in imported if name in ("kubernetes", "jinja2") or name.startswith("helmop.ui")}
