"""Uninstalling when the operator went first, as the docs say: every helmop resource keeps its finalizer,
so the finalizers are removed by hand and the releases left for `helm uninstall`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from helmop_sandbox import Sandbox

from tests.chartrepo import ChartRepo
from tests.docs import block
from tests.operations.conftest import Replica, helmrelease, ready_condition
from tests.tools import TOOLS, Run, eventually


def test_finalizers_removed_by_hand_once_the_operator_is_gone(cluster: Sandbox, kubectl: Run, tiny_charts: ChartRepo,
                                                             tmp_path: Path) -> None:
    commands = block("operations/uninstall.md", "operator-gone")
    assert "-n shop patch hr web" in commands and "helm uninstall web -n shop" in commands
    kubectl("kubectl", "create", "namespace", "shop")  # the docs' names
    replica = Replica(cluster, tmp_path / "operator")
    try:
        replica.wait_ready()
        kubectl("kubectl", "apply", "-f", "-", stdin=helmrelease("web", "shop", tiny_charts.url))
        eventually(lambda: ready_condition(kubectl, "shop", "web").get("status") == "True")
    finally:
        replica.stop()
    kubectl("kubectl", "-n", "shop", "delete", "hr", "web", "--wait=false")
    held = json.loads(kubectl("kubectl", "-n", "shop", "get", "hr", "web", "-o", "json").stdout)["metadata"]
    assert held.get("deletionTimestamp") and "helmop.dev/finalizer" in held["finalizers"]  # nobody to let it go
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "PATH": f"{TOOLS}:{os.environ['PATH']}",
           "HELM_CACHE_HOME": str(tmp_path / "helm"), "HELM_CONFIG_HOME": str(tmp_path / "helm"),
           "HELM_DATA_HOME": str(tmp_path / "helm")}
    done = subprocess.run(["bash", "-c", "set -euo pipefail\n" + commands], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "helmrelease.helmop.dev/web" in done.stdout and 'release "web" uninstalled' in done.stdout
    assert kubectl("kubectl", "-n", "shop", "get", "hr", "web", check=False).returncode != 0  # gone
    assert json.loads(kubectl("helm", "list", "-n", "shop", "-o", "json").stdout) == []
