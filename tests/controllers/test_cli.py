"""The helmop command's verbs, as a user runs them, against the sandbox with the operator running."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from helmop.cli import logsetup
from tests.controllers.conftest import (
    GITREPO,
    ChartRepo,
    Operator,
    apply,
    condition,
    get,
    helm_calls,
    helm_wrapper,
    helmop,
    hr,
    ready,
    watched,
)
from tests.tools import TOOLS, Run, eventually


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
    assert refused.returncode == 2 and "suspended" in refused.stderr
    assert helmop(operator, "resume", "hr", "shown", "-n", ns).returncode == 0
    assert get(kube, ns, "hr", "shown")["spec"]["suspend"] is False

    apply(kube, ns, hr("broken", chart_repo, chart="nope"))
    watched(kube, ns, "hr", "broken", lambda obj: condition(obj).get("reason") == "ChartNotFound")
    failed = helmop(operator, "reconcile", "hr", "broken", "-n", ns, "--timeout", "1m")
    assert failed.returncode == 1 and "✗ ChartNotFound" in failed.stdout  # a failed outcome: 1
    missing = helmop(operator, "reconcile", "hr", "ghost", "-n", ns)
    assert missing.returncode == 2 and "not found" in missing.stderr  # an error: 2
    assert helmop(operator, "get", "widgets").returncode == 2
    assert helmop(operator, "reconcile").returncode == 2  # usage
    bad_timeout = helmop(operator, "reconcile", "hr", "shown", "-n", ns, "--timeout", "5q")
    assert bad_timeout.returncode == 2 and "invalid duration '5q'" in bad_timeout.stderr


def test_reconcile_reports_the_outcome_it_asked_for(operator: Operator, kube: Run, ns: str,
                                                    chart_repo: ChartRepo) -> None:
    chart = f"late-{ns}"  # published only after the HelmRelease exists
    apply(kube, ns, hr("late", chart_repo, chart=chart, version="1.0.0"))
    watched(kube, ns, "hr", "late", lambda obj: condition(obj).get("reason") in ("ChartNotFound", "VersionNotFound"))
    chart_repo.publish(chart, "1.0.0")
    done = helmop(operator, "reconcile", "hr", "late", "-n", ns, "--timeout", "120")
    # the outcome of this reconcile (the install), not the stalled status it started from
    assert done.returncode == 0, done.stdout + done.stderr
    assert "✔ InstallSucceeded" in done.stdout and f"{ns}/late.v1" in done.stdout


def test_reconcile_a_jenkins_waits_for_its_release(operator: Operator, kube: Run, ns: str) -> None:
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump(
        {"apiVersion": "apps.helmop.dev/v1alpha1", "kind": "Jenkins", "metadata": {"name": "ci"},
         "spec": {"project": "cli", "interval": "1h"}}))
    watched(kube, ns, "jenkins", "ci", lambda obj: condition(obj).get("status") == "True", timeout=120)
    done = helmop(operator, "reconcile", "jk", "ci", "-n", ns, "--timeout", "120")
    assert done.returncode == 0 and "✔" in done.stdout, done.stdout + done.stderr
    assert get(kube, ns, "jenkins", "ci")["status"]["lastHandledReconcileAt"]
    tree = helmop(operator, "tree", "jk", "ci", "-n", ns).stdout.splitlines()
    release = get(kube, ns, "jenkins", "ci")["status"]["helmRelease"]
    assert tree[0] == f"Jenkins/{ns}/ci  Ready" and tree[1].startswith(f"└── HelmRelease/{ns}/{release}  Ready")
    assert any(f"StatefulSet/{ns}/" in line for line in tree[2:]), tree


def test_diff_exit_codes_and_a_preview_before_applying(operator: Operator, kube: Run, ns: str,
                                                       chart_repo: ChartRepo, tmp_path: Path) -> None:
    apply(kube, ns, hr("diffed", chart_repo, version="0.1.0", values={"replicaCount": 1}))
    ready(kube, ns, "diffed")
    same = helmop(operator, "diff", "hr", "diffed", "-n", ns)
    assert (same.returncode, same.stdout.strip()) == (0, "no changes"), same.stderr
    as_json = json.loads(helmop(operator, "diff", "hr", "diffed", "-n", ns, "--output-format", "json").stdout)
    assert as_json == {"changed": False, "releases": [{"helmRelease": {"namespace": ns, "name": "diffed"},
                                                       "origin": "spec", "objects": []}]}
    # The change is previewed from the local file, before it is applied: as kubectl diff -f.
    local = tmp_path / "diffed.yaml"
    local.write_text(hr("diffed", chart_repo, version="0.1.0", values={"replicaCount": 3}))
    preview = helmop(operator, "diff", "-f", str(local), "-n", ns)
    assert preview.returncode == 1, preview.stdout + preview.stderr
    assert "-  replicas: 1" in preview.stdout and "+  replicas: 3" in preview.stdout
    # one header per changed object, as kubectl diff: only the Deployment changed
    headers = [line for line in preview.stdout.splitlines() if line.endswith(": update)")]
    assert headers == [f"Deployment {ns}/diffed (HelmRelease {ns}/diffed: update)"], preview.stdout
    changes = json.loads(helmop(operator, "diff", "-f", str(local), "-n", ns, "--output-format", "json").stdout)
    assert changes["changed"] is True
    assert [(o["kind"], o["name"], o["change"]) for o in changes["releases"][0]["objects"]] == [
        ("Deployment", "diffed", "update")]
    assert get(kube, ns, "deploy", "diffed")["spec"]["replicas"] == 1  # nothing applied
    # validated as kubectl apply would (strict): a misspelt field is an error, not silently diffed
    typo = tmp_path / "typo" / "diffed.yaml"
    typo.parent.mkdir()
    typo.write_text(local.read_text().replace("interval:", "intervall:"))
    refused = helmop(operator, "diff", "-f", str(typo), "-n", ns)
    assert refused.returncode == 2 and "diffed.yaml:" in refused.stderr and "spec.intervall: unknown field" \
        in refused.stderr, refused.stderr
    typo.unlink()
    typo.parent.rmdir()
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


def test_diff_names_a_cluster_scoped_object_without_a_namespace(operator: Operator, kube: Run, ns: str,
                                                                 chart_repo: ChartRepo, tmp_path: Path) -> None:
    chart = f"scoped-{ns}"
    role = ("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: " + ns + "-reader}\n"
            "rules: [{apiGroups: [''], resources: [{{ .Values.resource | default \"pods\" }}], verbs: [get]}]\n")
    chart_repo.publish(chart, "0.1.0", templates={"role.yaml": role})
    apply(kube, ns, hr("scoped", chart_repo, chart=chart, version="0.1.0"))
    ready(kube, ns, "scoped")
    local = tmp_path / "scoped.yaml"
    local.write_text(hr("scoped", chart_repo, chart=chart, version="0.1.0", values={"resource": "secrets"}))
    changed = helmop(operator, "diff", "-f", str(local), "-n", ns)
    assert changed.returncode == 1, changed.stderr
    assert f"ClusterRole {ns}-reader (HelmRelease {ns}/scoped: update)" in changed.stdout.splitlines(), changed.stdout
    kube("kubectl", "-n", ns, "delete", "hr", "scoped", "--timeout=60s")


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


def test_kubeconfig_context_namespace_and_context_flag(operator: Operator, kube: Run, ns: str,
                                                      chart_repo: ChartRepo, tmp_path: Path) -> None:
    apply(kube, ns, hr("here", chart_repo, version="0.1.0"))
    ready(kube, ns, "here")
    config = tmp_path / "kubeconfig"
    config.write_text(operator.sandbox.kubeconfig.read_text())
    kubectl = [str(TOOLS / "kubectl"), "--kubeconfig", str(config), "config"]
    subprocess.run([*kubectl, "set-context", "--current", f"--namespace={ns}"], check=True, capture_output=True)
    current = subprocess.run([*kubectl, "current-context"], check=True, capture_output=True, text=True).stdout.strip()
    cluster = subprocess.run([*kubectl, "view", "-o", "jsonpath={.contexts[0].context.cluster}"], check=True,
                             capture_output=True, text=True).stdout
    user = subprocess.run([*kubectl, "view", "-o", "jsonpath={.contexts[0].context.user}"], check=True,
                          capture_output=True, text=True).stdout
    subprocess.run([*kubectl, "set-context", "elsewhere", f"--cluster={cluster}", f"--user={user}",
                    "--namespace=default"], check=True, capture_output=True)
    env = {"KUBECONFIG": str(config)}
    # as kubectl: the context's namespace when -n is not given
    listed = helmop(operator, "get", "hr", env=env)
    assert listed.returncode == 0 and "helmrelease/here" in listed.stdout, listed.stderr
    done = helmop(operator, "reconcile", "hr", "here", "--timeout", "2m", env=env)
    assert done.returncode == 0 and "✔" in done.stdout, done.stderr
    # --context picks another context (and its namespace); -n still wins over both
    assert "helmrelease/here" not in helmop(operator, "get", "hr", "--context", "elsewhere", env=env).stdout
    assert "helmrelease/here" in helmop(operator, "get", "hr", "--context", "elsewhere", "-n", ns, env=env).stdout
    assert helmop(operator, "get", "hr", "--context", current, env=env).returncode == 0
    unknown = helmop(operator, "get", "hr", "--context", "nope", env=env)
    assert unknown.returncode == 2 and "nope" in unknown.stderr
    everywhere = helmop(operator, "get", "hr", "-A", "--kubeconfig", str(config))
    assert f"{ns}  helmrelease/here" in everywhere.stdout


def test_get_names_output_forms_selector_and_watch(operator: Operator, kube: Run, ns: str,
                                                  chart_repo: ChartRepo) -> None:
    apply(kube, ns, hr("one", chart_repo, version="0.1.0"))
    apply(kube, ns, hr("two", chart_repo, version="0.1.0"))
    ready(kube, ns, "one")
    ready(kube, ns, "two")
    kube("kubectl", "-n", ns, "label", "hr", "two", "tier=back")
    rows = helmop(operator, "get", "hr", "one", "two", "-n", ns).stdout.splitlines()
    assert [r.split()[0] for r in rows] == ["NAME", "helmrelease/one", "helmrelease/two"]
    wide = helmop(operator, "get", "hr", "one", "-n", ns, "-o", "wide").stdout.splitlines()
    assert wide[0].split()[:7] == ["NAME", "REVISION", "SUSPENDED", "READY", "REASON", "AGE", "SOURCE"]
    assert "InstallSucceeded" in wide[1] and f"{chart_repo.url} demo@0.1.0" in wide[1]
    one = json.loads(helmop(operator, "get", "hr", "one", "-n", ns, "-o", "json").stdout)
    assert one["kind"] == "HelmRelease" and one["metadata"]["name"] == "one"
    both = yaml.safe_load(helmop(operator, "get", "hr", "-n", ns, "-o", "yaml").stdout)
    assert both["kind"] == "List" and {i["metadata"]["name"] for i in both["items"]} == {"one", "two"}
    named = helmop(operator, "get", "hr", "-n", ns, "-o", "name", "-l", "tier=back").stdout.split()
    assert named == ["helmrelease.helmop.dev/two"]
    missing = helmop(operator, "get", "hr", "one", "ghost", "-n", ns)
    assert missing.returncode == 2 and "helmrelease/one" in missing.stdout
    assert 'helmreleases.helmop.dev "ghost" not found' in missing.stderr
    assert helmop(operator, "get", "hr", "one", "-A").returncode == 2  # by name across namespaces: kubectl refuses
    assert helmop(operator, "get", "hr", "-o", "bogus").returncode == 2

    watch = subprocess.Popen([sys.executable, "-m", "helmop.cli", "get", "hr", "one", "-n", ns, "--watch", "-o",
                              "name"], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "KUBECONFIG": str(operator.sandbox.kubeconfig)})
    try:
        assert watch.stdout is not None
        assert watch.stdout.readline().strip() == "helmrelease.helmop.dev/one"  # the listing
        kube("kubectl", "-n", ns, "annotate", "hr", "one", "seen=yes")
        assert watch.stdout.readline().strip() == "helmrelease.helmop.dev/one"  # the change
    finally:
        watch.send_signal(signal.SIGINT)
        assert watch.wait(20) == 0  # interrupted is how a watch ends


def test_export_gives_reappliable_yaml(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo) -> None:
    apply(kube, ns, hr("kept", chart_repo, version="0.1.0"))
    ready(kube, ns, "kept")
    kube("kubectl", "-n", ns, "annotate", "hr", "kept", "helmop.dev/requestedAt=now", "team=web")
    exported = helmop(operator, "export", "hr", "kept", "-n", ns)
    assert exported.returncode == 0, exported.stderr
    doc = yaml.safe_load(exported.stdout)
    assert set(doc) == {"apiVersion", "kind", "metadata", "spec"}
    assert doc["metadata"] == {"name": "kept", "namespace": ns, "annotations": {"team": "web"}}
    everything = helmop(operator, "export", "-n", ns).stdout
    assert everything.startswith("---\n") and "kind: HelmRelease" in everything
    kube("kubectl", "-n", ns, "label", "hr", "kept", "tier=front")
    assert "name: kept" in helmop(operator, "export", "hr", "-A", "-l", "tier=front").stdout
    assert helmop(operator, "export", "hr", "-n", ns, "-l", "tier=back").stdout == ""
    # re-appliable as it is: into another namespace, where it installs the same release
    other = f"{ns}-copy"
    kube("kubectl", "create", "namespace", other)
    kube("kubectl", "apply", "-n", other, "-f", "-", stdin=exported.stdout.replace(f"namespace: {ns}",
                                                                                   f"namespace: {other}"))
    ready(kube, other, "kept")


def test_create_writes_validated_resources(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo,
                                          tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text("replicaCount: 2\nfullnameOverride: made\n")
    exported = helmop(operator, "create", "hr", "made", "-n", ns, "--repo", chart_repo.url, "--chart", "demo",
                      "--chart-version", "0.1.x", "--values", str(values), "--interval", "1h", "--export")
    assert exported.returncode == 0, exported.stderr
    assert yaml.safe_load(exported.stdout)["spec"]["values"] == {"replicaCount": 2, "fullnameOverride": "made"}
    assert not get(kube, ns, "hr", "made")  # --export applies nothing
    made = helmop(operator, "create", "helmrelease", "made", "-n", ns, "--repo", chart_repo.url, "--chart", "demo",
                  "--chart-version", "0.1.x", "--values", str(values), "--interval", "1h")
    assert made.returncode == 0 and f"✔ HelmRelease {ns}/made applied" in made.stdout, made.stderr
    ready(kube, ns, "made")
    assert get(kube, ns, "deploy", "made")["spec"]["replicas"] == 2
    source = helmop(operator, "create", "gitrepo", "src", "-n", ns, "--url", "https://example.com/config.git",
                    "--tag", "v1.0.0")
    sync = helmop(operator, "create", "csync", "apps", "-n", ns, "--source", "GitRepository/src", "--path", "apps",
                  "--no-prune")
    assert source.returncode == sync.returncode == 0, source.stderr + sync.stderr
    assert get(kube, ns, GITREPO, "src")["spec"]["ref"] == {"tag": "v1.0.0"}
    assert get(kube, ns, "csync", "apps")["spec"]["prune"] is False
    # checked as the API server and the operator check it, before anything is sent
    refusals = [helmop(operator, "create", "hr", "bad", "-n", ns, "--repo", chart_repo.url, "--chart", "demo",
                       "--timeout", "5q"),
                helmop(operator, "create", "hr", "bad", "-n", ns, "--chart", "demo"),
                helmop(operator, "create", "gitrepo", "bad", "-n", ns, "--url", "https://x/y.git", "--tag", "v1",
                       "--branch", "main"),
                helmop(operator, "create", "csync", "bad", "-n", ns, "--source", "HelmRepository/x")]
    assert [r.returncode for r in refusals] == [2, 2, 2, 2], [r.stderr for r in refusals]
    assert "spec.timeout" in refusals[0].stderr and "--repo" in refusals[1].stderr
    assert not get(kube, ns, "hr", "bad")


def test_create_flags_write_the_fields_they_name(operator: Operator, kube: Run, ns: str) -> None:
    def exported(*args: str) -> dict[str, Any]:
        done = helmop(operator, "create", *args, "-n", ns, "--export", "--label", "team=web", "--interval", "2m")
        assert done.returncode == 0, done.stderr
        obj: dict[str, Any] = yaml.safe_load(done.stdout)
        assert obj["metadata"] == {"name": args[1], "namespace": ns, "labels": {"team": "web"}}
        assert obj["spec"]["interval"] == "2m"
        return obj["spec"]

    release = exported("hr", "web", "--source", "gitrepo/config", "--chart", "charts/web", "--target-namespace",
                       "shop", "--create-target-namespace", "--release-name", "shop-web", "--service-account",
                       "deployer", "--depends-on", "db", "--depends-on", "infra/cache", "--timeout", "3m")
    assert release["chart"] == {"sourceRef": {"kind": "GitRepository", "name": "config"}, "path": "charts/web"}
    assert (release["targetNamespace"], release["releaseName"], release["serviceAccountName"], release["timeout"]) \
        == ("shop", "shop-web", "deployer", "3m")
    assert release["install"] == {"createNamespace": True}
    assert release["dependsOn"] == [{"name": "db"}, {"name": "cache", "namespace": "infra"}]
    source = exported("gitrepo", "config", "--url", "https://example.com/c.git", "--tag-semver", "^1.2",
                      "--secret-ref", "creds", "--timeout", "90s")
    assert source["ref"] == {"semver": "^1.2"} and source["secretRef"] == {"name": "creds"}
    assert exported("gitrepo", "pinned", "--url", "https://example.com/c.git", "--commit", "a" * 40)["ref"] == {
        "commit": "a" * 40}
    sync = exported("csync", "apps", "--source", "config", "--target-namespace", "shop", "--service-account",
                    "deployer")
    assert (sync["targetNamespace"], sync["serviceAccountName"], sync["prune"]) == ("shop", "deployer", True)
    # chart sources declared once, as with `flux create source helm`
    assert exported("helmrepo", "stable", "--url", "oci://registry.example/charts", "--secret-ref", "creds") == {
        "url": "oci://registry.example/charts", "interval": "2m", "type": "oci", "secretRef": {"name": "creds"}}
    shared = exported("hr", "shared", "--source", "helmrepo/stable", "--chart", "web", "--chart-version", "1.x")
    assert shared["chart"] == {"spec": {"chart": "web", "version": "1.x",
                                        "sourceRef": {"kind": "HelmRepository", "name": "stable"}}}
    assert exported("hr", "packaged", "--source", "OCIRepository/web")["chartRef"] == {"kind": "OCIRepository",
                                                                                        "name": "web"}


def test_tree_trace_and_events_of_a_release(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo) -> None:
    apply(kube, ns, hr("shown", chart_repo, version="0.1.0"))
    ready(kube, ns, "shown")
    tree = helmop(operator, "tree", "hr", "shown", "-n", ns)
    assert tree.returncode == 0, tree.stderr
    lines = tree.stdout.splitlines()
    assert lines[0] == f"HelmRelease/{ns}/shown  Ready"
    assert f"Deployment/{ns}/shown  Current" in tree.stdout and f"Service/{ns}/shown  Current" in tree.stdout
    trace = helmop(operator, "trace", "deployment", "shown", "-n", ns)
    assert trace.returncode == 0, trace.stderr
    fields = dict(line.split(":", 1) for line in trace.stdout.splitlines() if ":" in line and line != "---")
    assert fields["Object"].strip() == f"Deployment/{ns}/shown" and fields["HelmRelease"].strip() == f"{ns}/shown"
    assert fields["Chart"].strip().startswith("demo 0.1.0 from ")
    assert fields["Values digest"].strip() == get(kube, ns, "hr", "shown")["status"]["lastAttemptedConfigDigest"]
    kube("kubectl", "-n", ns, "create", "configmap", "loose")
    loose = helmop(operator, "trace", "cm", "loose", "-n", ns)
    assert loose.returncode == 2 and "not managed by helmop" in loose.stderr
    assert helmop(operator, "tree", "hr", "ghost", "-n", ns).returncode == 2

    events = helmop(operator, "events", "hr", "shown", "-n", ns)
    assert events.returncode == 0, events.stderr
    rows = events.stdout.splitlines()
    assert rows[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert any("InstallSucceeded" in r and "helmrelease/shown" in r for r in rows[1:])
    everything = helmop(operator, "events", "-n", ns).stdout
    assert "helmrelease/shown" in everything and "deployment/" not in everything  # helmop's kinds only
    assert f"helmrelease/{ns}/shown" in helmop(operator, "events", "-A").stdout


def test_logs_of_one_object_from_the_log_file(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo,
                                              tmp_path: Path) -> None:
    log_file = tmp_path / "operator.log"
    handler = logsetup.add_file(str(log_file))  # as `helmop run --log-file` does
    helmop_logger = logging.getLogger("helmop")
    level = helmop_logger.level
    helmop_logger.setLevel(logging.INFO)
    try:
        apply(kube, ns, hr("logged", chart_repo, version="0.1.0"))
        apply(kube, ns, hr("other", chart_repo, version="0.1.0"))
        ready(kube, ns, "logged")
        ready(kube, ns, "other")
        shown = helmop(operator, "logs", "hr", "logged", "-n", ns, "--log-file", str(log_file))
        assert shown.returncode == 0, shown.stderr
        assert f"INFO HelmRelease {ns}/logged: " in shown.stdout and "InstallSucceeded: Helm install" in shown.stdout
        assert f"{ns}/other" not in shown.stdout
        def both_logged() -> str | None:
            text = helmop(operator, "logs", env={"HELMOP_LOG_FILE": str(log_file)}).stdout
            return text if f"{ns}/other" in text else None

        # the line comes with the Event, posted just after the status `ready` saw: waited for, not raced
        everything = eventually(both_logged, timeout=30)
        assert f"{ns}/other" in everything and f"{ns}/logged" in everything
        last = helmop(operator, "logs", "--tail", "1", env={"HELMOP_LOG_FILE": str(log_file)}).stdout
        assert last.splitlines() == everything.splitlines()[-1:]
        follow = subprocess.Popen([sys.executable, "-m", "helmop.cli", "logs", "hr", "logged", "-n", ns, "-f",
                                   "--log-file", str(log_file)], stdout=subprocess.PIPE, text=True,
                                  env={**os.environ, "KUBECONFIG": str(operator.sandbox.kubeconfig)})
        try:
            assert follow.stdout is not None
            assert "InstallSucceeded" in follow.stdout.readline()  # what was there
            apply(kube, ns, hr("logged", chart_repo, version="0.2.0"))
            assert any("UpgradeSucceeded" in follow.stdout.readline() for _ in range(20))  # what comes
        finally:
            follow.send_signal(signal.SIGINT)
            assert follow.wait(20) == 0
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()
        helmop_logger.setLevel(level)
    no_source = helmop(operator, "logs", env={"HELMOP_LOG_FILE": ""})
    assert no_source.returncode == 2 and "no operator pods" in no_source.stderr


def test_shell_completion(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo, tmp_path: Path) -> None:
    for shell in ("bash", "zsh", "fish"):
        script = helmop(operator, "completion", shell)
        assert script.returncode == 0 and "helmop" in script.stdout and "_ARGCOMPLETE" in script.stdout
    apply(kube, ns, hr("completed", chart_repo, version="0.1.0"))

    def complete(line: str) -> list[str]:
        out = tmp_path / "completions"
        env = {"_ARGCOMPLETE": "1", "_ARGCOMPLETE_SHELL": "bash", "COMP_LINE": line, "COMP_POINT": str(len(line)),
               "COMP_TYPE": "9", "_ARGCOMPLETE_STDOUT_FILENAME": str(out), "_ARGCOMPLETE_IFS": "\n"}
        done = helmop(operator, *line.split()[1:], env=env)
        assert done.returncode == 0, done.stderr
        return out.read_text().split()

    assert {"tree", "trace"} <= set(complete("helmop tr"))
    assert "hr" in complete("helmop get ")
    assert complete(f"helmop reconcile hr -n {ns} comp") == ["completed"]
    assert ns in complete(f"helmop get hr -n {ns[:6]}")
    assert "--watch" in complete("helmop get --w")


def test_diff_previews_what_an_overlay_would_change(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo,
                                                    tmp_path: Path) -> None:
    """`helmop diff -f OVERLAY` (flux diff kustomization): the overlay built as a ConfigSync builds it, its
    HelmReleases diffed against the live releases."""
    apply(kube, ns, hr("overlaid", chart_repo, version="0.1.0", values={"replicaCount": 1}))
    ready(kube, ns, "overlaid")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "base").mkdir()
    (tmp_path / "prod").mkdir()
    base = yaml.safe_load(hr("overlaid", chart_repo, version="0.1.0", values={"replicaCount": 1}))
    base["metadata"]["namespace"] = ns
    (tmp_path / "base" / "release.yaml").write_text(yaml.safe_dump(base))
    (tmp_path / "base" / "kustomization.yaml").write_text("resources: [release.yaml]\n")
    (tmp_path / "prod" / "kustomization.yaml").write_text(
        "resources: [../base]\npatches:\n- target: {kind: HelmRelease}\n  patch: |\n"
        "    - {op: replace, path: /spec/values/replicaCount, value: '${replicas}'}\n")
    preview = helmop(operator, "diff", "-f", str(tmp_path / "prod"), "-n", ns, "--substitute", "replicas=4")
    assert preview.returncode == 1, preview.stdout + preview.stderr
    assert "-  replicas: 1" in preview.stdout and "+  replicas: 4" in preview.stdout
    assert get(kube, ns, "deploy", "overlaid")["spec"]["replicas"] == 1  # nothing applied


def test_flux_kinds_by_their_group_qualified_names(operator: Operator, kube: Run, ns: str,
                                                   chart_repo: ChartRepo) -> None:
    """`hr` is helmop's HelmRelease; Flux's is named with its group, as kubectl takes it, for get and reconcile
    (--with-source reconciles its HelmRepository first)."""
    apply(kube, ns, yaml.safe_dump_all([
        {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmRepository", "metadata": {"name": "stable"},
         "spec": {"interval": "1h", "url": chart_repo.url}},
        {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease", "metadata": {"name": "fluxed"},
         "spec": {"interval": "1h", "chart": {"spec": {"chart": "demo", "version": "0.1.0",
                                                        "sourceRef": {"kind": "HelmRepository", "name": "stable"}}},
                  "values": {"fullnameOverride": "fluxed"}}}]))
    done = helmop(operator, "reconcile", "hr.helm.toolkit.fluxcd.io", "fluxed", "-n", ns, "--with-source",
                  "--timeout", "90s")
    assert done.returncode == 0, done.stderr
    assert f"annotating HelmRepository {ns}/stable" in done.stdout and f"annotating HelmRelease {ns}/fluxed" in \
        done.stdout
    listed = helmop(operator, "get", "helmreleases.helm.toolkit.fluxcd.io", "-n", ns, "-o", "wide")
    assert listed.returncode == 0, listed.stderr
    row = next(line.split() for line in listed.stdout.splitlines() if line.startswith("helmrelease/fluxed"))
    assert "True" in row and "HelmRepository/stable" in row
    assert "fluxed" not in helmop(operator, "get", "hr", "-n", ns).stdout  # helmop's own kind
