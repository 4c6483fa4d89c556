"""`helmop try`: a config repository tried on an embedded sandbox, with no cluster: a bare repository in Flux's
bootstrap layout (clusters/dev applying ./infrastructure and ./apps/dev) whose charts are served on loopback and
reached through --chart-mirror converges and is reported; a broken overlay is reported by file and reason. The
charts are made with `helm create`; with $HELMOP_CHART_CORPUS, ingress-nginx and sealed-secrets from the corpus
as well."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from playwright.sync_api import sync_playwright

from helmop.cli.errors import Failed
from helmop.cli.main import main
from helmop.cli.trying import plan, repository, states
from helmop.cli.trying.report import Result, as_json, as_table
from tests.browser import CHROMIUM, FLAGS, NO_CHROMIUM
from tests.chartrepo import ChartRepo, chart_version
from tests.sops import Sops, age_identity
from tests.tools import TOOLS, tool

HELM, SOURCE, KUSTOMIZE = "helm.toolkit.fluxcd.io/v2", "source.toolkit.fluxcd.io/v1", "kustomize.toolkit.fluxcd.io/v1"
UPSTREAM = {"ingress-nginx": "https://kubernetes.github.io/ingress-nginx",
            "sealed-secrets": "https://bitnami-labs.github.io/sealed-secrets",
            "podinfo": "https://stefanprodan.github.io/podinfo"}
CORPUS = Path(os.environ["HELMOP_CHART_CORPUS"]) if os.environ.get("HELMOP_CHART_CORPUS") else None
FLUX_REGEX = "^(data|stringData)$"  # Flux's usual SOPS encrypted_regex
ORIGIN = "ssh://git@github.com/example/fleet"  # what the bootstrap's GitRepository names: served from the copy


def helmop_try(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{TOOLS}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([sys.executable, "-m", "helmop.cli", "try", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def _kustomization(name: str, path: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": KUSTOMIZE, "kind": "Kustomization", "metadata": {"name": name, "namespace": "flux-system"},
            "spec": {"interval": "10m", "path": path, "prune": True,
                     "sourceRef": {"kind": "GitRepository", "name": "flux-system"}, **spec}}


def _release(name: str, namespace: str, version: str, values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            {"apiVersion": HELM, "kind": "HelmRelease", "metadata": {"name": name, "namespace": namespace},
             "spec": {"interval": "1h", "timeout": "2m", "values": values or {},
                      "chart": {"spec": {"chart": name, "version": version, "sourceRef": {
                          "kind": "HelmRepository", "name": name, "namespace": "flux-system"}}}}}]


def flux_layout(charts: dict[str, str], broken: bool = False, encrypted: str = "") -> dict[str, str]:
    """Laid out as ``flux bootstrap`` and Flux's example repositories: clusters/dev/flux-system (the GitRepository
    and the Kustomization of clusters/dev), infrastructure (HelmRepositories and the infrastructure charts),
    apps/base and apps/dev (podinfo, its values patched by the dev overlay); ``charts``: chart name -> version;
    ``encrypted``: a SOPS-encrypted Secret in apps/dev, decrypted with the keys of the Secret sops-age."""
    sync = [{"apiVersion": SOURCE, "kind": "GitRepository",
             "metadata": {"name": "flux-system", "namespace": "flux-system"},
             "spec": {"interval": "1m", "url": ORIGIN, "ref": {"branch": "main"},
                      "secretRef": {"name": "flux-system"}}},
            _kustomization("flux-system", "./clusters/dev")]
    infra = [name for name in charts if name != "podinfo"]
    sources = [{"apiVersion": SOURCE, "kind": "HelmRepository", "metadata": {"name": name, "namespace": "flux-system"},
                "spec": {"interval": "1h", "url": UPSTREAM[name]}} for name in charts]
    return {
        "clusters/dev/flux-system/gotk-sync.yaml": yaml.safe_dump_all(sync),
        "clusters/dev/flux-system/kustomization.yaml": "resources: [gotk-sync.yaml]\n",
        "clusters/dev/infrastructure.yaml": yaml.safe_dump(_kustomization("infrastructure", "./infrastructure",
                                                                          wait=True)),
        "clusters/dev/apps.yaml": yaml.safe_dump(_kustomization(
            "apps", "./apps/dev", dependsOn=[{"name": "infrastructure"}],
            **({"decryption": {"provider": "sops", "secretRef": {"name": "sops-age"}}} if encrypted else {}))),
        "infrastructure/sources.yaml": yaml.safe_dump_all(sources),
        **{f"infrastructure/{name}.yaml": yaml.safe_dump_all(_release(name, name, charts[name])) for name in infra},
        "apps/base/podinfo/kustomization.yaml": "resources: [release.yaml]\n",
        "apps/base/podinfo/release.yaml": yaml.safe_dump_all(_release("podinfo", "podinfo", charts["podinfo"],
                                                                      {"replicaCount": 1})),
        **({"apps/dev/secret.yaml": encrypted} if encrypted else {}),
        "apps/dev/kustomization.yaml": "resources: [../base/podinfo" + (", missing.yaml" if broken else "")
                                       + (", secret.yaml" if encrypted else "") + "]\n"
                                       "patches:\n- path: values.yaml\n  target: {kind: HelmRelease, name: podinfo}\n",
        "apps/dev/values.yaml": yaml.safe_dump({"apiVersion": HELM, "kind": "HelmRelease",
                                                "metadata": {"name": "podinfo"},
                                                "spec": {"values": {"replicaCount": 2}}}),
    }


def bare_repository(where: Path, files: dict[str, str]) -> Path:
    """A bare repository (as a forge holds one) whose main branch has ``files``."""
    work = where / "work"
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    for name, text in files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text)
    subprocess.run(["git", "-C", str(work), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q",
                    "-m", "fleet"], check=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(where / "fleet.git")], check=True)
    return where / "fleet.git"


@pytest.fixture(scope="module")
def charts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ChartRepo, dict[str, str]]]:
    """Charts made with `helm create`, named as the infrastructure charts and podinfo, served on loopback."""
    root = tmp_path_factory.mktemp("charts")
    subprocess.run([tool("helm"), "create", str(root / "src")], check=True, capture_output=True)
    repo = ChartRepo(root, root / "src", tool("helm"))
    for name in ("ingress-nginx", "podinfo"):
        repo.publish(name, "1.0.0")
    yield repo, {"ingress-nginx": "1.0.0", "podinfo": "1.0.0"}
    repo.close()


def mirrors(repo: ChartRepo, names: list[str]) -> list[str]:
    return [arg for name in names for arg in ("--chart-mirror", f"{UPSTREAM[name]}={repo.url}")]


def _json(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.stdout.startswith("{"), (done.returncode, done.stdout[-2000:], done.stderr[-3000:])
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_a_flux_repository_converges_and_is_reported(tmp_path: Path, charts: tuple[ChartRepo, dict[str, str]]) -> None:
    """A bare clone in Flux's bootstrap layout, its charts made with `helm create`, a Secret encrypted with SOPS
    (--decrypt gives the key): every object Ready, exit 0, the live view in dependency order on stderr and the
    report (a table) on stdout."""
    repo, versions = charts
    identity, recipient = age_identity()
    (tmp_path / "key.agekey").write_text(identity + "\n")
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "podinfo"},
              "stringData": {"password": "s3cret-of-the-test"}}
    bare = bare_repository(tmp_path, flux_layout(versions, encrypted=Sops(age=[recipient], regex=FLUX_REGEX).yaml(
        secret)))
    done = helmop_try(str(bare), "--timeout", "150s", "--decrypt", str(tmp_path / "key.agekey"),
                      *mirrors(repo, list(versions)))
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-5000:])
    table = done.stdout.splitlines()
    assert table[0].split()[:3] == ["OBJECT", "STATE", "READY"]
    rows = {" ".join(line.split()[:2]): line.split()[2:] for line in table[1:] if line and not line.startswith(" ")}
    expected = {"GitRepository flux-system/flux-system", "Kustomization flux-system/flux-system",
                "Kustomization flux-system/infrastructure", "Kustomization flux-system/apps",
                "HelmRepository flux-system/ingress-nginx", "HelmRepository flux-system/podinfo",
                "HelmRelease ingress-nginx/ingress-nginx", "HelmRelease podinfo/podinfo"}
    assert expected <= set(rows), table
    assert all(rows[name][0] == "Ready" and rows[name][1].endswith("s") for name in expected), table
    assert rows["Kustomization flux-system/apps"][2:4] == ["Kustomization", "flux-system/infrastructure"]
    assert f"✔ {len(expected)} objects Ready in " in done.stdout
    assert "Secret flux-system/flux-system: empty" in done.stdout  # the bootstrap's deploy key, not needed here
    assert "Secret flux-system/sops-age: the --decrypt keys" in done.stdout
    assert "s3cret-of-the-test" not in done.stdout + done.stderr
    # the live view: one line per change, what an object waits for named (dependsOn)
    assert re.search(r"Kustomization flux-system/apps {2}Waiting {2}DependencyNotReady: .*"
                     r"\(after Kustomization flux-system/infrastructure\)", done.stderr), done.stderr
    order = re.findall(r"^ *[\d.]+s ✔ (\S+ \S+)  Ready", done.stderr, re.M)
    assert order.index("Kustomization flux-system/infrastructure") < order.index("Kustomization flux-system/apps")


def test_a_broken_overlay_fails_naming_its_file_and_why(tmp_path: Path,
                                                         charts: tuple[ChartRepo, dict[str, str]]) -> None:
    """apps/dev names a file that does not exist: exit 1, the report (-o json) names the Kustomization, the file
    and the reason; what does not depend on it is Ready. The repository is given as a URL, at a ref; --keep and
    --ui leave the sandbox, the operator and the web UI running until the stop script it prints is run."""
    repo, versions = charts
    bare = bare_repository(tmp_path, flux_layout(versions, broken=True))
    done = helmop_try(bare.as_uri(), "--ref", "main", "-o", "json", "--timeout", "150s", "--keep", "--ui",
                      *mirrors(repo, list(versions)))
    report = _json(done)
    kept = report.get("kept") or {}
    try:
        assert done.returncode == 1, (done.stdout[-3000:], done.stderr[-5000:])
        listed = subprocess.run([tool("kubectl"), "--kubeconfig", kept["kubeconfig"], "get",
                                 "helmreleases.helm.toolkit.fluxcd.io", "-A", "-o", "name"],
                                capture_output=True, text=True, timeout=60)
        assert listed.stdout.split() == ["helmrelease.helm.toolkit.fluxcd.io/ingress-nginx"], listed
        with urllib.request.urlopen(report["ui"], timeout=30) as page:
            assert page.status == 200
    finally:
        if kept.get("stop"):
            subprocess.run([kept["stop"]], timeout=60, check=True)
    assert not Path(kept["kubeconfig"]).parent.exists()  # stopped (it waits for the processes) and removed
    assert set(report) == {"source", "commit", "path", "fluxApi", "converged", "verdict", "seconds", "objects",
                           "failures", "endedEarly", "made", "leftOut", "lockdown", "kept", "ui"}
    assert set(kept) == {"kubeconfig", "log", "logFile", "stop"}
    assert report["converged"] is False and report["verdict"] == "stuck" and report["fluxApi"] is True
    assert report["endedEarly"] is None and report["leftOut"] == []  # Stalled: nothing to wait for
    assert report["path"] == "clusters/dev" and report["source"].startswith(bare.as_uri())
    [failure] = report["failures"]
    assert failure["object"] == "Kustomization flux-system/apps" and failure["state"] == "Stalled"
    assert failure["reason"] == "PathNotFound"
    assert "apps/dev/kustomization.yaml" in failure["message"] and "apps/dev/missing.yaml" in failure["message"]
    objects = {f"{o['kind']} {o['namespace']}/{o['name']}": o for o in report["objects"]}
    assert set(objects["HelmRelease ingress-nginx/ingress-nginx"]) == {
        "kind", "group", "namespace", "name", "state", "ready", "reason", "message", "readyAfter", "dependsOn",
        "appliedBy"}
    ready = objects["HelmRelease ingress-nginx/ingress-nginx"]
    assert ready["ready"] is True and ready["group"] == "helm.toolkit.fluxcd.io" and ready["readyAfter"] > 0
    assert ready["appliedBy"] == "Kustomization flux-system/infrastructure"
    assert objects["Kustomization flux-system/apps"]["dependsOn"] == ["Kustomization flux-system/infrastructure"]
    assert objects["Kustomization flux-system/apps"]["readyAfter"] is None
    assert "HelmRelease podinfo/podinfo" not in objects  # the broken overlay applied nothing


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_the_ui_of_a_try_leads_with_the_failing_release(tmp_path: Path,
                                                        charts: tuple[ChartRepo, dict[str, str]]) -> None:
    """Issue 63's acceptance: a Flux repository whose podinfo asks for a chart version that does not exist, tried
    with --ui --keep; in chromium, the overview's first row is that release with its reason, and the kinds shown
    are the Flux kinds that hold the repository's objects (helmop's own, all empty, folded)."""
    repo, versions = charts
    bare = bare_repository(tmp_path, flux_layout({**versions, "podinfo": "9.9.9"}))
    done = helmop_try(str(bare), "-o", "json", "--timeout", "150s", "--patience", "20s", "--keep", "--ui",
                      *mirrors(repo, list(versions)))
    report = _json(done)
    kept = report.get("kept") or {}
    try:
        [failure] = report["failures"]
        assert failure["object"] == "HelmRelease podinfo/podinfo", report["failures"]
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            page = browser.new_page()
            page.goto(report["ui"])
            first = "table.attention tbody tr:first-child"
            assert (page.get_attribute(first, "data-kind"), page.get_attribute(first, "data-name")) == (
                "helmreleases.helm.toolkit.fluxcd.io", "podinfo")
            assert page.inner_text(f"{first} td.object") == "podinfo/podinfo"
            assert page.inner_text(f"{first} td.reason") == failure["reason"]
            held = page.eval_on_selector_all("table.counts tr[data-kind]", "rows => rows.map(r => r.dataset.kind)")
            assert held and all(kind.endswith(".toolkit.fluxcd.io") for kind in held), held
            folded = page.eval_on_selector_all("a[data-empty-kind]", "links => links.map(a => a.dataset.emptyKind)")
            assert {"helmreleases", "configsyncs", "jenkins"} <= set(folded), folded
            browser.close()
    finally:
        if kept.get("stop"):
            subprocess.run([kept["stop"]], timeout=60, check=True)


def test_the_corpus_charts_install_from_a_flux_repository(tmp_path: Path) -> None:
    """With $HELMOP_CHART_CORPUS: ingress-nginx (its admission webhook answered by the sandbox) and sealed-secrets
    (its CRD) from the corpus, and a podinfo-like chart, all Ready (-o json)."""
    if CORPUS is None:
        pytest.skip("HELMOP_CHART_CORPUS is not set: no public-chart corpus to run against")
    subprocess.run([tool("helm"), "create", str(tmp_path / "src")], check=True, capture_output=True)
    repo = ChartRepo(tmp_path, tmp_path / "src", tool("helm"))
    try:
        repo.publish("podinfo", "6.0.0")
        versions = {"podinfo": "6.0.0"}
        for name in ("ingress-nginx", "sealed-secrets"):
            [archive] = sorted(CORPUS.glob(f"{name}-[0-9]*.tgz"))[-1:]
            repo.add_archive(archive)
            versions[name] = chart_version(archive)
        (tmp_path / "r").mkdir()
        bare = bare_repository(tmp_path / "r", flux_layout(versions))
        done = helmop_try(str(bare), "-o", "json", "--timeout", "200s", *mirrors(repo, list(versions)), timeout=300)
    finally:
        repo.close()
    report = _json(done)
    assert done.returncode == 0 and report["converged"] and not report["failures"], report["failures"]
    releases = {o["name"]: o for o in report["objects"] if o["kind"] == "HelmRelease"}
    assert set(releases) == {"ingress-nginx", "sealed-secrets", "podinfo"}
    assert all(o["state"] == "Ready" for o in report["objects"]), report["objects"]
    assert "ingress-nginx@" + versions["ingress-nginx"] in releases["ingress-nginx"]["message"]


# What needs no sandbox: the revision served, the cluster folder found, the plan, the states, the errors.

def _work_tree(where: Path, files: dict[str, str]) -> Path:
    subprocess.run(["git", "init", "-q", "-b", "main", str(where)], check=True)
    for name, text in files.items():
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(text)
    subprocess.run(["git", "-C", str(where), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(where), "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q",
                    "-m", "one"], check=True)
    return where


def _state(repo: Path) -> tuple[str, str, str]:
    """What the user's repository holds: HEAD, the status, every object (nothing may be added by try)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout
    return git("rev-parse", "HEAD"), git("status", "--porcelain"), git("count-objects", "-v")


