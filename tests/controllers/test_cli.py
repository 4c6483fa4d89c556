"""The helmop command's verbs, as a user runs them, against the sandbox with the operator running."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import TOOLS, Run
from tests.controllers.conftest import ChartRepo, Operator, condition, eventually, get
from tests.controllers.test_helmrelease import apply, hr, ready


def helmop(operator: Operator, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(operator.sandbox.kubeconfig), "HELMOP_HELM": str(TOOLS / "helm")}
    return subprocess.run([sys.executable, "-m", "helmop.cli", *args], env=env, capture_output=True, text=True,
                          timeout=180)


def test_get_reconcile_suspend_resume(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo) -> None:
    apply(kube, ns, hr("shown", chart_repo, version="0.1.0"))
    ready(kube, ns, "shown")
    out = helmop(operator, "get", "hr", "-n", ns)
    assert out.returncode == 0
    header, row = out.stdout.splitlines()[:2]
    assert header.split()[:5] == ["NAME", "REVISION", "SUSPENDED", "READY", "MESSAGE"]
    assert row.split()[:4] == ["helmrelease/shown", "0.1.0", "False", "True"]
    everywhere = helmop(operator, "get", "-A").stdout
    assert everywhere.splitlines()[0].startswith("NAMESPACE") and f"{ns}  helmrelease/shown" in everywhere

    done = helmop(operator, "reconcile", "hr", "shown", "-n", ns)
    assert done.returncode == 0 and "✔" in done.stdout, done.stdout + done.stderr

    assert helmop(operator, "suspend", "hr", "shown", "-n", ns).returncode == 0
    assert get(kube, ns, "hr", "shown")["spec"]["suspend"] is True
    refused = helmop(operator, "reconcile", "hr", "shown", "-n", ns)
    assert refused.returncode == 1 and "suspended" in refused.stderr
    assert helmop(operator, "resume", "hr", "shown", "-n", ns).returncode == 0
    assert get(kube, ns, "hr", "shown")["spec"]["suspend"] is False

    apply(kube, ns, hr("broken", chart_repo, chart="nope"))
    eventually(lambda: condition(get(kube, ns, "hr", "broken")).get("reason") == "ChartNotFound")
    failed = helmop(operator, "reconcile", "hr", "broken", "-n", ns, "--timeout", "60")
    assert failed.returncode == 1 and "✗ ChartNotFound" in failed.stdout
    missing = helmop(operator, "reconcile", "hr", "ghost", "-n", ns)
    assert missing.returncode == 1 and "not found" in missing.stderr
    assert helmop(operator, "get", "widgets").returncode == 1
    assert helmop(operator, "reconcile").returncode == 2  # usage


def test_diff_shows_a_change_before_it_is_applied(operator: Operator, kube: Run, ns: str,
                                                  chart_repo: ChartRepo) -> None:
    apply(kube, ns, hr("diffed", chart_repo, version="0.1.0", values={"replicaCount": 1}))
    ready(kube, ns, "diffed")
    assert helmop(operator, "diff", "hr", "diffed", "-n", ns).stdout.strip() == "no changes"
    helmop(operator, "suspend", "hr", "diffed", "-n", ns)
    apply(kube, ns, hr("diffed", chart_repo, version="0.1.0", values={"replicaCount": 3}, suspend=True))
    out = helmop(operator, "diff", "hr", "diffed", "-n", ns)
    assert out.returncode == 0
    assert "-  replicas: 1" in out.stdout and "+  replicas: 3" in out.stdout
    helmop(operator, "resume", "hr", "diffed", "-n", ns)
    apply(kube, ns, hr("diffed", chart_repo, version="0.1.0", values={"replicaCount": 3}))
    eventually(lambda: get(kube, ns, "deploy", "diffed").get("spec", {}).get("replicas") == 3)
    eventually(lambda: helmop(operator, "diff", "hr", "diffed", "-n", ns).stdout.strip() == "no changes")


def test_render_a_config_repository_offline(operator: Operator, chart_repo: ChartRepo, tmp_path: Path) -> None:
    tree = tmp_path / "config"
    (tree / "apps").mkdir(parents=True)
    (tree / "apps" / "web.yaml").write_text(yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web-values", "namespace": "shop"},
         "data": {"values.yaml": "replicaCount: 4\n"}},
        {"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease", "metadata": {"name": "web", "namespace": "shop"},
         "spec": {"chart": {"repository": {"url": chart_repo.url, "name": "demo", "version": "0.1.0"}},
                  "valuesFrom": [{"kind": "ConfigMap", "name": "web-values"}],
                  "values": {"fullnameOverride": "web"}}},
    ]))
    (tree / "apps" / "broken.yaml").write_text("kind: ConfigMap\nmetadata: {name: [unclosed\n")
    failed = helmop(operator, "render", str(tree))
    assert failed.returncode == 1 and "apps/broken.yaml:" in failed.stderr
    (tree / "apps" / "broken.yaml").unlink()
    out = tmp_path / "out"
    done = helmop(operator, "render", str(tree), "-o", str(out))
    assert done.returncode == 0, done.stderr
    docs = [d for d in yaml.safe_load_all((out / "shop" / "web.yaml").read_text()) if d]
    deploy = next(d for d in docs if d["kind"] == "Deployment")
    assert deploy["metadata"]["name"] == "web" and deploy["spec"]["replicas"] == 4
