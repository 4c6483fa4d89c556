"""The operator under the ServiceAccount and ClusterRole of deploy/helmop, with RBAC enforced:
HelmRelease, GitRepository + ConfigSync, an ArtifactGenerator, a Receiver, a Preview and Jenkins all work with exactly
those rights (plus a ClusterRole for what the charts render, in place of the chart's default cluster-admin binding)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from helmop_sandbox import Sandbox
from helmop_sandbox.rbac import rule_allows

from tests.conftest import _runner
from tests.controllers.conftest import GITREPO, ChartRepo, Operator, condition, eventually, get, watched
from tests.gitserver import GitServer, Repo
from tests.registry import Registry
from tests.tools import ROOT, Run

RELEASES_ROLE = """
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: helmop-test-releases}
rules:
# what the demo and Jenkins charts render, and what helm --wait and helm test read; the Jenkins
# chart's Role grants pods/exec, pods/log and events, which helm may only grant holding them
# (RBAC escalation prevention)
- apiGroups: ["", apps, batch, networking.k8s.io, rbac.authorization.k8s.io, policy]
  resources: [deployments, statefulsets, replicasets, services, serviceaccounts, configmaps,
              persistentvolumeclaims, pods, pods/exec, pods/log, endpoints, jobs, ingresses, roles,
              rolebindings, poddisruptionbudgets]
  verbs: [get, list, watch, create, update, patch, delete, deletecollection]
- apiGroups: [""]
  resources: [events]
  verbs: [get, list, watch]