def test_a_working_tree_is_tried_as_it_is_without_writing_to_it(tmp_path: Path) -> None:
    repo = _work_tree(tmp_path / "fleet", {"apps/a.yaml": "a: 1\n", ".gitignore": "secret.yaml\n"})
    subprocess.run(["git", "-C", str(repo), "remote", "add", "origin", "git@github.com:Example/fleet.git"], check=True)
    first = _state(repo)[0].strip()
    (repo / "apps" / "a.yaml").write_text("a: 2\n")  # changed, not committed
    (repo / "apps" / "b.yaml").write_text("b: 1\n")  # untracked
    (repo / "secret.yaml").write_text("ignored\n")
    before = _state(repo)
    served = repository.prepare(str(repo / "apps"), None, tmp_path / "run")
    assert _state(repo) == before
    assert (served.tree / "apps" / "a.yaml").read_text() == "a: 2\n" and (served.tree / "apps" / "b.yaml").exists()
    assert not (served.tree / "secret.yaml").exists()
    assert served.commit != first and "with uncommitted changes" in served.label and served.subfolder == "apps"
    assert served.identities == {repository.identity(str(repo)), "github.com/Example/fleet"}
    assert served.name == "fleet"
    parent = subprocess.run(["git", "-C", str(served.repository), "rev-parse", f"{served.commit}^"],
                            capture_output=True, text=True, check=True).stdout.strip()
    assert parent == first  # on top of HEAD: the history is there (a GitRepository's ref.commit of it resolves)

    at_ref = repository.prepare(str(repo), "HEAD", tmp_path / "ref")
    assert at_ref.commit == first and (at_ref.tree / "apps" / "a.yaml").read_text() == "a: 1\n"
    clean = repository.prepare(str(_work_tree(tmp_path / "clean", {"x.yaml": "x: 1\n"})), None, tmp_path / "clean-run")
    assert clean.commit == _state(tmp_path / "clean")[0].strip()  # nothing uncommitted: the commit itself


