"""`helmop preview`: what a pull request changes, object by object, rendered offline from two git revisions."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from helmop.cli import revisions
from helmop.cli.errors import Failed
from helmop.sources.git import Limits
from tests.chartrepo import ChartRepo, tiny_chart
from tests.sops import Sops, age_identity
from tests.test_cli_offline import helmop
from tests.tools import ROOT, TOOLS, Run, tool

CHART = {
    "Chart.yaml": "apiVersion: v2\nname: web\nversion: 1.0.0\n",
    "values.yaml": "replicaCount: 1\n",
    "templates/deployment.yaml": """apiVersion: apps/v1
kind: Deployment
metadata: {name: {{ .Release.Name }}}
spec:
  replicas: {{ .Values.replicaCount }}
  selector: {matchLabels: {app: {{ .Release.Name }}}}
  template:
    metadata: {labels: {app: {{ .Release.Name }}}}
    spec: {containers: [{name: web, image: nginx}]}
""",
    "templates/service.yaml": "apiVersion: v1\nkind: Service\nmetadata: {name: {{ .Release.Name }}}\n"
                              "spec: {ports: [{port: 80}], selector: {app: {{ .Release.Name }}}}\n",
}
OLD_SECRET, NEW_SECRET = "hunter2-the-old-password", "hunter3-the-new-password"


def _release(name: str, replicas: int) -> dict[str, object]:
    return {"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease", "metadata": {"name": name, "namespace": "shop"},
            "spec": {"chart": {"sourceRef": {"name": "config"}, "path": "charts/web"}, "interval": "5m",
                     "values": {"replicaCount": replicas}}}


def _secret(password: str) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "shop"},
                           "data": {"password": base64.b64encode(password.encode()).decode()}})


def _commit(repo: Path, files: dict[str, str], message: str) -> None:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q",
                    "-m", message], check=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """main: web and db released from the tree's chart, and a Secret; the pull request (branch pr): web's values
    change, a ConfigMap is added, db is removed, the Secret's value changes."""
    subprocess.run(["git", "init", "-q", "-b", "main", str(tmp_path)], check=True)
    sync = {"apiVersion": "helmop.dev/v1alpha1", "kind": "ConfigSync", "metadata": {"name": "apps"},
            "spec": {"sourceRef": {"name": "config"}, "path": "./apps", "interval": "5m"}}
    _commit(tmp_path, {**{f"charts/web/{name}": text for name, text in CHART.items()},
                       "clusters/prod/apps.yaml": yaml.safe_dump(sync),
                       "apps/kustomization.yaml": "resources: [web.yaml, db.yaml, secret.yaml]\n",
                       "apps/web.yaml": yaml.safe_dump(_release("web", 1)),
                       "apps/db.yaml": yaml.safe_dump(_release("db", 1)),
                       "apps/secret.yaml": _secret(OLD_SECRET)}, "base")
    subprocess.run(["git", "-C", str(tmp_path), "checkout", "-q", "-b", "pr"], check=True)
    (tmp_path / "apps" / "db.yaml").unlink()
    _commit(tmp_path, {"apps/kustomization.yaml": "resources: [web.yaml, settings.yaml, secret.yaml]\n",
                       "apps/web.yaml": yaml.safe_dump(_release("web", 3)),
                       "apps/settings.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: "
                                             "shop}\ndata: {mode: fast}\n",
                       "apps/secret.yaml": _secret(NEW_SECRET)}, "the pull request")
    subprocess.run(["git", "-C", str(tmp_path), "checkout", "-q", "main"], check=True)
    (tmp_path / "apps" / "web.yaml").write_text("not: [what, is, committed\n")  # the working tree is never read
    return tmp_path


