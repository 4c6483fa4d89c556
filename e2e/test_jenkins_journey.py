"""Journey: each new project gets a Jenkins by creating one small resource; when the project ends,
deleting it removes the Jenkins but keeps its data when asked to."""

from __future__ import annotations

import json

import yaml

from e2e.conftest import Operator, Run, until


def test_project_jenkins_lifecycle(operator: Operator, run: Run, namespace: str,
                                   jenkins_chart: dict[str, object]) -> None:
    project = {"apiVersion": "apps.helmop.dev/v1alpha1", "kind": "Jenkins",
               "metadata": {"name": "ci", "namespace": namespace},
               "spec": {"project": "payments", "chart": jenkins_chart, "plugins": ["ansicolor:1.0.6"],
                        "seedJobs": [{"name": "payments-api", "repo": "https://git.example.com/payments/api.git"}],
                        "persistence": {"size": "10Gi", "retainOnDelete": True}}}
    run("kubectl", "apply", "-f", "-", stdin=yaml.safe_dump(project))
    until(run, "kubectl", "-n", namespace, "wait", "--for=condition=Ready", "jenkins/ci", "--timeout=5s", timeout=300)
    status = json.loads(run("kubectl", "-n", namespace, "get", "jk", "ci", "-o", "json").stdout)["status"]
    assert status["adminSecret"] == "ci-admin" and status["url"].startswith("http://ci.")
    labels = json.loads(run("kubectl", "-n", namespace, "get", "sts", "ci", "-o", "json").stdout)["metadata"]["labels"]
    assert labels["helmop.dev/project"] == "payments"

    run("kubectl", "-n", namespace, "delete", "jenkins", "ci", "--timeout=180s")
    assert run("kubectl", "-n", namespace, "get", "sts", "ci", check=False).returncode != 0
    assert run("kubectl", "-n", namespace, "get", "pvc", "ci", check=False).returncode == 0  # data kept
