"""User journeys against any cluster: $HELMOP_E2E_KUBECONFIG when set (kind, a real cluster),
else a sandbox started here. Nothing in e2e/ may use sandbox internals: only the kubeconfig."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.chartrepo import JENKINS_STAND_IN, ChartRepo, chart_version, official_jenkins_chart
from tests.tools import TOOLS, Run, eventually, runner


@pytest.fixture(scope="session")
def kubeconfig() -> Iterator[str]:
    given = os.environ.get("HELMOP_E2E_KUBECONFIG")
    if given:
        yield given
        return
    from helmop_sandbox import Sandbox

    with Sandbox() as sandbox:
        yield str(sandbox.kubeconfig)


@pytest.fixture(scope="session")
def run(kubeconfig: str, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """kubectl, helm and helm3 against the cluster."""
    return runner(kubeconfig, tmp_path_factory.mktemp("helm-home"), default_timeout=180)


@pytest.fixture(scope="session")
def helmop(kubeconfig: str) -> Run:
    """The helmop CLI against the cluster, as a user runs it."""

    def call(*args: str, check: bool = True, timeout: float = 120,
             stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([sys.executable, "-m", "helmop.cli", *args], capture_output=True, text=True,
                              timeout=timeout, input=stdin, env={**os.environ, "KUBECONFIG": kubeconfig})
        if check and done.returncode != 0:
            raise AssertionError(f"helmop {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        return done

    return call


@pytest.fixture
def namespace(run: Run) -> Iterator[str]:
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    run("kubectl", "create", "namespace", name)
    yield name
    run("kubectl", "delete", "namespace", name, "--wait=false", check=False)


def serve_chart(tmp_path_factory: pytest.TempPathFactory, name: str, version: str) -> ChartRepo:
    """A chart repository on loopback with one `helm create` chart published as name@version."""
    root = tmp_path_factory.mktemp(f"charts-{name}")
    subprocess.run([str(TOOLS / "helm"), "create", str(root / "src")], check=True, capture_output=True)
    repo = ChartRepo(root, root / "src", str(TOOLS / "helm"))
    repo.publish(name, version)
    return repo


def until(run: Run, *args: str, timeout: float = 120) -> None:
    """Repeat a command until it succeeds."""
    eventually(lambda: run(*args, check=False).returncode == 0, timeout, 0.5)


@dataclass(frozen=True)
class Operator:
    webhook_url: str
    charts_url: str  # where the Jenkins charts are served


@pytest.fixture(params=["stand-in", "official"])
def jenkins_chart(request: pytest.FixtureRequest, operator: Operator) -> dict[str, object]:
    """A Jenkins spec's `chart`: the stand-in, and the official chart when HELMOP_JENKINS_CHART names it."""
    version = "0.1.0" if request.param == "stand-in" else chart_version(official_jenkins_chart())
    return {"repository": {"url": operator.charts_url, "name": "jenkins", "version": version}}


@pytest.fixture(scope="session")
def operator(kubeconfig: str, run: Run, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    """`helmop run` as a user starts it, next to the journey (helm runs where helmop runs)."""
    cache = tmp_path_factory.mktemp("operator-cache")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "HELMOP_HELM": str(TOOLS / "helm"), "HELM_CACHE_HOME": str(cache / "helm")}
    # Jenkins charts served on loopback (no internet here; a real set-up uses the default repository).
    charts = ChartRepo(cache, cache, str(TOOLS / "helm"))
    charts.add_chart(JENKINS_STAND_IN)
    if os.environ.get("HELMOP_JENKINS_CHART"):
        charts.add_archive(official_jenkins_chart())
    with open(cache / "operator.log", "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "helmop.cli", "run", "--kubeconfig", kubeconfig,
                                 "--install-crds", "--cache-dir", str(cache), "--webhook-port", str(port),
                                 "--jenkins-chart-repository", charts.url, "--jenkins-chart-version", "0.1.0"],
                                env=env, stdout=subprocess.DEVNULL, stderr=log)
    until(run, "kubectl", "get", "crd", "jenkins.apps.helmop.dev")
    yield Operator(f"http://127.0.0.1:{port}", charts.url)
    proc.terminate()
    proc.wait(30)
    charts.close()