"""


@pytest.fixture(scope="module")
def restricted(tmp_path_factory: pytest.TempPathFactory, chart_repo: ChartRepo) -> Iterator[tuple[Operator, Run]]:
    workdir = tmp_path_factory.mktemp("least-privilege")
    with Sandbox(ready_delay=0.05) as sandbox:
        admin = _runner(sandbox)
        admin("kubectl", "apply", "-f", "-", stdin=RELEASES_ROLE)
        admin("helm", "install", "helmop", str(ROOT / "deploy" / "helmop"), "-n", "helmop-system",
              "--create-namespace", "--set", "rbac.releasesClusterRole=helmop-test-releases")
        token = admin("kubectl", "-n", "helmop-system", "create", "token", "helmop").stdout.strip()
        config = yaml.safe_load(sandbox.kubeconfig.read_text())
        config["users"][0]["user"]["token"] = token
        restricted_config = workdir / "kubeconfig"
        restricted_config.write_text(yaml.safe_dump(config))
        op = Operator(sandbox, "helm", workdir, chart_repo, kubeconfig=restricted_config)
        op.start()
        yield op, admin
        op.close()


def test_everything_works_under_the_chart_service_account(restricted: tuple[Operator, Run], chart_repo: ChartRepo,
                                                          tmp_path: Path) -> None:
    operator, kube = restricted
    ns = "team"
    kube("kubectl", "create", "namespace", ns)
    release = {"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease", "metadata": {"name": "web"},
               "spec": {"interval": "1h", "chart": {"repository": {"url": chart_repo.url, "name": "demo",
                                                                   "version": "0.1.0"}},
                        "values": {"fullnameOverride": "web"}}}
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump(release))
    watched(kube, ns, "hr", "web", lambda obj: condition(obj).get("status") == "True")
    # an approval: trusted only while the chart's admission policy is bound, which the operator reads
    gated = {**release, "metadata": {"name": "gated"},
             "spec": {**release["spec"], "approval": {"required": True}, "values": {"fullnameOverride": "gated"}}}
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump(gated))
    pending = watched(kube, ns, "hr", "gated", lambda obj: condition(obj).get("reason") == "AwaitingApproval" and obj)
    approval = json.dumps({"by": "sandbox-admin", "at": "2026-11-29T00:00:00Z",
                           "revision": pending["status"]["pendingRevision"]}, separators=(",", ":"))
    kube("kubectl", "-n", ns, "annotate", "hr", "gated", f"helmop.dev/approve={approval}")
    watched(kube, ns, "hr", "gated", lambda obj: condition(obj).get("status") == "True")

    (tmp_path / "srv").mkdir()
    server = GitServer(tmp_path / "srv")
    try:
        repo = Repo(server, "config", tmp_path / "work")
        synced = {**release, "metadata": {"name": "synced"},
                  "spec": {**release["spec"], "values": {"fullnameOverride": "synced"}}}
        repo.commit({"apps/synced.yaml": yaml.safe_dump(synced),
                     "apps/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: note}\ndata: {a: b}\n"})
        kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump_all([
            {"apiVersion": "helmop.dev/v1alpha1", "kind": "GitRepository", "metadata": {"name": "config"},
             "spec": {"url": repo.url, "interval": "1h", "ref": {"branch": "main"}}},
            {"apiVersion": "helmop.dev/v1alpha1", "kind": "ConfigSync", "metadata": {"name": "apps"},
             "spec": {"sourceRef": {"name": "config"}, "path": "apps", "interval": "1h"}}]))
        watched(kube, ns, GITREPO, "config", lambda obj: condition(obj).get("status") == "True")
        watched(kube, ns, "csync", "apps", lambda obj: condition(obj).get("status") == "True")
        watched(kube, ns, "hr", "synced", lambda obj: condition(obj).get("status") == "True")
        # an ArtifactGenerator: ExternalArtifacts made, their status written, deleted with it
        kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump(
            {"apiVersion": "helmop.dev/v1alpha1", "kind": "ArtifactGenerator", "metadata": {"name": "bundle"},
             "spec": {"sources": [{"alias": "git", "kind": "GitRepository", "name": "config"}],
                      "artifacts": [{"name": "notes", "copy": [{"from": "@git/apps/cm.yaml", "to": "@artifact/"}]}]}}))
        watched(kube, ns, "externalartifacts.helmop.dev", "notes",
                lambda obj: (obj.get("status") or {}).get("artifact"))
        kube("kubectl", "-n", ns, "delete", "artifactgenerators.helmop.dev", "bundle", "--timeout=60s")
        watched(kube, ns, "externalartifacts.helmop.dev", "notes", lambda obj: not obj)
        _an_image_automation_pushes(kube, ns, repo)
        _a_receiver_asks_the_repository_to_fetch(operator, kube, ns)
    finally:
        server.close()

    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump(
        {"apiVersion": "apps.helmop.dev/v1alpha1", "kind": "Jenkins", "metadata": {"name": "ci"},
         "spec": {"project": "team", "interval": "1h"}}))
    watched(kube, ns, "jenkins", "ci", lambda obj: condition(obj).get("status") == "True", timeout=120)

    # notifications: Providers and Alerts watched, their Ready condition written
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump_all([
        {"apiVersion": "helmop.dev/v1alpha1", "kind": "Provider", "metadata": {"name": "chat"},
         "spec": {"type": "generic", "address": "https://hooks.example.invalid/helmop"}},
        {"apiVersion": "helmop.dev/v1alpha1", "kind": "Alert", "metadata": {"name": "releases"},
         "spec": {"providerRef": {"name": "chat"}, "eventSources": [{"kind": "HelmRelease", "name": "*"}]}}]))
    for kind, name in (("providers.helmop.dev", "chat"), ("alerts.helmop.dev", "releases")):
        eventually(lambda k=kind, n=name: condition(get(kube, ns, k, n)).get("status") == "True")
    # a Preview: watched, its finalizer and status written (its Provider comments on no pull request: Stalled)
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump(
        {"apiVersion": "helmop.dev/v1alpha1", "kind": "Preview", "metadata": {"name": "prs"},
         "spec": {"sourceRef": {"name": "config"}, "providerRef": {"name": "chat"}}}))
    watched(kube, ns, "previews.helmop.dev", "prs", lambda obj: condition(obj).get("reason") == "InvalidProvider")

    # helm acting as a namespace's own ServiceAccount (spec.serviceAccountName)
    kube("kubectl", "-n", ns, "create", "serviceaccount", "deployer")
    kube("kubectl", "-n", ns, "create", "rolebinding", "deployer", "--clusterrole=cluster-admin",
         f"--serviceaccount={ns}:deployer")
    scoped = {**release, "metadata": {"name": "scoped"},
              "spec": {**release["spec"], "serviceAccountName": "deployer", "values": {"fullnameOverride": "scoped"}}}
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump(scoped))
    watched(kube, ns, "hr", "scoped", lambda obj: condition(obj).get("status") == "True")
    _a_release_on_a_cluster_that_trusts_a_service_account(operator, kube, ns, release)

    kube("kubectl", "-n", ns, "delete", "jenkins", "ci", "--timeout=90s")
    kube("kubectl", "-n", ns, "delete", "hr", "web", "--timeout=60s")
    assert "web" not in kube("helm", "list", "-n", ns, "-q").stdout.split()
    _every_rule_was_needed(operator.sandbox, kube)


def _a_release_on_a_cluster_that_trusts_a_service_account(operator: Operator, kube: Run, ns: str,
                                                          release: dict[str, Any]) -> None:
    """spec.kubeConfig.configMapRef (provider generic): a token of the namespace's ServiceAccount asked for
    (TokenRequest), for a cluster that trusts it: here this very one."""
    config = yaml.safe_load(operator.sandbox.kubeconfig.read_text())["clusters"][0]["cluster"]
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "trusting"},
         "data": {"provider": "generic", "address": config["server"], "serviceAccountName": "deployer",
                  "ca.crt": base64.b64decode(config["certificate-authority-data"]).decode()}},
        {**release, "metadata": {"name": "remote"},
         "spec": {**release["spec"], "kubeConfig": {"configMapRef": {"name": "trusting"}},
                  "values": {"fullnameOverride": "remote"}}}]))
    watched(kube, ns, "hr", "remote", lambda obj: condition(obj).get("status") == "True")


def _a_receiver_asks_the_repository_to_fetch(operator: Operator, kube: Run, ns: str) -> None:
    """A Receiver: watched by the webhook server, its finalizer and status written, its GitRepository annotated."""
    kube("kubectl", "-n", ns, "create", "secret", "generic", "hook", "--from-literal=token=t0k3n")
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump(
        {"apiVersion": "helmop.dev/v1alpha1", "kind": "Receiver", "metadata": {"name": "push"},
         "spec": {"type": "gitlab", "secretRef": {"name": "hook"},
                  "resources": [{"kind": "GitRepository", "name": "config"}]}}))
    path = watched(kube, ns, "receivers.helmop.dev", "push", lambda obj: (obj.get("status") or {}).get("webhookPath"))
    # the webhook server's index of paths follows the Receivers' watch (as Flux's): served moments after the status
    answer = eventually(lambda: (r := requests.post(f"{operator.webhook_url}{path}", headers={
        "X-Gitlab-Token": "t0k3n"}, timeout=30)).status_code != 404 and r, timeout=15)
    assert answer.status_code == 200, answer.text
    stamp = get(kube, ns, GITREPO, "config")["metadata"]["annotations"]["helmop.dev/requestedAt"]
    watched(kube, ns, GITREPO, "config", lambda obj: obj["status"].get("lastHandledReconcileAt") == stamp)


def _an_image_automation_pushes(kube: Run, ns: str, repo: Repo) -> None:
    """Image automation: an ImageRepository scanned, an ImagePolicy choosing, an automation listing the namespace's
    policies and pushing to the GitRepository's repository; each status written, each finalizer set."""
    registry = Registry({})
    registry.tags = ["1.0.0", "1.1.0"]
    image = f"127.0.0.1:{registry.port}/charts/app"
    repo.commit({"apps/image.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: image}\ndata:\n"
                                    f'  image: {image}:1.0.0 # {{"$imagepolicy": "{ns}:app"}}\n'})
    auth = {"auths": {f"127.0.0.1:{registry.port}": {"username": "robot", "password": "pull"}}}
    kube("kubectl", "-n", ns, "create", "secret", "generic", "regcred", "--type=kubernetes.io/dockerconfigjson",
         f"--from-literal=.dockerconfigjson={json.dumps(auth)}")
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump_all([
        {"apiVersion": "helmop.dev/v1alpha1", "kind": "ImageRepository", "metadata": {"name": "app"},
         "spec": {"image": image, "interval": "1h", "insecure": True, "secretRef": {"name": "regcred"}}},
        {"apiVersion": "helmop.dev/v1alpha1", "kind": "ImagePolicy", "metadata": {"name": "app"},
         "spec": {"imageRepositoryRef": {"name": "app"}, "policy": {"semver": {"range": "1.x"}}}},
        {"apiVersion": "helmop.dev/v1alpha1", "kind": "ImageUpdateAutomation", "metadata": {"name": "app"},
         "spec": {"interval": "1h", "sourceRef": {"name": "config"}, "update": {"path": "apps"},
                  "git": {"commit": {"author": {"email": "bot@example.com"}}}}}]))
    watched(kube, ns, "imageupdateautomations.helmop.dev", "app", lambda obj: (obj.get("status") or {})
               .get("lastPushCommit"))
    repo.git("fetch", "-q")
    assert f"{image}:1.1.0" in repo.git("show", "origin/main:apps/image.yaml")


