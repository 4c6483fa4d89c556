"""The architecture as checked rules: the import-linter contracts in pyproject.toml (layers, kind
controllers independent of each other, the sandbox standing alone), and no dead code (vulture)."""

from __future__ import annotations

import subprocess

from helmop.api import crds, kinds
from tests.conftest import ROOT

BIN = ROOT / ".venv" / "bin"


def _lint_imports() -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "lint-imports"), "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_import_contracts_hold() -> None:
    done = _lint_imports()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 kept, 0 broken" in done.stdout


def test_import_contracts_catch_violations() -> None:
    # The rules must be able to fail: a kind controller importing another, and the sandbox importing the CLI.
    probe, apps = ROOT / "helmop/sandbox/_probe.py", ROOT / "helmop/controllers/apps.py"
    original = apps.read_text()
    try:
        probe.write_text("from helmop.cli import main\n")
        apps.write_text(original + "\nfrom . import configsyncs  # noqa\n")
        done = _lint_imports()
    finally:
        probe.unlink(missing_ok=True)
        apps.write_text(original)
    assert done.returncode != 0
    assert "2 kept, 2 broken" in done.stdout, done.stdout


def test_no_dead_code() -> None:
    done = subprocess.run([str(BIN / "vulture")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_kind_names_are_the_crds() -> None:
    """api.kinds is the one place code spells a kind's group, version and plural: it must match the CRDs."""
    served = {(c["spec"]["group"], c["spec"]["versions"][0]["name"], c["spec"]["names"]["kind"],
               c["spec"]["names"]["plural"], tuple(c["spec"]["names"]["shortNames"])) for c in crds.definitions()}
    assert served == {(k.group, k.version, k.kind, k.plural, k.short_names) for k in kinds.BUILTIN}


def test_constants_are_defined_once() -> None:
    spelled = [str(p.relative_to(ROOT)) for p in (ROOT / "helmop").rglob("*.py")
               if '"helmop.dev/requestedAt"' in p.read_text() or '"helmreleases"' in p.read_text()]
    assert spelled == ["helmop/api/kinds.py"], spelled
