"""The helmop command's verbs, as a user runs them, against the sandbox with the operator running."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.controllers.conftest import (
    ChartRepo,
    Operator,
    apply,
    condition,
    eventually,
    get,
    helm_calls,
    helm_wrapper,
    helmop,
    hr,
    ready,
)
from tests.tools import TOOLS, Run


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


def test_reconcile_reports_the_outcome_it_asked_for(operator: Operator, kube: Run, ns: str,
                                                    chart_repo: ChartRepo) -> None:
    chart = f"late-{ns}"  # published only after the HelmRelease exists
    apply(kube, ns, hr("late", chart_repo, chart=chart, version="1.0.0"))
    eventually(lambda: condition(get(kube, ns, "hr", "late")).get("reason") in ("ChartNotFound", "VersionNotFound"))
    chart_repo.publish(chart, "1.0.0")
    done = helmop(operator, "reconcile", "hr", "late", "-n", ns, "--timeout", "120")
    # the outcome of this reconcile (the install), not the stalled status it started from
    assert done.returncode == 0, done.stdout + done.stderr
    assert "✔ InstallSucceeded" in done.stdout and f"{ns}/late.v1" in done.stdout


def test_reconcile_a_jenkins_waits_for_its_release(operator: Operator, kube: Run, ns: str) -> None:
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump(
        {"apiVersion": "apps.helmop.dev/v1alpha1", "kind": "Jenkins", "metadata": {"name": "ci"},
         "spec": {"project": "cli", "interval": "1h"}}))
    eventually(lambda: condition(get(kube, ns, "jenkins", "ci")).get("status") == "True", timeout=120)
    done = helmop(operator, "reconcile", "jk", "ci", "-n", ns, "--timeout", "120")
    assert done.returncode == 0 and "✔" in done.stdout, done.stdout + done.stderr
    assert get(kube, ns, "jenkins", "ci")["status"]["lastHandledReconcileAt"]


def test_diff_exit_codes_and_a_preview_before_applying(operator: Operator, kube: Run, ns: str,
                                                       chart_repo: ChartRepo, tmp_path: Path) -> None:
    apply(kube, ns, hr("diffed", chart_repo, version="0.1.0", values={"replicaCount": 1}))
    ready(kube, ns, "diffed")
    same = helmop(operator, "diff", "hr", "diffed", "-n", ns)
    assert (same.returncode, same.stdout.strip()) == (0, "no changes"), same.stderr
    # The change is previewed from the local file, before it is applied: as kubectl diff -f.
    local = tmp_path / "diffed.yaml"
    local.write_text(hr("diffed", chart_repo, version="0.1.0", values={"replicaCount": 3}))
    preview = helmop(operator, "diff", "-f", str(local), "-n", ns)
    assert preview.returncode == 1, preview.stdout + preview.stderr
    assert "-  replicas: 1" in preview.stdout and "+  replicas: 3" in preview.stdout
    assert get(kube, ns, "deploy", "diffed")["spec"]["replicas"] == 1  # nothing applied
    # A directory of manifests, with a HelmRelease not installed yet: all of it is new.
    (tmp_path / "more.yaml").write_text(hr("fresh", chart_repo, version="0.1.0"))
    both = helmop(operator, "diff", "-f", str(tmp_path), "-n", ns)
    assert both.returncode == 1 and "+kind: Deployment" in both.stdout and "-  replicas: 1" in both.stdout
    errors = [helmop(operator, "diff", "hr", "ghost", "-n", ns), helmop(operator, "diff", "-f", "/nonexistent"),
              helmop(operator, "diff", "gitrepo", "x", "-n", ns)]
    assert [e.returncode for e in errors] == [2, 2, 2], [e.stderr for e in errors]
    kube("kubectl", "-n", ns, "apply", "-f", str(local))
    ready(kube, ns, "diffed", generation=2)
    assert get(kube, ns, "deploy", "diffed")["spec"]["replicas"] == 3
    assert helmop(operator, "diff", "-f", str(local), "-n", ns).returncode == 0


def test_operator_diff_and_render_build_the_same_helm_request(operator: Operator, kube: Run, ns: str,
                                                              chart_repo: ChartRepo, tmp_path: Path) -> None:
    """One spec, three paths: the operator's install, `helmop diff` and `helmop render` give helm the
    same values (valuesFrom typed the same way) and the same flags."""
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared", "namespace": ns},
          "data": {"values.yaml": "service: {port: 8080}\nreplicaCount: 2\n"}}
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "flags", "namespace": ns},
              "stringData": {"enabled": "true", "count": "42", "name": "007"}}
    spec = {"serviceAccountName": "deployer", "maxHistory": 3, "install": {"disableHooks": True},
            "upgrade": {"disableHooks": True},
            "valuesFrom": [{"kind": "ConfigMap", "name": "shared"},
                           {"kind": "Secret", "name": "flags", "valuesKey": "enabled", "targetPath": "feature.on"},
                           {"kind": "Secret", "name": "flags", "valuesKey": "count", "targetPath": "feature.count"},
                           {"kind": "Secret", "name": "flags", "valuesKey": "name", "targetPath": "feature.name"}]}
    release = yaml.safe_load(hr("same", chart_repo, version="0.1.0", values={"replicaCount": 1}, **spec))
    release["metadata"]["namespace"] = ns
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "all.yaml").write_text(yaml.safe_dump_all([cm, secret, release]))
    kube("kubectl", "create", "serviceaccount", "deployer", "-n", ns)
    kube("kubectl", "create", "rolebinding", "deployer", "--clusterrole=cluster-admin",
         f"--serviceaccount={ns}:deployer", "-n", ns)
    kube("kubectl", "apply", "-f", str(tree / "all.yaml"))
    ready(kube, ns, "same")

    env = {"HELMOP_HELM": str(helm_wrapper(tmp_path / "helm", TOOLS / "helm", tmp_path / "calls.log",
                                           tmp_path / "values.log"))}
    assert helmop(operator, "diff", "hr", "same", "-n", ns, env=env).returncode == 0
    assert helmop(operator, "render", str(tree), env=env).returncode == 0
    installed = helm_calls(operator.values_log, "same")
    (diffed_args, diffed), (rendered_args, rendered) = helm_calls(tmp_path / "values.log", "same")
    assert len(installed) == 1
    installed_args, values = installed[0]
    assert values["feature"] == {"on": True, "count": 42, "name": "007"}
    assert values["replicaCount"] == 1 and values["service"] == {"port": 8080}
    assert diffed == values and rendered == values

    def flags(args: list[str]) -> list[str]:
        # What may differ: the chart's path (per cache), waiting (not a dry run's), how helm finds the cluster.
        if "--kubeconfig" in args:
            at = args.index("--kubeconfig")
            args = args[:at] + args[at + 2:]
        return [a for a in args[3:] if a not in ("--wait=watcher", "--wait", "--wait-for-jobs", "--dry-run=server")]

    assert flags(diffed_args) == flags(installed_args)
    assert diffed_args[:2] == installed_args[:2] == ["upgrade", "same"] and "--dry-run=server" in diffed_args
    assert {"--kube-as-user", f"system:serviceaccount:{ns}:deployer", "--history-max", "3", "--no-hooks"} \
        <= set(installed_args)
    assert rendered_args[:2] == ["template", "same"] and "--no-hooks" in rendered_args
    assert rendered_args[rendered_args.index("--namespace") + 1] == ns


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