def test_a_plain_folder_and_the_errors(tmp_path: Path) -> None:
    (tmp_path / "plain" / "apps").mkdir(parents=True)
    (tmp_path / "plain" / "apps" / "a.yaml").write_text("a: 1\n")
    served = repository.prepare(str(tmp_path / "plain"), None, tmp_path / "run")
    assert (served.tree / "apps" / "a.yaml").read_text() == "a: 1\n" and "outside git" in served.label
    with pytest.raises(Failed, match="--ref needs one"):
        repository.prepare(str(tmp_path / "plain"), "main", tmp_path / "run2")
    with pytest.raises(Failed, match="no such folder"):
        repository.prepare(str(tmp_path / "nowhere"), None, tmp_path / "run3")
    with pytest.raises(Failed, match="is not a commit"):
        repository.prepare(str(_work_tree(tmp_path / "r", {"a.yaml": "a: 1\n"})), "no-such-branch", tmp_path / "run4")
    served = repository.prepare(str(tmp_path / "r"), None, tmp_path / "run5")
    repository.publish(served, {"production"}, {"v1.0.0"}, {"refs/pull/7/head"})
    refs = subprocess.run(["git", "-C", str(served.repository), "for-each-ref", "--format=%(refname) %(objectname)"],
                          capture_output=True, text=True, check=True).stdout.split("\n")
    assert {f"{name} {served.commit}" for name in ("refs/heads/main", "refs/heads/master", "refs/heads/production",
                                                   "refs/tags/v1.0.0", "refs/pull/7/head")} <= set(refs)


