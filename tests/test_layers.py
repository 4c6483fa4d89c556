"""The architecture rule: each layer of helmop imports only the layers below it."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "helmop"

# layer -> the helmop layers it may import (besides itself).
ALLOWED = {
    "api": set(),
    "sources": {"api"},
    "helm": {"api"},
    "reconcile": {"api"},
    "controllers": {"api", "sources", "helm", "reconcile"},
    "sandbox": set(),  # stands alone: usable without the operator
    "cli": {"api", "sources", "helm", "reconcile", "controllers", "sandbox"},
}


def _imports(path: Path) -> set[str]:
    layer = path.relative_to(PACKAGE).parts[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = path.relative_to(PACKAGE).parts[: -node.level]
                names = [".".join(("helmop", *base, node.module or ""))]
            else:
                names = [node.module or ""]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "helmop" and len(parts) > 1 and parts[1] and parts[1] != layer:
                found.add(parts[1])
    return found


def test_every_module_belongs_to_a_known_layer() -> None:
    layers = {p.relative_to(PACKAGE).parts[0] for p in PACKAGE.rglob("*.py") if p.parent != PACKAGE}
    assert layers <= set(ALLOWED), layers - set(ALLOWED)


def test_layers_import_only_downwards() -> None:
    violations = []
    for path in PACKAGE.rglob("*.py"):
        if path.parent == PACKAGE:
            continue
        layer = path.relative_to(PACKAGE).parts[0]
        for imported in _imports(path) - ALLOWED[layer]:
            violations.append(f"{path.relative_to(PACKAGE)} imports helmop.{imported}")
    assert not violations, violations


def test_the_checker_sees_violations(tmp_path: Path) -> None:
    # The rule must be able to fail: a sandbox module importing the CLI is caught.
    probe = PACKAGE / "sandbox" / "_layer_probe.py"
    probe.write_text("from helmop.cli import main\nfrom ..cli import main as again\n")
    try:
        assert _imports(probe) == {"cli"}
    finally:
        probe.unlink()