def _preview(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = helmop("preview", "--repo", str(repo), "--base", "main", "--head", "pr", *args,
                  env={"PATH": f"{TOOLS}:{os.environ['PATH']}"})
    for secret in (OLD_SECRET, NEW_SECRET):
        for form in (secret, base64.b64encode(secret.encode()).decode()):
            assert form not in done.stdout + done.stderr
    return done


def test_preview_prints_exactly_what_the_pull_request_changes(repo: Path) -> None:
    done = _preview(repo)
    assert done.returncode == 0, done.stderr
    headers = sorted(line for line in done.stdout.splitlines() if line.startswith("# ") and "(" in line)
    assert headers == ["# ConfigSync apps: ConfigMap/shop/settings (added)",
                       "# ConfigSync apps: HelmRelease/shop/db (removed)",
                       "# ConfigSync apps: HelmRelease/shop/web (changed)",
                       "# ConfigSync apps: Secret/shop/db (changed)",
                       "# HelmRelease shop/db: Deployment/shop/db (removed)",
                       "# HelmRelease shop/db: Service/shop/db (removed)",
                       "# HelmRelease shop/web: Deployment/shop/web (changed)"]
    assert "-  replicas: 1\n+  replicas: 3\n" in done.stdout
    assert all(line[:1] in "#-+@ " for line in done.stdout.splitlines()), done.stdout  # a diff, masks and all
    assert "Service/shop/web" not in done.stdout  # unchanged
    assert "<secret hmac-sha256:" in done.stdout  # the Secret's change shows as a digest's
    assert "# 1 added, 3 changed, 3 removed\n" in done.stdout
    assert "# HelmRelease shop/web: values\n" in done.stdout and "# HelmRelease shop/db: removed\n" in done.stdout
    one = _preview(repo, "--path", "apps", "--max-lines", "4")
    assert one.returncode == 0 and one.stdout.count("… ") >= 1 and "more lines" in one.stdout


def test_preview_as_markdown_and_json(repo: Path) -> None:
    markdown = _preview(repo, "-o", "markdown")
    assert markdown.returncode == 0, markdown.stderr
    assert "| added | changed | removed |\n|---|---|---|\n| 1 | 3 | 3 |" in markdown.stdout
    assert "<details><summary>changed: <code>Deployment/shop/web</code></summary>" in markdown.stdout
    assert "```diff\n" in markdown.stdout and "- `HelmRelease shop/web`: values" in markdown.stdout
    found = json.loads(_preview(repo, "-o", "json").stdout)
    assert found["summary"] == {"added": 1, "changed": 3, "removed": 3}
    assert [o["object"] for o in found["added"]] == ["ConfigMap/shop/settings"]
    assert {o["object"] for o in found["removed"]} == {"HelmRelease/shop/db", "Deployment/shop/db", "Service/shop/db"}
    assert {"name": "HelmRelease shop/web", "change": "values"} in found["releases"]
    assert all(o["diff"].startswith("--- a/") for o in found["changed"])


def test_preview_of_a_revision_that_does_not_build_names_the_file(repo: Path) -> None:
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "-f", "pr"], check=True)
    _commit(repo, {"apps/kustomization.yaml": "resources: [web.yaml, missing.yaml]\n"}, "broken")
    done = _preview(repo)
    assert done.returncode == 1, done.stdout
    assert "pr: apps:" in done.stderr and "missing.yaml" in done.stderr, done.stderr
    outside = _preview(repo, "--path", "apps/../../elsewhere")
    assert outside.returncode == 1 and "../elsewhere: a folder outside the repository" in outside.stderr
    unknown = helmop("preview", "--repo", str(repo), "--base", "main", "--head", "no-such-branch")
    assert unknown.returncode == 2 and "'no-such-branch' is not a commit" in unknown.stderr