def test_urls_name_one_repository_whatever_their_form() -> None:
    same = ["https://github.com/org/fleet", "https://github.com/org/fleet.git", "ssh://git@github.com/org/fleet",
            "ssh://git@GitHub.com:22/org/fleet.git/", "git@github.com:org/fleet.git", "http://user@github.com/org/fleet"]
    assert {repository.identity(url) for url in same} == {"github.com/org/fleet"}
    assert repository.identity("https://github.com/org/fleet-infra") != "github.com/org/fleet"
    assert repository.identity("file:///srv/git/fleet.git") == repository.identity("/srv/git/fleet")
    assert repository.is_url("git@github.com:org/fleet") and not repository.is_url("./fleet")


def _tree(where: Path, files: dict[str, str]) -> list[Any]:
    for name, text in files.items():
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(text)
    return plan.tree_objects(where)


def test_the_cluster_folder_is_found_as_flux_bootstrap_lays_it_out(tmp_path: Path) -> None:
    layout = flux_layout({"ingress-nginx": "1.0.0", "podinfo": "1.0.0"})
    found = _tree(tmp_path / "a", {**layout, "clusters/prod/apps.yaml": layout["clusters/dev/apps.yaml"]})
    assert plan.cluster_folder(found, tmp_path / "a", None, "") == "clusters/dev"  # the folder flux-system applies
    assert plan.cluster_folder(found, tmp_path / "a", None, "clusters/prod") == "clusters/prod"  # the one given
    assert plan.cluster_folder(found, tmp_path / "a", "./clusters/prod/", "") == "clusters/prod"
    with pytest.raises(Failed, match="no such folder"):
        plan.cluster_folder(found, tmp_path / "a", "clusters/staging", "")
    found = _tree(tmp_path / "b", {"clusters/dev/apps.yaml": "{}\n", "clusters/prod/apps.yaml": "{}\n"})
    with pytest.raises(Failed, match="several cluster folders: clusters/dev, clusters/prod; choose one with --path"):
        plan.cluster_folder(found, tmp_path / "b", None, "")
    found = _tree(tmp_path / "c", {"releases/web.yaml": "{}\n"})
    assert plan.cluster_folder(found, tmp_path / "c", None, "") == ""  # the root
    assert plan.cluster_folder(found, tmp_path / "c", None, "releases") == "releases"  # the folder given


