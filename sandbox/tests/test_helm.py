"""helm 4.1 and helm 3.17 against the sandbox, with a `helm create` chart and the Jenkins chart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.chartrepo import chart_version, official_jenkins_chart
from tests.tools import Run

HELMS = ["helm", "helm3"]


@pytest.fixture(scope="module")
def chart(tmp_path_factory: pytest.TempPathFactory, run: Run) -> Path:
    where = tmp_path_factory.mktemp("charts")
    run("helm", "create", str(where / "demo"))
    return where / "demo"


def _deploy(run: Run, ns: str, name: str) -> dict:
    return json.loads(run("kubectl", "-n", ns, "get", "deploy", name, "-o", "json").stdout)


def _names(run: Run, ns: str, kinds: str, selector: str = "") -> set[str]:
    args = ["kubectl", "-n", ns, "get", kinds, "-o", "name"] + (["-l", selector] if selector else [])
    return set(run(*args).stdout.split())


@pytest.mark.parametrize("helm", HELMS)
def test_release_lifecycle(helm: str, run: Run, namespace: str, chart: Path) -> None:
    ns = ["-n", namespace]
    run(helm, "install", "demo", str(chart), *ns, "--wait", "--timeout", "60s")
    assert _deploy(run, namespace, "demo")["status"]["readyReplicas"] == 1
    assert {"deployment.apps/demo", "service/demo", "serviceaccount/demo"} <= _names(
        run, namespace, "deploy,svc,sa")

    run(helm, "upgrade", "demo", str(chart), *ns, "--set", "replicaCount=3", "--set", "image.tag=9.9",
        "--wait", "--timeout", "60s")
    deploy = _deploy(run, namespace, "demo")
    assert deploy["spec"]["replicas"] == 3
    assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:9.9"

    run(helm, "rollback", "demo", "1", *ns, "--wait", "--timeout", "60s")
    deploy = _deploy(run, namespace, "demo")
    assert deploy["spec"]["replicas"] == 1
    assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.16.0"

    history = json.loads(run(helm, "history", "demo", *ns, "-o", "json").stdout)
    assert [(h["revision"], h["status"]) for h in history] == [(1, "superseded"), (2, "superseded"), (3, "deployed")]
    listed = json.loads(run(helm, "list", *ns, "-o", "json").stdout)
    assert [(r["name"], r["revision"], r["status"]) for r in listed] == [("demo", "3", "deployed")]

    tested = run(helm, "test", "demo", *ns, "--timeout", "60s").stdout
    assert "Phase:          Succeeded" in tested

    run(helm, "uninstall", "demo", *ns, "--wait", "--timeout", "60s")
    assert not _names(run, namespace, "deploy,svc,sa,rs", "app.kubernetes.io/instance=demo")
    assert not _names(run, namespace, "secrets", "owner=helm")
    assert json.loads(run(helm, "list", *ns, "-o", "json").stdout) == []
    gone = run(helm, "history", "demo", *ns, check=False)
    assert gone.returncode != 0 and "not found" in gone.stderr


FAILING_DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  annotations: {"sandbox.helmop.dev/simulate": "fail"}
spec:
  selector: {matchLabels: {app: x}}
  template:
    metadata: {labels: {app: x}}
    spec: {containers: [{name: c, image: busybox:1.36}]}
"""


@pytest.mark.parametrize("helm", HELMS)
def test_install_fails_when_a_workload_never_gets_ready(helm: str, run: Run, namespace: str,
                                                        tmp_path: Path) -> None:
    (tmp_path / "templates").mkdir()
    (tmp_path / "Chart.yaml").write_text("apiVersion: v2\nname: failing\nversion: 0.1.0\n")
    (tmp_path / "templates" / "deploy.yaml").write_text(FAILING_DEPLOYMENT)
    failed = run(helm, "install", "broken", str(tmp_path), "-n", namespace, "--wait", "--timeout", "3s",
                 check=False)
    assert failed.returncode != 0
    status = json.loads(run(helm, "status", "broken", "-n", namespace, "-o", "json").stdout)
    assert status["info"]["status"] == "failed"


@pytest.mark.parametrize("helm", HELMS)
def test_official_jenkins_chart_installs_and_uninstalls(helm: str, run: Run, namespace: str) -> None:
    chart = official_jenkins_chart()
    ns = ["-n", namespace]
    run(helm, "install", "jk", str(chart), *ns, "--wait", "--timeout", "90s",
        "--set", "controller.admin.password=not-a-real-one")
    sts = json.loads(run("kubectl", *ns, "get", "sts", "jk-jenkins", "-o", "json").stdout)
    assert sts["status"]["readyReplicas"] == 1
    pvc = json.loads(run("kubectl", *ns, "get", "pvc", "jk-jenkins", "-o", "json").stdout)
    assert pvc["status"]["phase"] == "Bound"
    assert "Phase:          Succeeded" in run(helm, "test", "jk", *ns, "--timeout", "60s").stdout
    run(helm, "upgrade", "jk", str(chart), *ns, "--wait", "--timeout", "90s", "--reuse-values",
        "--set", "controller.numExecutors=3")
    cm = json.loads(run("kubectl", *ns, "get", "cm", "jk-jenkins-jenkins-jcasc-config", "-o", "json").stdout)
    assert "numExecutors: 3" in json.dumps(cm["data"])
    run(helm, "rollback", "jk", "1", *ns, "--wait", "--timeout", "90s")
    cm = json.loads(run("kubectl", *ns, "get", "cm", "jk-jenkins-jenkins-jcasc-config", "-o", "json").stdout)
    assert "numExecutors: 3" not in json.dumps(cm["data"])
    history = json.loads(run(helm, "history", "jk", *ns, "-o", "json").stdout)
    assert [(h["revision"], h["status"]) for h in history] == [(1, "superseded"), (2, "superseded"), (3, "deployed")]
    listed = json.loads(run(helm, "list", *ns, "-o", "json").stdout)
    assert [(r["name"], r["chart"], r["revision"]) for r in listed] == [("jk", f"jenkins-{chart_version(chart)}", "3")]
    run(helm, "uninstall", "jk", *ns, "--wait", "--timeout", "60s")
    assert not _names(run, namespace, "sts,svc,pvc,cm,sa", "app.kubernetes.io/instance=jk")
