"""User journeys against any cluster: $HELMOP_E2E_KUBECONFIG when set (kind, a real cluster),
else a sandbox started here. Nothing in e2e/ may use sandbox internals: only the kubeconfig."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOLS = Path(os.environ.get("HELMOP_TOOLS", ROOT / ".tools" / "bin"))

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="session")
def kubeconfig() -> Iterator[str]:
    given = os.environ.get("HELMOP_E2E_KUBECONFIG")
    if given:
        yield given
        return
    from helmop.sandbox import Sandbox

    with Sandbox() as sandbox:
        yield str(sandbox.kubeconfig)


@pytest.fixture(scope="session")
def run(kubeconfig: str, tmp_path_factory: pytest.TempPathFactory) -> Run:
    home = tmp_path_factory.mktemp("helm-home")
    env = {**os.environ, "KUBECONFIG": kubeconfig, "HELM_CACHE_HOME": str(home / "cache"),
           "HELM_CONFIG_HOME": str(home / "config"), "HELM_DATA_HOME": str(home / "data")}

    def run(*args: str, check: bool = True, stdin: str | None = None,
            timeout: float = 180) -> subprocess.CompletedProcess[str]:
        binary = TOOLS / args[0]
        if not binary.exists():
            pytest.fail(f"{binary} is missing: run scripts/install-tools")
        done = subprocess.run([str(binary), *args[1:]], env=env, capture_output=True, text=True,
                              input=stdin, timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(args)}: {done.returncode}\n{done.stdout}\n{done.stderr}")
        return done

    return run


@pytest.fixture
def namespace(run: Run) -> Iterator[str]:
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    run("kubectl", "create", "namespace", name)
    yield name
    run("kubectl", "delete", "namespace", name, "--wait=false", check=False)
