"""Journey: a platform user `kubectl apply`s a HelmRelease, sees it Ready, changes values, deletes it.

The operator runs as the `helmop run` command against the journey's kubeconfig (a real cluster or a
sandbox), and the chart comes from a chart repository on loopback, as helm runs next to helmop.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
import yaml

from e2e.conftest import TOOLS, Run
from tests.chartrepo import ChartRepo


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChartRepo]:
    root = tmp_path_factory.mktemp("journey-repo")
    subprocess.run([str(TOOLS / "helm"), "create", str(root / "src")], check=True, capture_output=True)
    chart_repo = ChartRepo(root, root / "src", str(TOOLS / "helm"))
    chart_repo.publish("hello", "1.0.0")
    yield chart_repo
    chart_repo.close()


@pytest.fixture(scope="module")
def operator(kubeconfig: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    cache = tmp_path_factory.mktemp("journey-cache")
    env = {**os.environ, "HELMOP_HELM": str(TOOLS / "helm"), "HELM_CACHE_HOME": str(cache / "helm")}
    proc = subprocess.Popen([sys.executable, "-m", "helmop.cli.main", "run", "--kubeconfig", kubeconfig,
                             "--install-crds", "--cache-dir", str(cache)], env=env,
                            stdout=subprocess.DEVNULL, stderr=open(cache / "operator.log", "w"))  # noqa: SIM115
    yield
    proc.terminate()
    proc.wait(30)


def _until(run: Run, *args: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while run(*args, check=False).returncode != 0:
        assert time.monotonic() < deadline, f"timed out: {' '.join(args)}"
        time.sleep(0.5)


def test_apply_change_delete(operator: None, run: Run, namespace: str, repo: ChartRepo) -> None:
    _until(run, "kubectl", "get", "crd", "helmreleases.helmop.dev")
    release = {"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease",
               "metadata": {"name": "hello", "namespace": namespace},
               "spec": {"interval": "5m", "chart": {"repository": {"url": repo.url, "name": "hello",
                                                                   "version": "1.x"}},
                        "values": {"fullnameOverride": "hello", "replicaCount": 1}}}
    run("kubectl", "apply", "-f", "-", stdin=yaml.safe_dump(release))
    run("kubectl", "-n", namespace, "wait", "--for=condition=Ready", "hr/hello", "--timeout=180s")
    table = run("kubectl", "-n", namespace, "get", "hr").stdout
    assert "True" in table and "1.0.0" in table

    release["spec"]["values"]["replicaCount"] = 2
    run("kubectl", "apply", "-f", "-", stdin=yaml.safe_dump(release))
    _until(run, "kubectl", "-n", namespace, "wait", "--for=jsonpath={.spec.replicas}=2", "deploy/hello",
           "--timeout=5s")
    run("kubectl", "-n", namespace, "wait", "--for=condition=Ready", "hr/hello", "--timeout=180s")
    history = json.loads(run("helm", "history", "hello", "-n", namespace, "-o", "json").stdout)
    assert [h["revision"] for h in history] == [1, 2]

    run("kubectl", "-n", namespace, "delete", "hr", "hello", "--timeout=180s")
    assert json.loads(run("helm", "list", "-n", namespace, "-o", "json").stdout) == []
    assert run("kubectl", "-n", namespace, "get", "deploy", "hello", check=False).returncode != 0