def test_the_plan_serves_the_repository_where_its_git_repositories_name_it(tmp_path: Path) -> None:
    layout = flux_layout({"ingress-nginx": "1.0.0", "podinfo": "1.0.0"})
    other = {"apiVersion": SOURCE, "kind": "GitRepository", "metadata": {"name": "charts", "namespace": "apps"},
             "spec": {"url": "https://github.com/example/charts", "ref": {"tag": "v1"}}}
    same = {**other, "metadata": {"name": "by-url", "namespace": "apps"},
            "spec": {"url": "https://github.com/example/fleet.git", "ref": {"tag": "v2"}}}
    sync = {"apiVersion": "helmop.dev/v1alpha1", "kind": "ConfigSync", "metadata": {"name": "web", "namespace": "web"},
            "spec": {"sourceRef": {"name": "undeclared"}, "path": "apps",
                     "decryption": {"secretRef": {"name": "sops"}}}}
    found = _tree(tmp_path, {**layout, "infrastructure/more.yaml": yaml.safe_dump_all([other, same]),
                             "clusters/dev/web.yaml": yaml.safe_dump(sync)})
    served = repository.Served(tmp_path / "served.git", "0" * 40, tmp_path, "t",
                               frozenset({"github.com/example/fleet"}), "fleet")
    applied = [item for item in found if plan.file_of(item).startswith("clusters/dev/")]
    planned = plan.plan(served, found, "clusters/dev", applied, {"0.agekey": b"AGE-SECRET-KEY-1X"})
    assert planned.flux and planned.branches == {"main"} and planned.tags == {"v2"}
    assert planned.git_mirrors == [(ORIGIN, served.url), ("https://github.com/example/fleet.git", served.url)]
    made = {(m.kind, m.obj["metadata"]["namespace"], m.name): m.obj for m in planned.applied
            if m.origin.startswith("(")}
    assert set(made) == {("Secret", "flux-system", "flux-system"), ("GitRepository", "web", "undeclared"),
                         ("Secret", "web", "sops")}
    assert made[("GitRepository", "web", "undeclared")]["apiVersion"] == "helmop.dev/v1alpha1"
    assert made[("GitRepository", "web", "undeclared")]["spec"]["url"] == served.url
    assert made[("Secret", "web", "sops")]["data"] == {"0.agekey": "QUdFLVNFQ1JFVC1LRVktMVg="}
    assert all(obj["metadata"]["labels"] == plan.MADE for obj in made.values()) and len(planned.made) == 3