def test_a_revision_is_read_from_git_as_the_operator_reads_a_tree(tmp_path: Path) -> None:
    """Links are followed only to files inside the tree, a tree over the limits is refused, and the working tree
    is never what is read."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "apps").mkdir()
    (repo / "apps" / "linked.yaml").symlink_to("../real.yaml")
    _commit(repo, {"real.yaml": "kind: ConfigMap\n"}, "inside")
    (repo / "real.yaml").write_text("uncommitted\n")
    into = tmp_path / "one"
    commit = revisions.read_revision(repo, "HEAD", into)
    assert len(commit) == 40 and (into / "apps" / "linked.yaml").read_text() == "kind: ConfigMap\n"
    assert not (into / "apps" / "linked.yaml").is_symlink()
    with pytest.raises(Failed, match="larger than a repository"):
        revisions.read_revision(repo, "HEAD", tmp_path / "two", Limits(max_entries=1))
    (repo / "apps" / "passwd.yaml").symlink_to("../../../etc/passwd")
    _commit(repo, {}, "outside")
    with pytest.raises(Failed, match=re.escape("apps/passwd.yaml: a link to ../../../etc/passwd, outside")):
        revisions.read_revision(repo, "HEAD", tmp_path / "three")
    with pytest.raises(Failed, match="is not a git revision"):
        revisions.read_revision(repo, "--output=/tmp/x", tmp_path / "four")


def _ssa(run: Run, manifest: dict[str, object], manager: str = "helmop-configsync") -> None:
    run("kubectl", "apply", "--server-side", "--force-conflicts", f"--field-manager={manager}", "-f", "-",
        stdin=yaml.safe_dump(manifest))


def _cluster_repo(path: Path, ns: str) -> Path:
    """main and pr of :func:`repo`, in namespace ``ns``."""
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    web, db = (dict(_release(name, 1), metadata={"name": name, "namespace": ns}) for name in ("web", "db"))
    secret = yaml.safe_load(_secret(OLD_SECRET)) | {"metadata": {"name": "db", "namespace": ns}}
    sync = {"apiVersion": "helmop.dev/v1alpha1", "kind": "ConfigSync", "metadata": {"name": "apps", "namespace": ns},
            "spec": {"sourceRef": {"name": "config"}, "path": "./apps", "interval": "1h"}}
    _commit(path, {**{f"charts/web/{name}": text for name, text in CHART.items()},
                   "clusters/prod/apps.yaml": yaml.safe_dump(sync),
                   "apps/kustomization.yaml": "resources: [web.yaml, db.yaml, secret.yaml]\n",
                   "apps/web.yaml": yaml.safe_dump(web), "apps/db.yaml": yaml.safe_dump(db),
                   "apps/secret.yaml": yaml.safe_dump(secret)}, "base")
    subprocess.run(["git", "-C", str(path), "checkout", "-q", "-b", "pr"], check=True)
    (path / "apps" / "db.yaml").unlink()
    web["spec"]["values"] = {"replicaCount": 3}  # type: ignore[index]
    secret["data"] = {"password": base64.b64encode(NEW_SECRET.encode()).decode()}
    settings = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": ns},
                "data": {"mode": "fast"}}
    _commit(path, {"apps/kustomization.yaml": "resources: [web.yaml, settings.yaml, secret.yaml]\n",
                   "apps/web.yaml": yaml.safe_dump(web), "apps/settings.yaml": yaml.safe_dump(settings),
                   "apps/secret.yaml": yaml.safe_dump(secret)}, "the pull request")
    return path


def test_preview_against_the_cluster_shows_what_applying_the_head_would_change(tmp_path: Path, run: Run,
                                                                                namespace: str) -> None:
    """The cluster holds what main applied (a ConfigSync's objects and inventory, the releases helm installed, with
    the defaults the API server adds) and more; the head is compared with it: only what applying it would change
    shows, an object outside the ConfigSync's inventory is never "removed", and no Secret value is printed."""
    ns = namespace
    repo = _cluster_repo(tmp_path / "repo", ns)
    run("kubectl", "apply", "--server-side", "-f", str(ROOT / "helmop/api/crds"))
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "main"], check=True)
    for name in ("web", "db"):  # what the operator installed from main
        run("helm", "install", name, str(repo / "charts/web"), "-n", ns, "--set", "replicaCount=1")
    applied = [yaml.safe_load((repo / "apps" / f).read_text()) for f in ("web.yaml", "db.yaml", "secret.yaml")]
    legacy = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "legacy", "namespace": ns}}
    for obj in [*applied, legacy]:
        obj["metadata"]["labels"] = {"helmop.dev/configsync": f"{ns}.apps"}
        _ssa(run, obj)
    _ssa(run, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bystander", "namespace": ns}},
         manager="kubectl")
    _ssa(run, {"apiVersion": "helmop.dev/v1alpha1", "kind": "ConfigSync", "metadata": {"name": "apps", "namespace": ns},
               "spec": {"sourceRef": {"name": "config"}, "path": "./apps", "interval": "1h", "suspend": True}})
    inventory = [{"apiVersion": o["apiVersion"], "kind": o["kind"], "namespace": ns, "name": o["metadata"]["name"]}
                 for o in [*applied, legacy]]
    run("kubectl", "-n", ns, "patch", "configsyncs.helmop.dev", "apps", "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"inventory": inventory}}))
    kubeconfig = run("kubectl", "config", "view", "--raw", "--minify").stdout
    (tmp_path / "kc").write_text(kubeconfig)
    done = helmop("preview", "--repo", str(repo), "--cluster", "--head", "pr", "--kubeconfig", str(tmp_path / "kc"),
                  env={"PATH": f"{TOOLS}:{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr
    headers = sorted(line for line in done.stdout.splitlines() if line.startswith("# ") and "(" in line)
    assert headers == [f"# ConfigSync apps: ConfigMap/{ns}/legacy (removed)",
                       f"# ConfigSync apps: ConfigMap/{ns}/settings (added)",
                       f"# ConfigSync apps: HelmRelease/{ns}/db (removed)",
                       f"# ConfigSync apps: HelmRelease/{ns}/web (changed)",
                       f"# ConfigSync apps: Secret/{ns}/db (changed)",
                       f"# HelmRelease {ns}/db: Deployment/{ns}/db (removed)",
                       f"# HelmRelease {ns}/db: Service/{ns}/db (removed)",
                       f"# HelmRelease {ns}/web: Deployment/{ns}/web (changed)"], done.stdout
    web = done.stdout.split(f"Deployment/{ns}/web (changed)\n")[1].split("\n# ")[0]
    assert [line for line in web.splitlines() if line[:1] in "+-" and line[:3] not in ("---", "+++")] == [
        "-  replicas: 1", "+  replicas: 3"], web
    assert "# the cluster..pr\n" in done.stdout and f"# HelmRelease {ns}/db: removed\n" in done.stdout
    for secret in (OLD_SECRET, NEW_SECRET):
        for form in (secret, base64.b64encode(secret.encode()).decode()):
            assert form not in done.stdout + done.stderr
    both = helmop("preview", "--repo", str(repo), "--cluster", "--base", "main", "--head", "pr")
    assert both.returncode == 2 and "either --base REF" in both.stderr


@pytest.fixture
def flux_charts(tmp_path: Path) -> Iterator[ChartRepo]:
    """A chart repository on loopback: tiny 0.1.0, and 0.2.0 whose ConfigMap says more."""
    repo = ChartRepo(tmp_path / "charts", tiny_chart(tmp_path / "charts" / "src", "mode: slow\n",
                                                     "  mode: {{ .Values.mode }}\n"), tool("helm"))
    repo.publish("tiny", "0.1.0")
    repo.publish("tiny", "0.2.0", templates={"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: "
                                                         "{{ .Release.Name }}\ndata:\n  mode: {{ .Values.mode }}\n"
                                                         "  size: large\n"})
    yield repo
    repo.close()


def _flux_release(name: str, chart: str, version: str) -> dict[str, object]:
    return {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"interval": "5m", "chart": {"spec": {"chart": chart, "version": version,
                                                          "sourceRef": {"kind": "HelmRepository", "name": "charts"}}}}}


def _flux_repo(path: Path) -> Path:
    """main: a Flux Kustomization over apps, whose HelmRepository (a URL nothing answers: the mirror has it) has
    the chart of two Flux HelmReleases; the pull request (branch pr): web's chart 0.1.0 -> 0.2.0, and gone's chart
    is one the repository does not have."""
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    sync = {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": "apps", "namespace": "flux-system"},
            "spec": {"sourceRef": {"kind": "GitRepository", "name": "config"}, "path": "./apps", "interval": "5m",
                     "prune": True}}
    source = {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmRepository",
              "metadata": {"name": "charts", "namespace": "shop"},
              "spec": {"url": "http://127.0.0.1:1/stable", "interval": "1h"}}
    _commit(path, {"clusters/prod/apps.yaml": yaml.safe_dump(sync),
                   "apps/kustomization.yaml": "resources: [charts.yaml, web.yaml, gone.yaml]\n",
                   "apps/charts.yaml": yaml.safe_dump(source),
                   "apps/web.yaml": yaml.safe_dump(_flux_release("web", "tiny", "0.1.0")),
                   "apps/gone.yaml": yaml.safe_dump(_flux_release("gone", "tiny", "0.1.0"))}, "base")
    subprocess.run(["git", "-C", str(path), "checkout", "-q", "-b", "pr"], check=True)
    _commit(path, {"apps/web.yaml": yaml.safe_dump(_flux_release("web", "tiny", "0.2.0")),
                   "apps/gone.yaml": yaml.safe_dump(_flux_release("gone", "no-such-chart", "1.0.0"))},
            "the pull request")
    return path


def test_preview_renders_flux_helmreleases_and_names_a_chart_it_cannot_fetch(tmp_path: Path,
                                                                             flux_charts: ChartRepo) -> None:
    """A Flux HelmRelease is rendered as helmop's are, its chart from a Flux HelmRepository of the build
    (through --chart-mirror); the group of a release whose chart cannot be fetched says why, the rest is shown,
    and the exit code says that a revision did not render; each group is named by its own kind."""
    repo = _flux_repo(tmp_path / "repo")
    done = _preview(repo, "--chart-mirror", f"http://127.0.0.1:1/stable={flux_charts.url}")
    assert done.returncode == 1, done.stdout + done.stderr
    headers = sorted(line for line in done.stdout.splitlines() if re.match(r"# .*\((added|changed|removed)\)$", line))
    assert headers == ["# HelmRelease shop/web: ConfigMap/shop/web (changed)",
                       "# Kustomization apps: HelmRelease/shop/gone (changed)",
                       "# Kustomization apps: HelmRelease/shop/web (changed)"], done.stdout
    web = done.stdout.split("ConfigMap/shop/web (changed)\n")[1].split("\n# ")[0]
    assert [line for line in web.splitlines() if line[:1] in "+-" and line[:3] not in ("---", "+++")] == [
        "+  size: large"], web
    assert "# HelmRelease shop/web: chart\n" in done.stdout
    assert "# HelmRelease shop/gone: not rendered in pr: " in done.stdout and "no-such-chart" in done.stdout
    assert "HelmRelease shop/gone: not rendered in pr: " in done.stderr and "ConfigSync" not in done.stdout
    found = json.loads(_preview(repo, "-o", "json", "--chart-mirror",
                                f"http://127.0.0.1:1/stable={flux_charts.url}").stdout)
    assert found["summary"] == {"added": 0, "changed": 3, "removed": 0}
    assert [(u["name"], bool(u["base"]), "no-such-chart" in u["head"]) for u in found["unrendered"]] == [
        ("HelmRelease shop/gone", False, True)]
    assert found["groups"] == {"HelmRelease shop/web": "helm.toolkit.fluxcd.io/v2",
                               "HelmRelease shop/gone": "helm.toolkit.fluxcd.io/v2",
                               "Kustomization apps": "kustomize.toolkit.fluxcd.io/v1"}
    unmirrored = _preview(repo)  # the tree's URL is not served: every chart's group says so, the rest still shown
    assert unmirrored.returncode == 1 and "# Kustomization apps: HelmRelease/shop/web (changed)" in unmirrored.stdout
    assert "# HelmRelease shop/web: not rendered in main, pr: " in unmirrored.stdout, unmirrored.stdout


def test_preview_reads_values_files_of_the_tree_and_masks_what_it_decrypts(tmp_path: Path) -> None:
    """A release's values files from its GitRepository are read from the revision previewed; a SOPS-encrypted one
    is decrypted with --decrypt's key and what it decrypted is masked; without the key the release is not rendered
    (never with ENC[...] values)."""
    identity, recipient = age_identity()
    (tmp_path / "age.key").write_text(identity + "\n")
    old, new = f"token-{os.urandom(8).hex()}", f"token-{os.urandom(8).hex()}"
    chart = {**CHART, "templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Release.Name }}}\n"
                                           "data: {token: {{ .Values.token | quote }}}\n"}
    release = {"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease",
               "metadata": {"name": "web", "namespace": "shop"},
               "spec": {"chart": {"sourceRef": {"name": "config"}, "path": "charts/web"}, "interval": "5m",
                        "decryption": {"provider": "sops", "secretRef": {"name": "keys"}},
                        "valuesFiles": [{"sourceRef": {"kind": "GitRepository", "name": "config"}, "path": p}
                                        for p in ("values/web.yaml", "values/web-secret.yaml")]}}
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    sync = {"apiVersion": "helmop.dev/v1alpha1", "kind": "ConfigSync", "metadata": {"name": "apps"},
            "spec": {"sourceRef": {"name": "config"}, "path": "./apps", "interval": "5m"}}
    _commit(repo, {**{f"charts/web/{name}": text for name, text in chart.items()},
                   "clusters/prod/apps.yaml": yaml.safe_dump(sync), "apps/web.yaml": yaml.safe_dump(release),
                   "values/web.yaml": "replicaCount: 1\n",
                   "values/web-secret.yaml": Sops(age=[recipient]).yaml({"token": old})}, "base")
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "-b", "pr"], check=True)
    _commit(repo, {"values/web.yaml": "replicaCount: 3\n",
                   "values/web-secret.yaml": Sops(age=[recipient]).yaml({"token": new})}, "the pull request")
    done = _preview(repo, "--decrypt", str(tmp_path / "age.key"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "-  replicas: 1\n+  replicas: 3" in done.stdout, done.stdout  # the plain file's change
    # the token changed (the object is listed) and neither value shows: each side masked before the diff
    assert "# HelmRelease shop/web: ConfigMap/shop/web (changed)" in done.stdout
    for token in (old, new):
        assert token not in done.stdout + done.stderr
    locked = _preview(repo)
    assert "# HelmRelease shop/web: not rendered in main, pr: " in locked.stdout, locked.stdout
    assert "is SOPS-encrypted: set spec.decryption" in locked.stdout and "ENC[" not in locked.stdout
