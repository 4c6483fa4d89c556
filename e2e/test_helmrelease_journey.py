"""Journey: a platform user `kubectl apply`s a HelmRelease, sees it Ready, changes values, deletes it.

The operator runs as the `helmop run` command against the journey's kubeconfig (a real cluster or a
sandbox), and the chart comes from a chart repository on loopback, as helm runs next to helmop.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import yaml

from e2e.conftest import Operator, Run, serve_chart, until
from tests.chartrepo import ChartRepo


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChartRepo]:
    chart_repo = serve_chart(tmp_path_factory, "hello", "1.0.0")
    yield chart_repo
    chart_repo.close()


def test_apply_change_delete(operator: Operator, run: Run, helmop: Run, namespace: str, repo: ChartRepo) -> None:
    until(run, "kubectl", "get", "crd", "helmreleases.helmop.dev")
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
    until(run, "kubectl", "-n", namespace, "wait", "--for=jsonpath={.spec.replicas}=2", "deploy/hello",
           "--timeout=5s")
    run("kubectl", "-n", namespace, "wait", "--for=condition=Ready", "hr/hello", "--timeout=180s")
    history = json.loads(run("helm", "history", "hello", "-n", namespace, "-o", "json").stdout)
    assert [h["revision"] for h in history] == [1, 2]
    # what the CLI tells of it: the release's objects, who deployed the Deployment, what happened
    assert f"Deployment/{namespace}/hello  Current" in helmop("tree", "hr", "hello", "-n", namespace).stdout
    trace = helmop("trace", "deployment", "hello", "-n", namespace).stdout
    assert "HelmRelease:" in trace and f"{namespace}/hello" in trace and "hello 1.0.0" in trace
    assert "UpgradeSucceeded" in helmop("events", "hr", "hello", "-n", namespace).stdout

    run("kubectl", "-n", namespace, "delete", "hr", "hello", "--timeout=180s")
    assert json.loads(run("helm", "list", "-n", namespace, "-o", "json").stdout) == []
    assert run("kubectl", "-n", namespace, "get", "deploy", "hello", check=False).returncode != 0
