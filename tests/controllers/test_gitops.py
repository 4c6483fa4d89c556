"""GitOps end to end: git push to real repositories over loopback HTTP -> webhook or interval ->
GitRepository -> ConfigSync / HelmRelease -> real helm -> the sandbox."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import requests
import yaml

from tests.controllers.conftest import (
    GITREPO,
    ChartRepo,
    Operator,
    condition,
    events,
    eventually,
    get,
    helmop,
    settled,
    watched,
)
from tests.githubapi import APP_ID, OWNER, GitHubAPI
from tests.gitserver import GitServer, Repo
from tests.tools import Run, tool

TOKEN = "webhook-token-123"


def gitrepo(name: str, url: str, **spec: Any) -> str:
    return yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "GitRepository", "metadata": {"name": name},
                           "spec": {k: v for k, v in {"url": url, "interval": "1h", "ref": {"branch": "main"},
                                                      "webhook": {"secretRef": {"name": "hook"}}, **spec}.items()
                                    if v is not None}})


def configsync(name: str, source: str, path: str) -> str:
    return yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "ConfigSync", "metadata": {"name": name},
                           "spec": {"sourceRef": {"kind": "GitRepository", "name": source}, "path": path,
                                    "interval": "1h"}})


def release(name: str, repo_url: str, replicas: int) -> str:
    return yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease", "metadata": {"name": name},
                           "spec": {"interval": "1h", "chart": {"repository": {"url": repo_url, "name": "demo",
                                                                               "version": "0.1.0"}},
                                    "values": {"fullnameOverride": name, "replicaCount": replicas}}})


def push_hook(operator: Operator, ns: str, name: str, body: bytes = b'{"ref":"refs/heads/main"}',
              token: str = TOKEN, style: str = "github") -> requests.Response:
    signature = "sha256=" + hmac.new(token.encode(), body, hashlib.sha256).hexdigest()
    headers = {"github": {"X-Hub-Signature-256": signature, "X-GitHub-Event": "push"},
               "gitlab": {"X-Gitlab-Token": token}, "generic": {"X-Signature": signature}}[style]
    return requests.post(f"{operator.webhook_url}/hooks/{ns}/{name}", data=body, headers=headers, timeout=10)


def revision(kube: Run, ns: str, name: str) -> str:
    return str(((get(kube, ns, GITREPO, name).get("status") or {}).get("artifact") or {}).get("revision", ""))


def setup_source(kube: Run, ns: str, repo: Repo, **spec: Any) -> None:
    kube("kubectl", "-n", ns, "create", "secret", "generic", "hook", f"--from-literal=token={TOKEN}")
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=gitrepo("config", repo.url, **spec))


def test_config_repo_push_install_upgrade_delete(operator: Operator, kube: Run, ns: str, repo: Repo,
                                                 chart_repo: ChartRepo) -> None:
    first = repo.commit({"apps/namespace-note.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: note}\n"
                                                     "data: {hello: world}\n"})
    setup_source(kube, ns, repo)
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=configsync("apps", "config", "apps"))
    eventually(lambda: revision(kube, ns, "config") == f"main@sha1:{first}")
    watched(kube, ns, "csync", "apps", lambda obj: condition(obj).get("status") == "True")
    assert get(kube, ns, "cm", "note")["data"] == {"hello": "world"}
    assert get(kube, ns, "cm", "note")["metadata"]["labels"]["helmop.dev/configsync"] == f"{ns}.apps"

    # A push adding a HelmRelease, announced by the webhook: the release gets installed.
    second = repo.commit({"apps/web.yaml": release("web", chart_repo.url, 1)})
    started = time.monotonic()
    assert push_hook(operator, ns, "config").status_code == 202
    eventually(lambda: revision(kube, ns, "config") == f"main@sha1:{second}", timeout=5)
    assert time.monotonic() - started < 3
    watched(kube, ns, "hr", "web", lambda obj: condition(obj).get("status") == "True")
    assert get(kube, ns, "deploy", "web")["spec"]["replicas"] == 1
    inventory = get(kube, ns, "csync", "apps")["status"]["inventory"]
    assert {(i["kind"], i["name"]) for i in inventory} == {("ConfigMap", "note"), ("HelmRelease", "web")}

    # A values change pushed: an upgrade.
    repo.commit({"apps/web.yaml": release("web", chart_repo.url, 3)})
    assert push_hook(operator, ns, "config", style="gitlab").status_code == 202
    watched(kube, ns, "deploy", "web", lambda obj: obj.get("spec", {}).get("replicas") == 3)
    watched(kube, ns, "hr", "web", lambda obj: obj["status"]["history"][0]["revision"] == 2)

    # The file deleted: pruned, so the release is uninstalled; the ConfigMap stays.
    repo.commit({"apps/web.yaml": None})
    assert push_hook(operator, ns, "config", style="generic").status_code == 202
    watched(kube, ns, "hr", "web", lambda obj: not obj)
    eventually(lambda: "web" not in kube("helm", "list", "-n", ns, "-q").stdout.split())
    assert not get(kube, ns, "deploy", "web") and get(kube, ns, "cm", "note")
    # what was pruned is said in the Event of that sync (a later sync at the same revision prunes nothing)
    said = f"1 object(s), pruned 1 (HelmRelease/{ns}/web)"
    assert eventually(lambda: [e["type"] for e in events(kube, ns, "apps") if said in e["message"]]) == ["Normal"]


def test_chart_from_git_upgrades_only_when_the_chart_changes(operator: Operator, kube: Run, ns: str, repo: Repo,
                                                            chart_repo: ChartRepo, tmp_path: Path) -> None:
    chart_dir = tmp_path / "chart"
    subprocess.run([tool("helm"), "create", str(chart_dir)], check=True, capture_output=True)
    files = {f"charts/app/{p.relative_to(chart_dir)}": p.read_text() for p in chart_dir.rglob("*") if p.is_file()}
    files["charts/app/values-prod.yaml"] = "replicaCount: 2\n"
    repo.commit(files)
    setup_source(kube, ns, repo)
    body = {"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease", "metadata": {"name": "gitapp"},
            "spec": {"interval": "1h", "chart": {"sourceRef": {"kind": "GitRepository", "name": "config"},
                                                 "path": "charts/app",
                                                 "valuesFiles": ["charts/app/values-prod.yaml"]},
                     "values": {"fullnameOverride": "gitapp"}}}
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump(body))
    obj = eventually(lambda: (o := get(kube, ns, "hr", "gitapp")) and condition(o).get("status") == "True" and o)
    assert get(kube, ns, "deploy", "gitapp")["spec"]["replicas"] == 2

    # A push that does not touch the chart: the revision moves, no helm process runs.
    before = len(operator.helm_actions())
    unrelated = repo.commit({"docs/README.md": "nothing to see"})
    push_hook(operator, ns, "config")
    eventually(lambda: revision(kube, ns, "config").endswith(unrelated))
    settled(kube, ns, "hr", "gitapp")
    assert len(operator.helm_actions()) == before
    assert get(kube, ns, "hr", "gitapp")["status"]["history"][0]["revision"] == 1

    # Editing a template: an upgrade that changes the objects.
    template = files["charts/app/templates/service.yaml"].replace("name: http", "name: web-http")
    repo.commit({"charts/app/templates/service.yaml": template})
    push_hook(operator, ns, "config")
    watched(kube, ns, "svc", "gitapp", lambda obj: obj.get("spec", {}).get("ports", [{}])[0].get("name")
               == "web-http")
    watched(kube, ns, "hr", "gitapp", lambda obj: obj["status"]["history"][0]["revision"] == 2)
    assert obj["status"]["lastAppliedRevision"] == "0.1.0"
    shutil.rmtree(chart_dir)


def test_refs_tag_semver_commit_and_force_push(operator: Operator, kube: Run, ns: str, repo: Repo) -> None:
    first = repo.commit({"a.txt": "1"})
    repo.tag("v1.0.0")
    second = repo.commit({"a.txt": "2"})
    repo.tag("v1.1.0")
    setup_source(kube, ns, repo)
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=gitrepo("bytag", repo.url, ref={"tag": "v1.0.0"}))
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=gitrepo("bysemver", repo.url, ref={"semver": "~1.0 || ^1.1"}))
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=gitrepo("bycommit", repo.url, ref={"commit": first}))
    repo.git("push", "-q", "origin", f"{first}:refs/pull/7/head")
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=gitrepo("byname", repo.url, ref={
        "branch": "main", "name": "refs/pull/7/head"}))  # the name wins, as Flux's precedence says
    eventually(lambda: revision(kube, ns, "bytag") == f"v1.0.0@sha1:{first}")
    eventually(lambda: revision(kube, ns, "bysemver") == f"v1.1.0@sha1:{second}")
    eventually(lambda: revision(kube, ns, "bycommit") == f"sha1:{first}")
    eventually(lambda: revision(kube, ns, "byname") == f"refs/pull/7/head@sha1:{first}")
    eventually(lambda: revision(kube, ns, "config") == f"main@sha1:{second}")
    repo.git("reset", "-q", "--hard", first)
    rewritten = repo.commit({"b.txt": "x"}, "rewritten history")
    push_hook(operator, ns, "config")
    eventually(lambda: revision(kube, ns, "config") == f"main@sha1:{rewritten}")


def test_source_failures_are_reported_and_recover(operator: Operator, kube: Run, ns: str, repo: Repo,
                                                  tmp_path: Path) -> None:
    good = repo.commit({"apps/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: keep}\ndata: {a: b}\n"})
    kube("kubectl", "-n", ns, "create", "secret", "generic", "hook", f"--from-literal=token={TOKEN}")
    # unreachable server
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=gitrepo("down", "http://127.0.0.1:9/none.git"))
    watched(kube, ns, GITREPO, "down", lambda obj: condition(obj).get("reason") == "RepositoryUnreachable")
    # a URL helmop refuses outright
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=gitrepo("evil", "ext::sh -c touch% /tmp/pwned"))
    watched(kube, ns, GITREPO, "evil", lambda obj: condition(obj).get("reason") == "InvalidURL")
    assert not Path("/tmp/pwned").exists()
    # a missing ref, then fixed
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=gitrepo("config", repo.url, ref={"branch": "nope"}))
    watched(kube, ns, GITREPO, "config", lambda obj: condition(obj).get("reason") == "RefNotFound")
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=gitrepo("config", repo.url))
    eventually(lambda: revision(kube, ns, "config") == f"main@sha1:{good}")
    # a missing path
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=configsync("sync", "config", "nowhere"))
    watched(kube, ns, "csync", "sync", lambda obj: condition(obj).get("reason") == "PathNotFound")
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=configsync("sync", "config", "apps"))
    watched(kube, ns, "csync", "sync", lambda obj: condition(obj).get("status") == "True")
    assert get(kube, ns, "cm", "keep")
    # malformed YAML: nothing is applied or pruned, and the message names the file and line
    repo.commit({"apps/broken.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x\n",
                 "apps/cm.yaml": None})
    push_hook(operator, ns, "config")
    obj = eventually(lambda: (o := get(kube, ns, "csync", "sync")) and condition(o).get("reason")
                     == "ManifestInvalid" and o)
    assert "apps/broken.yaml:" in condition(obj)["message"]
    assert get(kube, ns, "cm", "keep")  # not pruned while the repository is broken
    fixed = repo.commit({"apps/broken.yaml": None, "apps/cm.yaml": "apiVersion: v1\nkind: ConfigMap\n"
                                                                  "metadata: {name: keep}\ndata: {a: c}\n"})
    push_hook(operator, ns, "config")
    watched(kube, ns, "csync", "sync", lambda obj: obj["status"].get("lastAppliedRevision") == f"main@sha1:{fixed}")
    assert get(kube, ns, "cm", "keep")["data"] == {"a": "c"}


def test_what_left_git_during_a_failed_apply_is_pruned_by_the_next_sync(operator: Operator, kube: Run, ns: str,
                                                                        repo: Repo) -> None:
    """A sync whose apply fails prunes nothing, and keeps what left git in its inventory: the next sync that
    applies in full prunes it (forgetting it would leave it in the cluster for good)."""
    cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {}}}\n"
    repo.commit({"apps/a.yaml": cm.format("a"), "apps/gone.yaml": cm.format("gone")})
    setup_source(kube, ns, repo)
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=configsync("apps", "config", "apps"))
    watched(kube, ns, "csync", "apps", lambda obj: condition(obj).get("status") == "True")
    assert get(kube, ns, "cm", "gone")
    repo.commit({"apps/gone.yaml": None, "apps/bad.yaml": "apiVersion: example.com/v1\nkind: Nothing\n"
                                                          "metadata: {name: x}\n"})
    push_hook(operator, ns, "config")
    watched(kube, ns, "csync", "apps", lambda obj: condition(obj).get("reason") == "ApplyFailed")
    assert get(kube, ns, "cm", "gone"), "pruned although the apply failed"
    assert "gone" in {x["name"] for x in get(kube, ns, "csync", "apps")["status"]["inventory"]}
    fixed = repo.commit({"apps/bad.yaml": None})
    push_hook(operator, ns, "config")
    watched(kube, ns, "csync", "apps", lambda obj: obj["status"].get("lastAppliedRevision") == f"main@sha1:{fixed}")
    watched(kube, ns, "cm", "gone", lambda obj: not obj)


def test_bad_credentials(operator: Operator, kube: Run, ns: str, tmp_path: Path) -> None:
    (tmp_path / "srv").mkdir()
    server = GitServer(tmp_path / "srv", credentials=("robot", "right-pass"))
    try:
        private = Repo(server, "private", tmp_path / "work")
        sha = private.commit({"a": "1"})
        kube("kubectl", "-n", ns, "create", "secret", "generic", "hook", f"--from-literal=token={TOKEN}")
        kube("kubectl", "-n", ns, "create", "secret", "generic", "creds", "--from-literal=username=robot",
             "--from-literal=password=wrong-pass")
        kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=gitrepo("priv", private.url, secretRef={"name": "creds"}))
        obj = eventually(lambda: (o := get(kube, ns, GITREPO, "priv")) and condition(o).get("reason")
                         == "AuthenticationFailed" and o)
        assert "wrong-pass" not in json.dumps(obj)
        assert condition(obj)["message"].startswith(f"authentication failed for {private.url}")
        kube("kubectl", "-n", ns, "delete", "secret", "creds")
        kube("kubectl", "-n", ns, "create", "secret", "generic", "creds", "--from-literal=username=robot",
             "--from-literal=password=right-pass")
        eventually(lambda: revision(kube, ns, "priv") == f"main@sha1:{sha}")
    finally:
        server.close()


def test_webhook_authentication(operator: Operator, kube: Run, ns: str, repo: Repo) -> None:
    repo.commit({"a": "1"})
    setup_source(kube, ns, repo)
    eventually(lambda: revision(kube, ns, "config"))
    # A bad signature, no signature, an unknown repository and one without a webhook: one answer for all,
    # so repositories cannot be enumerated without a token.
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=gitrepo("plain", repo.url, webhook=None))
    refused = [push_hook(operator, ns, "config", token="wrong"),
               requests.post(f"{operator.webhook_url}/hooks/{ns}/config", data=b"{}", timeout=10),
               push_hook(operator, ns, "missing"), push_hook(operator, ns, "plain")]
    assert [(r.status_code, r.text) for r in refused] == [(401, refused[0].text)] * 4
    # `helmop reconcile` on the source kinds waits for their status to say the request was handled
    from tests.controllers.test_cli import helmop

    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=configsync("sync", "config", ""))
    for kind, name in ((GITREPO, "config"), ("csync", "sync")):
        done = helmop(operator, "reconcile", kind, name, "-n", ns, "--timeout", "60")
        assert done.returncode == 0 and "✔" in done.stdout, (kind, done.stdout, done.stderr)
    status = get(kube, ns, GITREPO, "config")["status"]
    assert status["webhookPath"] == f"/hooks/{ns}/config"


def test_git_fetch_metrics(operator: Operator, kube: Run, ns: str, repo: Repo) -> None:
    repo.commit({"a": "1"})
    setup_source(kube, ns, repo)
    eventually(lambda: revision(kube, ns, "config"))
    text = requests.get(f"{operator.metrics_url}/metrics", timeout=5).text
    assert 'helmop_git_fetch_duration_seconds_count{result="success"}' in text
    assert f'helmop_resource_ready{{kind="GitRepository",name="config",namespace="{ns}"}}' in text


def test_tree_trace_and_events_follow_a_config_repository(operator: Operator, kube: Run, ns: str, repo: Repo,
                                                          chart_repo: ChartRepo) -> None:
    # A ConfigSync whose source has no revision yet waits: a Normal Event, not a Warning.
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=configsync("apps", "config", "apps"))
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=gitrepo("config", repo.url, suspend=True, webhook=None))
    watched(kube, ns, "csync", "apps", lambda obj: condition(obj).get("reason") == "SourceNotReady")
    waits = eventually(lambda: [e["type"] for e in events(kube, ns, "apps") if e["reason"] == "SourceNotReady"])
    assert waits == ["Normal"], waits  # (the Event follows the status)
    commit = repo.commit({"apps/web.yaml": release("web", chart_repo.url, 1)})
    kube("kubectl", "-n", ns, "patch", GITREPO, "config", "--type=merge", "-p", '{"spec":{"suspend":false}}')
    watched(kube, ns, "hr", "web", lambda obj: condition(obj).get("status") == "True")

    tree = helmop(operator, "tree", "gitrepo", "config", "-n", ns)
    assert tree.returncode == 0, tree.stderr
    titles = [re.sub(r"^[│├└─ ]+", "", line).split("  ")[0] for line in tree.stdout.splitlines()]
    assert titles[:3] == [f"GitRepository/{ns}/config", f"ConfigSync/{ns}/apps", f"HelmRelease/{ns}/web"]
    assert f"Deployment/{ns}/web" in titles[3:] and f"Service/{ns}/web" in titles[3:], tree.stdout
    trace = helmop(operator, "trace", "deploy", "web", "-n", ns)
    assert trace.returncode == 0, trace.stderr
    blocks = [dict(line.split(":", 1) for line in block.splitlines()) for block in trace.stdout.split("\n---\n")]
    assert [next(iter(b)) for b in blocks] == ["Object", "HelmRelease", "ConfigSync", "GitRepository"]
    assert blocks[2]["Revision"].strip() == blocks[3]["Revision"].strip() == f"main@sha1:{commit}"
    assert blocks[3]["URL"].strip() == repo.url and blocks[1]["Chart"].strip().startswith("demo 0.1.0")
    # the Events of the repository and of everything it brought, in time order
    shown = helmop(operator, "events", "gitrepo", "config", "-n", ns).stdout
    objects = [line.split()[3] for line in shown.splitlines()[1:]]
    assert {"gitrepository/config", "configsync/apps", "helmrelease/web"} <= set(objects), shown
    assert objects.index("gitrepository/config") < objects.index("helmrelease/web")


def test_a_verified_repository_publishes_only_signed_commits(operator: Operator, kube: Run, ns: str, repo: Repo,
                                                             tmp_path: Path) -> None:
    """spec.verify: a commit signed with a trusted SSH key is published, with SourceVerified naming the key; an
    unsigned one is not (the previous revision stays with the readers), and the reason is in Ready."""
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    repo.write({"apps/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: signed}\n"})
    repo.git("add", "-A")
    repo.git("-c", "gpg.format=ssh", "-c", f"user.signingkey={key}", "commit", "-q", "-S", "-m", "signed")
    repo.git("push", "-q", "--force", "origin", "HEAD:refs/heads/main")
    first = repo.git("rev-parse", "HEAD")
    kube("kubectl", "-n", ns, "create", "secret", "generic", "trusted",
         f"--from-file=author.sshpub={key.with_suffix('.pub')}")
    setup_source(kube, ns, repo, verify={"mode": "HEAD", "secretRef": {"name": "trusted"}})
    eventually(lambda: revision(kube, ns, "config") == f"main@sha1:{first}")
    status = get(kube, ns, GITREPO, "config")["status"]
    assert condition(get(kube, ns, GITREPO, "config"), "SourceVerified")["message"].startswith(
        f"verified signature of\n\t- commit '{first}' with key 'SHA256:")
    assert status["sourceVerificationMode"] == "HEAD"
    repo.commit({"apps/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: unsigned}\n"})
    push_hook(operator, ns, "config")
    refused = eventually(lambda: (o := get(kube, ns, GITREPO, "config"))
                         and condition(o).get("reason") == "InvalidCommitSignature" and o)
    assert condition(refused, "SourceVerified")["status"] == "False"
    assert "it is not signed" in condition(refused)["message"]
    assert revision(kube, ns, "config") == f"main@sha1:{first}"  # readers keep the signed revision


def note(name: str, value: str) -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\ndata: {{value: {value}}}\n"


def test_a_repository_made_of_includes_and_ignore_rules(operator: Operator, kube: Run, ns: str, repo: Repo,
                                                        git_server: GitServer, tmp_path: Path) -> None:
    """spec.include mounts another GitRepository's folder, spec.ignore leaves files out, recurseSubmodules reads
    a submodule; a push to the included
    repository publishes the including one again (same revision, new digest) and its ConfigSync applies it. An
    include cycle is refused by name."""
    shared = Repo(git_server, f"shared-{ns[-6:]}", tmp_path / "shared")
    shared.commit({"deploy/shared.yaml": note("shared", "v1"), "deploy/skip.yaml": note("skip", "x")})
    lib = Repo(git_server, f"lib-{ns[-6:]}", tmp_path / "lib")
    lib.commit({"lib.yaml": note("from-submodule", "s")})
    repo.git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib.bare), "apps/lib")
    repo.git("config", "-f", ".gitmodules", "submodule.apps/lib.url", lib.url)
    repo.commit({"apps/own.yaml": note("own", "a")})
    setup_source(kube, ns, repo, include=[{"repository": {"name": "shared"}, "fromPath": "deploy",
                                           "toPath": "apps/shared"}], ignore="skip.yaml\n", recurseSubmodules=True)
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=gitrepo("shared", shared.url))
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=configsync("apps", "config", "apps"))
    watched(kube, ns, "csync", "apps", lambda obj: condition(obj).get("status") == "True")
    assert get(kube, ns, "cm", "shared")["data"] == {"value": "v1"} and get(kube, ns, "cm", "own")
    assert get(kube, ns, "cm", "from-submodule")  # read from the submodule, at the commit the tree records
    assert not get(kube, ns, "cm", "skip")  # ignored
    status = get(kube, ns, GITREPO, "config")["status"]
    assert status["includedArtifacts"][0]["revision"].startswith("main@sha1:")
    assert status["observedInclude"][0]["toPath"] == "apps/shared" and status["observedIgnore"] == "skip.yaml\n"
    before = status["artifact"]

    shared.commit({"deploy/shared.yaml": note("shared", "v2")})
    push_hook(operator, ns, "shared")
    watched(kube, ns, "cm", "shared", lambda obj: obj["data"] == {"value": "v2"})
    after = get(kube, ns, GITREPO, "config")["status"]["artifact"]
    assert after["revision"] == before["revision"] and after["digest"] != before["digest"]

    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=gitrepo("shared", shared.url, include=[
        {"repository": {"name": "config"}}]))
    push_hook(operator, ns, "shared")
    refused = eventually(lambda: (o := get(kube, ns, GITREPO, "shared")) and condition(o).get("reason") ==
                         "IncludeCycle" and o)
    assert "shared -> config -> shared" in condition(refused)["message"]


def test_a_github_app_installation_token_fetches_the_repository(operator: Operator, kube: Run, ns: str,
                                                                tmp_path: Path) -> None:
    """provider: github: the Secret's GitHub App asks the (loopback) GitHub API for its installation's token,
    found by owner; git sends it as x-access-token. A Secret with app data under provider generic is refused."""
    api = GitHubAPI()
    (tmp_path / "srv").mkdir()
    private = GitServer(tmp_path / "srv", credentials=("x-access-token", api.token))
    try:
        repo = Repo(private, "app", tmp_path / "work")
        first = repo.commit({"a.yaml": note("a", "b")})
        kube("kubectl", "-n", ns, "create", "secret", "generic", "app", f"--from-literal=githubAppID={APP_ID}",
             f"--from-literal=githubAppInstallationOwner={OWNER}", f"--from-literal=githubAppBaseURL={api.url}",
             f"--from-literal=githubAppPrivateKey={api.private_pem()}")
        kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=gitrepo("app", repo.url, webhook=None, provider="github",
                                                                    secretRef={"name": "app"}))
        eventually(lambda: revision(kube, ns, "app") == f"main@sha1:{first}")
        assert f"GET /orgs/{OWNER}/installation" in api.calls and any("access_tokens" in c for c in api.calls)
        kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=gitrepo("generic", repo.url, webhook=None,
                                                                    secretRef={"name": "app"}))
        refused = eventually(lambda: (o := get(kube, ns, GITREPO, "generic")) and condition(o).get("reason") ==
                             "InvalidProviderConfiguration" and o)
        assert api.token not in json.dumps(refused)
    finally:
        private.close()
        api.close()
