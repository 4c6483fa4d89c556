"""Tenant isolation with the operator locked down as deploy/helmop's `multitenancy` block runs it
(--default-service-account, --no-cross-namespace-refs, RBAC enforced, no cluster-wide role for
releases): a tenant's releases and repositories get what its namespace's RBAC grants, nothing more. Driven by
turns (:mod:`tests.controllers.turns`) acting with the token of the ServiceAccount the chart installs: the API
judges every request of a turn by what the chart grants it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
import yaml
from helmop_sandbox import Sandbox

from tests.chartrepo import ChartRepo
from tests.conftest import _runner
from tests.controllers.conftest import condition, get, operator_settings
from tests.controllers.tenants import CLUSTER_ADMIN_GRAB, stalled, sync, tenant
from tests.controllers.turns import Turns, ready
from tests.gitserver import Repo
from tests.tools import ROOT, Run


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory, chart_repo: ChartRepo) -> Iterator[tuple[Turns, Run]]:
    workdir = tmp_path_factory.mktemp("locked")
    with Sandbox(ready_delay=0.05) as sandbox:
        admin = _runner(sandbox)
        admin("helm", "install", "helmop", str(ROOT / "deploy" / "helmop"), "-n", "helmop-system",
              "--create-namespace", "--set", "multitenancy.enabled=true")
        args = admin("kubectl", "-n", "helmop-system", "get", "deploy", "helmop", "-o",
                     "jsonpath={.spec.template.spec.containers[0].args}").stdout
        assert "--default-service-account=helmop-tenant" in args and "--no-cross-namespace-refs" in args
        assert admin("kubectl", "get", "clusterrolebinding", "helmop-releases", check=False).returncode != 0
        token = admin("kubectl", "-n", "helmop-system", "create", "token", "helmop").stdout.strip()
        config = yaml.safe_load(sandbox.kubeconfig.read_text())
        config["users"][0]["user"]["token"] = token
        (workdir / "kubeconfig").write_text(yaml.safe_dump(config))
        settings = operator_settings(sandbox.kubeconfig, "helm", workdir, chart_repo)
        # what the chart's args say
        settings = replace(settings, tenancy=replace(settings.tenancy, default_service_account="helmop-tenant",
                                                     no_cross_namespace_refs=True))
        turns = Turns(sandbox, settings, identity=workdir / "kubeconfig")
        yield turns, admin
        turns.close()


def release(name: str, repo: ChartRepo, chart: str = "demo", **spec: Any) -> str:
    return yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease", "metadata": {"name": name},
                           "spec": {"interval": "1h", "timeout": "30s", "values": {"fullnameOverride": name},
                                    "chart": {"repository": {"url": repo.url, "name": chart, "version": "0.1.0"}},
                                    **spec}})


def test_a_tenant_release_gets_only_its_namespace(locked: tuple[Turns, Run], chart_repo: ChartRepo) -> None:
    turns, kube = locked
    ns = tenant(kube)
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=release("web", chart_repo))
    assert ready(turns.settle(ns, "HelmRelease/web")).get("status") == "True"
    assert get(kube, ns, "deploy", "web")  # its own namespace: fine

    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=release("sys", chart_repo, targetNamespace="kube-system"))
    failed = turns.settle(ns, "HelmRelease/sys")
    assert condition(failed).get("status") == "False" and "forbidden" in condition(failed).get("message", ""), failed
    assert f"system:serviceaccount:{ns}:helmop-tenant" in condition(failed)["message"]
    assert not get(kube, "kube-system", "deploy", "sys")

    victim = f"victim-{uuid.uuid4().hex[:5]}"
    kube("kubectl", "create", "namespace", victim)
    kube("kubectl", "-n", victim, "create", "secret", "generic", "prod-db", "--from-literal=password=Hunter2Hunter2")
    chart = f"snoop-{ns}"
    chart_repo.publish(chart, "0.1.0", templates={"loot.yaml": (
        f'apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: loot}}\ndata:\n'
        f'  stolen: {{{{ (lookup "v1" "Secret" "{victim}" "prod-db") | toJson | quote }}}}\n')})
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=release("snoop", chart_repo, chart=chart))
    snooped = turns.settle(ns, "HelmRelease/snoop")
    assert condition(snooped).get("status") in ("True", "False") and snooped["status"].get("lastAttemptedConfigDigest")
    loot = json.dumps(get(kube, ns, "cm", "loot"))
    assert "SHVudGVyMkh1bnRlcjI=" not in loot and "Hunter2Hunter2" not in loot  # the lookup saw nothing

    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump(
        {"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease", "metadata": {"name": "crossing"},
         "spec": {"chart": {"sourceRef": {"name": "config", "namespace": victim}, "path": "charts/x"}}}))
    assert "other namespaces are disabled" in stalled(turns, kube, ns, "HelmRelease/crossing", "CrossNamespaceRef")


def test_a_tenant_repository_cannot_climb(locked: tuple[Turns, Run], repo: Repo) -> None:
    turns, kube = locked
    ns = tenant(kube)
    bind_admin = ("apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: grab}\n"
                  "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\n"
                  f"subjects: [{{kind: ServiceAccount, name: default, namespace: {ns}}}]\n")
    repo.commit({"apps/grab.yaml": CLUSTER_ADMIN_GRAB.replace("NS", ns), "apps/bind.yaml": bind_admin,
                 "apps/note.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: note}\ndata: {a: b}\n"})
    sync(kube, ns, repo)
    obj = turns.settle(ns, "ConfigSync/apps")
    assert condition(obj).get("reason") == "ApplyFailed", condition(obj)
    message = condition(obj)["message"]
    assert f"ClusterRoleBinding/grab-{ns}" in message and "forbidden" in message
    assert "RoleBinding/" in message and "not currently held" in message  # RBAC escalation prevention
    assert kube("kubectl", "get", "clusterrolebinding", f"grab-{ns}", check=False).returncode != 0
    assert not get(kube, ns, "rolebinding", "grab")
    # the whole set is dry-run first, as Flux does: with objects refused, not even what the tenant may write is
    assert "dry-run failed (Forbidden)" in message and not get(kube, ns, "cm", "note")


def test_image_automation_stays_in_its_namespace(locked: tuple[Turns, Run]) -> None:
    """--no-cross-namespace-refs: a policy may not read another namespace's ImageRepository (whatever its
    accessFrom grants), an automation may not push to another namespace's GitRepository."""
    turns, kube = locked
    for ns in ("img-a", "img-b"):
        kube("kubectl", "create", "namespace", ns)
    kube("kubectl", "-n", "img-b", "apply", "-f", "-", stdin=yaml.safe_dump(
        {"apiVersion": "helmop.dev/v1alpha1", "kind": "ImageRepository", "metadata": {"name": "web"},
         "spec": {"image": "ghcr.io/example/web", "interval": "1h", "suspend": True,
                  "accessFrom": {"namespaceSelectors": [{"matchLabels": {}}]}}}))
    kube("kubectl", "-n", "img-a", "apply", "-f", "-", stdin=yaml.safe_dump_all([
        {"apiVersion": "helmop.dev/v1alpha1", "kind": "ImagePolicy", "metadata": {"name": "web"},
         "spec": {"imageRepositoryRef": {"name": "web", "namespace": "img-b"}, "policy": {"semver": {"range": "1.x"}}}},
        {"apiVersion": "helmop.dev/v1alpha1", "kind": "ImageUpdateAutomation", "metadata": {"name": "web"},
         "spec": {"interval": "1h", "sourceRef": {"name": "config", "namespace": "img-b"},
                  "git": {"commit": {"author": {"email": "bot@example.com"}}}}}]))
    for kind in ("ImagePolicy", "ImageUpdateAutomation"):
        refused = condition(turns.settle("img-a", f"{kind}/web"))
        assert refused.get("reason") == "AccessDenied", refused
        assert "--no-cross-namespace-refs" in refused["message"], refused
