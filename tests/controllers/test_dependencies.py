"""spec.dependsOn on any kind, through the operator (its watches are the point: a waiting object must be woken when
what it waits for changes, not at its next look, which this module puts a minute away): a ConfigMap judged by a
readyExpr, a Deployment by kstatus, a ConfigSync and a HelmRelease waiting for each other's kinds, a cycle through
three kinds, a Project waiting for a CRD, a Flux Kustomization for a helmop HelmRelease (what only turns can show:
test_dependency_turns.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from helmop_sandbox import Sandbox

from tests.chartrepo import ChartRepo
from tests.controllers.conftest import Operator, apply, condition, events, get, hr, ready, watched
from tests.gitserver import Repo
from tests.tools import Run, eventually

NEVER = 300.0  # the dependency recheck of this module's operator: a test that waited for it would time out


@pytest.fixture(scope="module")
def operator(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
             chart_repo: ChartRepo) -> Iterator[Operator]:
    with Sandbox(ready_delay=0.05) as sandbox:
        op = Operator(sandbox, request.param, tmp_path_factory.mktemp("dependencies"), chart_repo)
        op.set("intervals", dependency_recheck=NEVER)
        op.start()
        yield op
        op.close()


def waiting(kube: Run, ns: str, kind: str, name: str, naming: str) -> dict[str, Any]:
    """Until ``kind/name`` waits (DependencyNotReady) with a message naming ``naming``."""
    return watched(kube, ns, kind, name, lambda obj: (c := condition(obj)).get("reason") == "DependencyNotReady"
                   and naming in c.get("message", "") and obj, timeout=30)


def configmap(name: str, ready: str) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                           "data": {"ready": ready}})


def test_a_release_waits_for_a_configmap_by_its_ready_expr(operator: Operator, kube: Run, ns: str,
                                                          chart_repo: ChartRepo) -> None:
    apply(kube, ns, hr("app", chart_repo, dependsOn=[{"apiVersion": "v1", "kind": "ConfigMap", "name": "flag",
                                                       "readyExpr": "dep.data.ready == 'yes'"}]))
    obj = waiting(kube, ns, "hr", "app", f"ConfigMap/{ns}/flag (not found)")
    assert condition(obj)["status"] == "False"
    apply(kube, ns, configmap("flag", "no"))
    waiting(kube, ns, "hr", "app", f"ConfigMap/{ns}/flag (readyExpr is not true)")
    assert not [a for a in operator.helm_actions() if a.split()[:2] == ["upgrade", "app"]]
    apply(kube, ns, configmap("flag", "yes"))  # woken by the ConfigMap's watch, long before the recheck
    ready(kube, ns, "app")
    said = eventually(lambda: [e for e in events(kube, ns, "app") if e["reason"] == "DependencyNotReady"])
    assert said[0]["type"] == "Normal" and f"ConfigMap/{ns}/flag" in said[0]["message"]


def test_a_release_waits_for_a_deployment_rolled_out(operator: Operator, kube: Run, ns: str,
                                                    chart_repo: ChartRepo) -> None:
    """A kind no one watched before (Deployment) is watched from the first dependency on it."""
    apply(kube, ns, hr("web", chart_repo, dependsOn=[{"apiVersion": "apps/v1", "kind": "Deployment",
                                                       "name": "db"}]))
    waiting(kube, ns, "hr", "web", f"Deployment/{ns}/db (not found)")
    apply(kube, ns, yaml.safe_dump({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "db"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "db"}},
                 "template": {"metadata": {"labels": {"app": "db"}},
                              "spec": {"containers": [{"name": "db", "image": "postgres:16"}]}}}}))
    ready(kube, ns, "web")  # the sandbox rolls it out; its status change wakes the release


def _gitrepo(repo: Repo) -> str:
    return yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "GitRepository",
                           "metadata": {"name": "config"},
                           "spec": {"url": repo.url, "interval": "1h", "ref": {"branch": "main"}}})


def _sync(name: str, path: str, **spec: Any) -> str:
    return yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "ConfigSync", "metadata": {"name": name},
                           "spec": {"sourceRef": {"name": "config"}, "path": path, "interval": "1h", **spec}})


def test_a_sync_and_a_release_wait_for_each_others_kinds(operator: Operator, kube: Run, ns: str, repo: Repo,
                                                        chart_repo: ChartRepo) -> None:
    """infra (a ConfigSync) waits for the database release; the app release waits for infra."""
    repo.commit({"infra/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: infra}\n"})
    apply(kube, ns, _gitrepo(repo))
    apply(kube, ns, hr("app", chart_repo, dependsOn=[{"apiVersion": "helmop.dev/v1alpha1", "kind": "ConfigSync",
                                                       "name": "infra"}]))
    apply(kube, ns, _sync("infra", "infra", dependsOn=[{"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease",
                                                         "name": "db"}]))
    waiting(kube, ns, "csync", "infra", f"HelmRelease/{ns}/db (not found)")
    waiting(kube, ns, "hr", "app", f"ConfigSync/{ns}/infra")
    apply(kube, ns, hr("db", chart_repo))
    db = ready(kube, ns, "db")
    infra = watched(kube, ns, "csync", "infra", lambda obj: condition(obj).get("status") == "True" and obj)
    app = ready(kube, ns, "app")
    times = [condition(o)["lastTransitionTime"] for o in (db, infra, app)]
    assert times == sorted(times), times  # in dependency order


def test_a_cycle_through_three_kinds_is_said_on_each(operator: Operator, kube: Run, ns: str, repo: Repo,
                                                    chart_repo: ChartRepo) -> None:
    repo.commit({"apps/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"})
    apply(kube, ns, _gitrepo(repo))
    flux = "kustomize.toolkit.fluxcd.io/v1"
    apply(kube, ns, hr("rel", chart_repo, dependsOn=[{"apiVersion": "helmop.dev/v1alpha1", "kind": "ConfigSync",
                                                       "name": "sync"}]))
    apply(kube, ns, _sync("sync", "apps", dependsOn=[{"apiVersion": flux, "kind": "Kustomization", "name": "kust"}]))
    apply(kube, ns, yaml.safe_dump({
        "apiVersion": flux, "kind": "Kustomization", "metadata": {"name": "kust"},
        "spec": {"interval": "1h", "path": "./apps", "prune": True, "sourceRef": {"kind": "GitRepository",
                                                                                  "name": "config"},
                 "dependsOn": [{"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease", "name": "rel"}]}}))
    for kind, name in (("hr", "rel"), ("csync", "sync"), ("kustomizations.kustomize.toolkit.fluxcd.io", "kust")):
        obj = watched(kube, ns, kind, name, lambda o: condition(o).get("reason") == "DependencyCycle" and o,
                      timeout=30)
        message = condition(obj)["message"]
        assert all(part in message for part in ("rel", "sync", "kust")), message
        assert condition(obj, "Stalled").get("status") == "True"


def test_a_project_waits_for_a_crd_established(operator: Operator, kube: Run) -> None:
    """A Project (cluster-scoped) waits for a CustomResourceDefinition: no namespace is made until it is
    Established, then the project goes ahead at once."""
    name = f"team-{uuid.uuid4().hex[:5]}"
    crd = f"widgets{name.replace('-', '')}.example.com"
    kube("kubectl", "apply", "-f", "-", stdin=yaml.safe_dump({
        "apiVersion": "helmop.dev/v1alpha1", "kind": "Project", "metadata": {"name": name},
        "spec": {"dependsOn": [{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                                "name": crd}]}}))
    waiting(kube, "", "project", name, f"CustomResourceDefinition/{crd} (not found)")
    assert not get(kube, "", "namespace", name)
    plural = crd.split(".")[0]
    kube("kubectl", "apply", "-f", "-", stdin=yaml.safe_dump({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": crd},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": plural, "singular": plural[:-1], "kind": "Widget" + name[-5:]},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {"type": "object"}}}]}}))
    watched(kube, "", "project", name, lambda o: condition(o).get("status") == "True", timeout=30)
    assert get(kube, "", "namespace", name)["metadata"]["labels"]["helmop.dev/project"] == name


def test_a_flux_kustomization_waits_for_a_helmop_release(operator: Operator, kube: Run, ns: str, repo: Repo,
                                                         chart_repo: ChartRepo) -> None:
    repo.commit({"apps/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: after-db}\n"})
    apply(kube, ns, yaml.safe_dump({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
                                    "metadata": {"name": "config"},
                                    "spec": {"url": repo.url, "interval": "1h", "ref": {"branch": "main"}}}))
    apply(kube, ns, yaml.safe_dump({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "metadata": {"name": "apps"},
        "spec": {"interval": "1h", "path": "./apps", "prune": True,
                 "sourceRef": {"kind": "GitRepository", "name": "config"},
                 "dependsOn": [{"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease", "name": "db"}]}}))
    kustomization = "kustomizations.kustomize.toolkit.fluxcd.io"
    waiting(kube, ns, kustomization, "apps", f"HelmRelease/{ns}/db (not found)")
    assert not get(kube, ns, "configmap", "after-db")
    apply(kube, ns, hr("db", chart_repo))
    watched(kube, ns, kustomization, "apps", lambda o: condition(o).get("status") == "True")
    assert get(kube, ns, "configmap", "after-db")
