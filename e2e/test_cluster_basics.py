"""The journey every later one stands on: a chart installed with helm becomes ready and goes away."""

from __future__ import annotations

import json
from pathlib import Path

from e2e.conftest import Run


def test_helm_install_wait_and_uninstall(run: Run, namespace: str, tmp_path: Path) -> None:
    run("helm", "create", str(tmp_path / "hello"))
    run("helm", "install", "hello", str(tmp_path / "hello"), "-n", namespace, "--wait", "--timeout", "120s")
    deploy = json.loads(run("kubectl", "-n", namespace, "get", "deploy", "hello", "-o", "json").stdout)
    assert deploy["status"]["readyReplicas"] == deploy["spec"]["replicas"] == 1
    run("helm", "uninstall", "hello", "-n", namespace, "--wait")
    gone = run("kubectl", "-n", namespace, "get", "deploy", "hello", check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr
