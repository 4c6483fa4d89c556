"""Shared fixtures: the sandbox (helmop.sandbox.testing), the real binaries, a Python client."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from helmop.sandbox import Sandbox

pytest_plugins = ["helmop.sandbox.testing"]

ROOT = Path(__file__).resolve().parent.parent
TOOLS = Path(os.environ.get("HELMOP_TOOLS", ROOT / ".tools" / "bin"))
TIERS = {"unit": "unit", "operations": "operations", "security": "operations", "corpus": "corpus"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test's tier marker, from its folder (tests/<folder>/...; anything else is integration)."""
    for item in items:
        parts = item.path.relative_to(ROOT).parts
        folder = parts[1] if parts[0] == "tests" and len(parts) > 2 else ""
        item.add_marker(TIERS.get(folder, "integration"))


def tool(name: str) -> str:
    path = TOOLS / name
    if not path.exists():
        pytest.fail(f"{path} is missing: run scripts/install-tools (the test command does)")
    return str(path)


Run = Callable[..., subprocess.CompletedProcess[str]]


def _runner(sandbox: Sandbox) -> Run:
    env = {**os.environ, "KUBECONFIG": str(sandbox.kubeconfig), "HELM_CACHE_HOME": str(sandbox.workdir / "helm-cache"),
           "HELM_CONFIG_HOME": str(sandbox.workdir / "helm-config"),
           "HELM_DATA_HOME": str(sandbox.workdir / "helm-data")}

    def run(*args: str, check: bool = True, timeout: float = 120,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        cmd = [tool(args[0]), *args[1:]]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, input=stdin)
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        return done

    return run


@pytest.fixture(scope="session")
def run(sandbox: Sandbox) -> Run:
    """Run a real binary (kubectl, helm, helm3) against the sandbox."""
    return _runner(sandbox)


@pytest.fixture(scope="session")
def k8s(sandbox: Sandbox) -> Iterator[object]:
    """The official kubernetes Python client, configured from the sandbox's kubeconfig."""
    from kubernetes import client, config

    api_client = config.new_client_from_config(config_file=str(sandbox.kubeconfig))
    yield api_client
    api_client.close()
    del client