def _every_rule_was_needed(sandbox: Sandbox, kube: Run) -> None:
    """Each rule of the operator's ClusterRole: without it, a request the operator (or helm as the
    operator) really made in this test would have been refused."""
    user = "system:serviceaccount:helmop-system:helmop"
    made = [attrs for who, attrs in sandbox.audit if who == user]
    own = json.loads(kube("kubectl", "get", "clusterrole", "helmop", "-o", "json").stdout)["rules"]
    releases = json.loads(kube("kubectl", "get", "clusterrole", "helmop-test-releases", "-o", "json").stdout)["rules"]
    unneeded = []
    for i, rule in enumerate(own):
        rest = own[:i] + own[i + 1:] + releases
        if not any(rule_allows(rule, a) and not any(rule_allows(r, a) for r in rest) for a in made):
            unneeded.append(rule)
    assert not unneeded, f"rules no request needed: {unneeded}"


def test_the_service_account_has_no_more_than_it_needs(restricted: tuple[Operator, Run]) -> None:
    operator, kube = restricted
    as_operator = ["kubectl", "--kubeconfig", str(operator.settings.kubeconfig)]
    kube("kubectl", "create", "namespace", "victim")
    for attempt in (["delete", "namespace", "victim"], ["create", "clusterrole", "x", "--verb=get", "--resource=pods"],
                    ["delete", "crd", "helmreleases.helmop.dev"], ["label", "node", "sandbox-node", "x=y"],
                    ["create", "clusterrolebinding", "x", "--clusterrole=cluster-admin", "--user=me"]):
        denied = kube(*as_operator, *attempt, check=False)
        assert denied.returncode != 0 and "forbidden" in denied.stderr, (attempt, denied.stdout, denied.stderr)
    assert kube(*as_operator, "get", "hr", "-A").returncode == 0  # while its own work is allowed
    role = json.loads(kube("kubectl", "get", "clusterrole", "helmop", "-o", "json").stdout)
    assert all("*" not in rule.get("verbs", []) and "*" not in rule.get("resources", []) for rule in role["rules"])