def _obj(kind: str, name: str, *conditions: dict[str, Any], generation: int = 1, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": KUSTOMIZE if kind == "Kustomization" else SOURCE, "kind": kind,
            "metadata": {"name": name, "namespace": "flux-system", "generation": generation}, "spec": spec,
            "status": {"conditions": [{"observedGeneration": 1, **c} for c in conditions]}}


def test_states_from_conditions_and_what_is_stuck() -> None:
    ready = {"type": "Ready", "status": "True", "reason": "Succeeded", "message": "ok"}
    failing = {"type": "Ready", "status": "False", "reason": "BuildFailed", "message": "x.yaml: broken"}
    assert states.observe(_obj("GitRepository", "a", ready))[0] == "Ready"
    assert states.observe(_obj("GitRepository", "a", ready, generation=2))[0] == "Progressing"  # not seen yet
    assert states.observe(_obj("Kustomization", "a", failing))[0] == "Failed"  # tried again
    stalled = _obj("Kustomization", "a", failing, {"type": "Stalled", "status": "True", "reason": "BuildFailed",
                                                    "message": "x.yaml: broken"})
    assert states.observe(stalled) == ("Stalled", "BuildFailed", "x.yaml: broken")
    assert states.observe(_obj("Kustomization", "a", failing, suspend=True))[0] == "Suspended"
    waiting = {"type": "Ready", "status": "False", "reason": "DependencyNotReady", "message": "infra"}
    apps = _obj("Kustomization", "apps", waiting, dependsOn=[{"name": "infra"}], sourceRef={
        "kind": "GitRepository", "name": "flux-system"})
    after, needs = states.waits_for(apps)
    infra_key = states.key("Kustomization", "kustomize.toolkit.fluxcd.io", "flux-system", "infra")
    assert after == (infra_key,) and needs == (infra_key, states.key(
        "GitRepository", "source.toolkit.fluxcd.io", "flux-system", "flux-system"))
    table = {}
    for obj in (stalled | {"metadata": {"name": "infra", "namespace": "flux-system", "generation": 1}}, apps):
        meta = obj["metadata"]
        item = states.Tracked(obj["kind"], obj["apiVersion"].rpartition("/")[0], meta["namespace"], meta["name"])
        item.state, item.reason, item.message = states.observe(obj)
        item.after, item.needs = states.waits_for(obj)
        table[item.key] = item
    assert states.verdict(table) == ""  # apps waits
    states.block(table)
    assert table[after[0]].state == "Stalled" and [i.state for i in states.ordered(table)] == ["Stalled", "Blocked"]
    assert states.verdict(table) == "stuck"


