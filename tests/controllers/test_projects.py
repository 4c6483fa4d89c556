"""Projects: one cluster-scoped object for a team's namespace, access, quota, isolation, Jenkins and config
repository; drift put back; everything removed in order when it is deleted, the Jenkins volume kept."""

from __future__ import annotations

import json
import uuid
from typing import Any

import yaml

from tests.controllers.conftest import GITREPO, ChartRepo, Operator, condition, eventually, get, helmop, watched
from tests.gitserver import Repo
from tests.tools import Run


def project(name: str, **spec: Any) -> str:
    return yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "Project", "metadata": {"name": name},
                           "spec": spec})


def cluster_get(kube: Run, *what: str) -> dict[str, Any]:
    done = kube("kubectl", "get", *what, "-o", "json", check=False)
    return json.loads(done.stdout) if done.returncode == 0 else {}


def release(name: str, charts: ChartRepo) -> str:
    return yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease", "metadata": {"name": name},
                           "spec": {"interval": "1h", "chart": {"repository": {"url": charts.url, "name": "demo",
                                                                               "version": "0.1.0"}},
                                    "values": {"fullnameOverride": name}}})


def test_a_project_from_start_to_end(operator: Operator, kube: Run, chart_repo: ChartRepo, repo: Repo) -> None:
    name = f"team-{uuid.uuid4().hex[:5]}"
    repo.commit({"apps/web.yaml": release("web", chart_repo)})
    kube("kubectl", "apply", "-f", "-", stdin=project(
        name, labels={"cost-center": "42"},
        members=[{"kind": "User", "name": "alice", "role": "edit"}, {"kind": "Group", "name": "auditors",
                                                                      "role": "view"}],
        quota={"pods": "50", "requests.cpu": "4"}, limits={"default": {"cpu": "500m", "memory": "256Mi"}},
        isolation={"enabled": True, "allowFrom": ["monitoring"]},
        jenkins={"plugins": ["git:5.10.1"]},
        sync={"url": repo.url, "ref": {"branch": "main"}, "path": "apps", "interval": "1h"}))
    obj = eventually(lambda: (o := cluster_get(kube, "project", name)) and condition(o).get("status") == "True"
                     and o, timeout=120)
    status = obj["status"]
    assert status["namespace"] == name and status["jenkinsUrl"]
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "NamespaceReady": "True", "AccessReady": "True", "JenkinsReady": "True", "SyncReady": "True", "Ready": "True"}
    namespace = cluster_get(kube, "namespace", name)
    assert namespace["metadata"]["labels"]["cost-center"] == "42"
    assert namespace["metadata"]["labels"]["helmop.dev/project"] == name
    assert get(kube, name, "resourcequota", "helmop-project")["spec"]["hard"] == {"pods": "50", "requests.cpu": "4"}
    policy = get(kube, name, "networkpolicy", "helmop-isolation")["spec"]
    assert {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}} in \
        policy["ingress"][0]["from"]
    # the synced HelmRelease, applied as the project's deployer: installed in the project namespace
    watched(kube, name, "hr", "web", lambda obj: condition(obj).get("status") == "True", timeout=60)
    assert get(kube, name, "csync", "project")["spec"]["serviceAccountName"] == "deployer"

    def can(user: str, *what: str) -> bool:
        return kube("kubectl", "auth", "can-i", *what, "--as", user, check=False).stdout.strip() == "yes"

    assert can("alice", "create", "deployments", "-n", name) and can("alice", "create", "helmreleases", "-n", name)
    assert not can("alice", "get", "secrets", "-n", "default") and not can("alice", "create", "rolebindings", "-n",
                                                                              name)
    assert can("bob", "list", "pods", "-n", name, "--as-group", "auditors")
    assert not can("bob", "get", "secrets", "-n", name, "--as-group", "auditors")

    # drift is put back: a deleted member binding comes back
    bindings = [b["metadata"]["name"] for b in get(kube, name, "rolebindings")["items"]
                if b["roleRef"]["name"] == "edit" and b["subjects"][0]["name"] == "alice"]
    kube("kubectl", "-n", name, "delete", "rolebinding", bindings[0])
    watched(kube, name, "rolebinding", bindings[0], lambda obj: obj, timeout=30)

    # the end: everything goes, in order, the Jenkins volume is kept
    claims = get(kube, name, "pvc")["items"]
    volumes = {c["spec"]["volumeName"] for c in claims}
    assert volumes
    kube("kubectl", "delete", "project", name, "--wait=false")
    eventually(lambda: not cluster_get(kube, "project", name), timeout=180)
    assert not cluster_get(kube, "namespace", name)
    assert name not in kube("helm", "list", "-A", "-q").stdout.split()
    assert not [r for r in kube("helm", "list", "-n", name, "-q").stdout.split() if r]
    for volume in volumes:
        kept = cluster_get(kube, "pv", volume)
        assert kept["spec"]["persistentVolumeReclaimPolicy"] == "Retain" and kept["status"]["phase"] == "Released"
    events = sorted((e for e in get(kube, "default", "events")["items"]
                     if e["involvedObject"].get("kind") == "Project" and e["involvedObject"]["name"] == name),
                    key=lambda e: int(e["metadata"]["resourceVersion"]))  # the order they were written in
    steps = [e["message"].split(": ", 1)[1] for e in events if e["reason"] == "TeardownStep"]
    assert steps == ["Sync", "Jenkins", "Access", "Namespace"]
    final = next(e["message"] for e in events if e["reason"] == "TornDown")
    assert all(volume in final for volume in volumes)


def test_a_namespace_that_is_not_the_projects_is_refused(operator: Operator, kube: Run) -> None:
    name = f"taken-{uuid.uuid4().hex[:5]}"
    kube("kubectl", "create", "namespace", name)
    kube("kubectl", "apply", "-f", "-", stdin=project(name, members=[{"kind": "User", "name": "mallory",
                                                                        "role": "admin"}]))
    refused = eventually(lambda: (o := cluster_get(kube, "project", name))
                         and condition(o).get("reason") == "NamespaceOwnedElsewhere" and o)
    assert condition(refused, "Stalled").get("status") == "True"
    assert not get(kube, name, "rolebindings")["items"]  # nothing created, nothing adopted
    kube("kubectl", "delete", "project", name, "--timeout=60s")
    assert cluster_get(kube, "namespace", name)  # and nothing deleted


def test_bad_project_specs_get_specific_reasons(operator: Operator, kube: Run) -> None:
    cases = {"UnknownRole": {"members": [{"kind": "User", "name": "a", "role": "owner"}]},
             "InvalidQuantity": {"quota": {"pods": "lots"}}}
    for reason, spec in cases.items():
        name = f"bad-{reason.lower()}-{uuid.uuid4().hex[:4]}"
        kube("kubectl", "apply", "-f", "-", stdin=project(name, **spec))
        eventually(lambda n=name, r=reason: condition(cluster_get(kube, "project", n)).get("reason") == r)
        assert not cluster_get(kube, "namespace", name)
        kube("kubectl", "delete", "project", name, "--timeout=60s")


def test_two_projects_cannot_claim_one_namespace(operator: Operator, kube: Run) -> None:
    first, second = f"one-{uuid.uuid4().hex[:5]}", f"two-{uuid.uuid4().hex[:5]}"
    kube("kubectl", "apply", "-f", "-", stdin=project(first))
    eventually(lambda: condition(cluster_get(kube, "project", first)).get("status") == "True", timeout=60)
    kube("kubectl", "apply", "-f", "-", stdin=project(second, namespace=first))
    refused = eventually(lambda: (o := cluster_get(kube, "project", second))
                         and condition(o).get("reason") == "NamespaceOwnedElsewhere" and o)
    assert f"another Project ({first})" in condition(refused)["message"]
    kube("kubectl", "delete", "project", second, "--timeout=60s")
    assert cluster_get(kube, "namespace", first)  # the second Project's deletion took nothing of the first's
    kube("kubectl", "delete", "project", first, "--timeout=60s")
    assert not cluster_get(kube, "namespace", first)


def test_a_push_that_reaches_beyond_the_project_is_refused(operator: Operator, kube: Run, repo: Repo) -> None:
    """The config repository syncs as the deployer: a ClusterRoleBinding in it is refused, and the Project
    says so with the ConfigSync's reason."""
    name = f"sync-{uuid.uuid4().hex[:5]}"
    repo.commit({"apps/grab.yaml": yaml.safe_dump(
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
         "subjects": [{"kind": "User", "name": "mallory", "apiGroup": "rbac.authorization.k8s.io"}]})})
    kube("kubectl", "apply", "-f", "-", stdin=project(name, sync={"url": repo.url, "ref": {"branch": "main"},
                                                                 "path": "apps", "interval": "1h"}))
    sync = eventually(lambda: (c := condition(get(kube, name, "csync", "project"))).get("status") == "False"
                      and "ClusterRoleBinding" in c.get("message", "") and c, timeout=60)
    # the ConfigSync's report reaches the Project (its status write wakes the Project)
    eventually(lambda: condition(cluster_get(kube, "project", name), "SyncReady").get("reason") == sync["reason"],
               timeout=30)
    assert not cluster_get(kube, "clusterrolebinding", name)
    kube("kubectl", "delete", "project", name, "--timeout=90s")


def test_an_environment_per_branch(operator: Operator, kube: Run, chart_repo: ChartRepo, repo: Repo) -> None:
    """A matching branch gets a namespace of its own syncing it (with the project's access); a branch name
    that is no DNS label still gets a valid, unique namespace; a deleted branch's environment is torn down."""
    name = f"env-{uuid.uuid4().hex[:4]}"
    repo.commit({"apps/web.yaml": release("web", chart_repo)})
    repo.commit({"apps/web.yaml": release("feature-web", chart_repo)}, branch="feature/login")
    repo.commit({"apps/web.yaml": release("odd-web", chart_repo)}, branch="feature/Über_Weird.Name")
    repo.commit({}, branch="experiment")  # not matched
    kube("kubectl", "apply", "-f", "-", stdin=project(
        name, members=[{"kind": "User", "name": "alice", "role": "edit"}],
        sync={"url": repo.url, "ref": {"branch": "main"}, "path": "apps", "interval": "1h"},
        environments={"branches": {"include": ["feature/*"]}, "template": {"quota": {"pods": "5"}}}))

    def environments() -> dict[str, dict[str, Any]]:
        status = cluster_get(kube, "project", name).get("status") or {}
        return {e["branch"]: e for e in status.get("environments") or []}

    ready = eventually(lambda: (e := environments()) and len(e) == 2 and all(v.get("ready") for v in e.values()) and e,
                       timeout=120)
    login, odd = ready["feature/login"]["namespace"], ready["feature/Über_Weird.Name"]["namespace"]
    assert login == f"{name}-feature-login"
    assert len(odd) <= 63 and odd.startswith(f"{name}-feature-ber-weird-name-") and odd != login
    watched(kube, login, "hr", "feature-web", lambda obj: condition(obj).get("status") == "True")  # that branch's
    assert get(kube, login, "resourcequota", "helmop-project")["spec"]["hard"] == {"pods": "5"}
    assert kube("kubectl", "auth", "can-i", "create", "deployments", "-n", login, "--as", "alice",
                check=False).stdout.strip() == "yes"
    assert not [n for n in ("experiment",) if n in environments()]

    repo.git("push", "-q", "origin", "--delete", "feature/login")
    kube("kubectl", "-n", name, "annotate", "--overwrite", GITREPO, "project",
         f"helmop.dev/requestedAt={uuid.uuid4()}")  # what the push webhook does
    eventually(lambda: "feature/login" not in environments() and not cluster_get(kube, "namespace", login),
               timeout=120)
    assert "feature-web" not in kube("helm", "list", "-A", "-q").stdout.split()
    assert cluster_get(kube, "namespace", odd)
    kube("kubectl", "delete", "project", name, "--timeout=180s")
    assert not cluster_get(kube, "namespace", odd) and not cluster_get(kube, "namespace", name)


def test_orphan_leaves_everything_and_a_stuck_step_is_reported(operator: Operator, kube: Run) -> None:
    kept = f"orphan-{uuid.uuid4().hex[:4]}"
    kube("kubectl", "apply", "-f", "-", stdin=project(kept, deletionPolicy="Orphan", quota={"pods": "3"}))
    eventually(lambda: condition(cluster_get(kube, "project", kept)).get("status") == "True")
    kube("kubectl", "delete", "project", kept, "--timeout=60s")
    namespace = cluster_get(kube, "namespace", kept)
    assert namespace and "helmop.dev/project" not in namespace["metadata"].get("labels", {})
    assert not get(kube, kept, "resourcequota", "helmop-project")["metadata"].get("ownerReferences")
    kube("kubectl", "delete", "namespace", kept, "--wait=false")

    stuck = f"stuck-{uuid.uuid4().hex[:4]}"
    kube("kubectl", "apply", "-f", "-", stdin=project(stuck, teardownTimeout="1s", retainData=False))
    eventually(lambda: condition(cluster_get(kube, "project", stuck)).get("status") == "True")
    # something else holds the namespace (a finalizer of another controller): the last step waits
    kube("kubectl", "-n", stuck, "create", "configmap", "held")
    kube("kubectl", "-n", stuck, "patch", "configmap", "held", "-p",
         '{"metadata": {"finalizers": ["example.com/hold"]}}')
    kube("kubectl", "delete", "project", stuck, "--wait=false")

    def events(reason: str) -> list[dict[str, Any]]:
        return [e for e in get(kube, "default", "events")["items"]
                if e["involvedObject"].get("name") == stuck and e["reason"] == reason]

    warning = eventually(lambda: events("TeardownStuck"), timeout=60)[0]
    assert (warning["type"] == "Warning" and "Namespace" in warning["message"]) or "namespace" in warning["message"]
    teardown = cluster_get(kube, "project", stuck)["status"]["teardown"]
    assert teardown["step"] == "NamespaceReady" and stuck in teardown["waitingFor"]
    kube("kubectl", "-n", stuck, "patch", "configmap", "held", "--type=json",
         "-p", '[{"op": "remove", "path": "/metadata/finalizers"}]')
    eventually(lambda: not cluster_get(kube, "project", stuck), timeout=60)  # retried, never skipped
    assert not cluster_get(kube, "namespace", stuck)


def test_the_cli_creates_shows_and_exports_a_project(operator: Operator, kube: Run) -> None:
    name = f"cli-{uuid.uuid4().hex[:4]}"
    exported = helmop(operator, "create", "project", name, "--member", "user:alice:edit", "--quota", "pods=5",
                      "--jenkins", "--export")
    assert exported.returncode == 0 and yaml.safe_load(exported.stdout)["spec"]["members"] == [
        {"kind": "User", "name": "alice", "role": "edit"}]
    refused = helmop(operator, "create", "project", name, "--member", "user:alice:owner", "--export")
    assert refused.returncode == 2 and "role must be one of admin, edit, view" in refused.stderr
    kube("kubectl", "apply", "-f", "-", stdin=exported.stdout)  # what --export prints is re-appliable
    eventually(lambda: condition(cluster_get(kube, "project", name)).get("status") == "True", timeout=120)
    listed = helmop(operator, "get", "proj")
    assert listed.returncode == 0 and f"project/{name}" in listed.stdout
    shown = helmop(operator, "tree", "proj", name)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"Project/{name}  Ready\n") and f"── Namespace/{name}  Current" in shown.stdout
    assert f"Jenkins/{name}/jenkins  Ready" in shown.stdout and f"── HelmRelease/{name}/" in shown.stdout
    assert f"ResourceQuota/{name}/helmop-project  Current" in shown.stdout
    applied = helmop(operator, "create", "project", name, "--member", "user:alice:edit", "--quota", "pods=5",
                     "--jenkins")
    assert applied.returncode == 0 and "applied" in applied.stdout
    kube("kubectl", "delete", "project", name, "--timeout=120s")