def test_projects_work_with_the_rights_the_chart_gives_them(restricted: tuple[Operator, Run]) -> None:
    """projects.enabled: a Project is made and torn down under the chart's ServiceAccount (it binds admin, edit
    and view through `bind` on those roles alone)."""
    _operator, kube = restricted
    kube("helm", "upgrade", "helmop", str(ROOT / "deploy" / "helmop"), "-n", "helmop-system", "--reuse-values",
         "--set", "projects.enabled=true")
    project = {"apiVersion": "helmop.dev/v1alpha1", "kind": "Project", "metadata": {"name": "lp-team"},
               "spec": {"members": [{"kind": "User", "name": "alice", "role": "admin"},
                                    {"kind": "Group", "name": "readers", "role": "view"}],
                        "quota": {"pods": "10"}, "limits": {"default": {"memory": "128Mi"}},
                        "isolation": {"enabled": True}, "jenkins": {"interval": "1h"}}}
    kube("kubectl", "apply", "-f", "-", stdin=yaml.safe_dump(project))
    ready = eventually(lambda: (o := json.loads(kube("kubectl", "get", "project", "lp-team", "-o", "json").stdout))
                       and condition(o).get("status") == "True" and o, timeout=120)
    assert ready["status"]["namespace"] == "lp-team"
    kube("kubectl", "delete", "project", "lp-team", "--timeout=120s")
    assert kube("kubectl", "get", "namespace", "lp-team", check=False).returncode != 0