def test_the_report_of_a_converged_try() -> None:
    item = states.Tracked("HelmRelease", "helm.toolkit.fluxcd.io", "web", "web", "Ready", "InstallSucceeded", "ok",
                          ready_after=3.25)
    result = Result("fleet@main (abc)", "a" * 40, "clusters/dev", True, "converged", 12.0, {item.key: item},
                    ui="http://127.0.0.1:9/")
    report = json.loads(as_json(result))
    assert report["converged"] and report["failures"] == [] and report["ui"] == "http://127.0.0.1:9/"
    assert report["objects"] == [{"kind": "HelmRelease", "group": "helm.toolkit.fluxcd.io", "namespace": "web",
                                  "name": "web", "state": "Ready", "ready": True, "reason": "InstallSucceeded",
                                  "message": "ok", "readyAfter": 3.25, "dependsOn": [], "appliedBy": None}]
    assert "HelmRelease web/web  Ready  3.2s" in " ".join(as_table(result).split("   "))
    assert "✔ 1 objects Ready in 12.0s (fleet@main (abc), clusters/dev)" in as_table(result)


def test_a_cluster_folder_that_does_not_build_fails_before_anything_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PATH", f"{TOOLS}{os.pathsep}{os.environ.get('PATH', '')}")
    files = {"clusters/dev/kustomization.yaml": "resources: [apps.yaml, gone.yaml]\n",
             "clusters/dev/apps.yaml": yaml.safe_dump(_kustomization("apps", "./apps"))}
    assert main(["try", str(_work_tree(tmp_path / "fleet", files)), "-o", "json"]) == 1
    out, err = capsys.readouterr()
    [failure] = json.loads(out)["failures"]
    assert failure["object"] == "clusters/dev (the cluster folder)" and failure["reason"] == "BuildFailed"
    assert "clusters/dev/kustomization.yaml" in failure["message"] and "gone.yaml" in failure["message"]
    assert "sandbox" not in err  # nothing was started
    for args, error in ((["nowhere"], "nowhere: no such folder"),
                        ([str(tmp_path / "fleet"), "--path", "elsewhere"], "--path elsewhere: no such folder"),
                        ([str(tmp_path / "fleet"), "--chart-mirror", "nothing"], "--chart-mirror takes FROM=TO")):
        assert main(["try", *args]) == 2
        assert capsys.readouterr().err.splitlines()[-1].startswith(f"✗ {error}"), args
