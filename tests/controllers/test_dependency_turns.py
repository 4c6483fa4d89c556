"""dependsOn driven by turns, where the order of turns or the operator's settings are the point. A commit that changes
a dependency and its dependent rolls out in that order: a ConfigSync (or Kustomization) a dependent waits for counts
as ready only once it applied the revision its source holds now, not the last one it applied (as Flux checks); the
dependent's turn comes first here (with an operator, whose watches wake both, the dependency is usually first
anyway, and a test could not tell). Under lockdown a dependency is read with the object's identity."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from helmop_sandbox import Sandbox

from helmop.api.tenancy import Tenancy
from tests.chartrepo import ChartRepo
from tests.conftest import _runner
from tests.controllers.conftest import condition, hr, operator_settings
from tests.controllers.turns import Turns
from tests.gitserver import GitServer, Repo
from tests.tools import Run


@pytest.fixture(scope="module")
def locked(turns_sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory, chart_repo: ChartRepo) -> Iterator[Turns]:
    """The turns of an operator locked down (--no-cross-namespace-refs): objects read what they depend on as their
    ServiceAccount. (Both harnesses act only on the turns a test asks for: they share the sandbox.)"""
    settings = operator_settings(turns_sandbox.kubeconfig, "helm", tmp_path_factory.mktemp("locked"), chart_repo)
    harness = Turns(turns_sandbox, replace(settings, tenancy=Tenancy(no_cross_namespace_refs=True)))
    yield harness
    harness.close()


@pytest.fixture(scope="module")
def kube(turns_sandbox: Sandbox) -> Run:
    return _runner(turns_sandbox)


def _files(n: int) -> dict[str, str | None]:
    return {f"{path}/cm.yaml": f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {path}}}\ndata: {{n: '{n}'}}\n"
            for path in ("infra", "app")}


def _applied(obj: dict[str, object]) -> str:
    return str((obj.get("status") or {}).get("lastAppliedRevision") or "")  # type: ignore[union-attr]


def test_the_dependent_waits_for_the_revision_its_dependency_has_not_applied(
        turns: Turns, kube: Run, ns: str, git_server: GitServer, tmp_path: Path) -> None:
    repo = Repo(git_server, f"order-{ns}", tmp_path / "work")
    first = repo.commit(_files(1))
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump_all([
        {"apiVersion": "helmop.dev/v1alpha1", "kind": "GitRepository", "metadata": {"name": "config"},
         "spec": {"url": repo.url, "interval": "1h", "ref": {"branch": "main"}}},
        *({"apiVersion": "helmop.dev/v1alpha1", "kind": "ConfigSync", "metadata": {"name": name},
           "spec": {"sourceRef": {"name": "config"}, "path": name, "interval": "1h", **extra}}
          for name, extra in (("infra", {}), ("app", {"dependsOn": [{"name": "infra"}]})))]))
    turns.turn("GitRepository", ns, "config")
    assert _applied(turns.turn("ConfigSync", ns, "infra")) == f"main@sha1:{first}"
    assert _applied(turns.turn("ConfigSync", ns, "app")) == f"main@sha1:{first}"

    second = repo.commit(_files(2))
    turns.turn("GitRepository", ns, "config")  # the new revision published
    waiting = turns.turn("ConfigSync", ns, "app")  # before infra's turn: infra is Ready, for the last revision
    assert condition(waiting)["reason"] == "DependencyNotReady", condition(waiting)
    assert f"revision main@sha1:{second} not applied yet (applied: main@sha1:{first})" in condition(waiting)["message"]
    assert _applied(waiting) == f"main@sha1:{first}"
    assert _applied(turns.turn("ConfigSync", ns, "infra")) == f"main@sha1:{second}"
    assert _applied(turns.turn("ConfigSync", ns, "app")) == f"main@sha1:{second}"


def test_under_lockdown_a_dependency_is_read_as_the_objects_identity(locked: Turns, kube: Run, ns: str,
                                                                    chart_repo: ChartRepo) -> None:
    """The release acts as its ServiceAccount, which may not read ConfigMaps: DependencyForbidden, not a silent
    wait (and not Stalled: rights may be granted); once the account may read it, the release goes ahead."""
    kube("kubectl", "-n", ns, "create", "serviceaccount", "deployer")
    kube("kubectl", "-n", ns, "create", "configmap", "flag", "--from-literal=go=yes")
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=hr(
        "app", chart_repo, serviceAccountName="deployer",
        dependsOn=[{"apiVersion": "v1", "kind": "ConfigMap", "name": "flag", "readyExpr": "dep.data.go == 'yes'"}]))
    refused = locked.turn("HelmRelease", ns, "app")
    assert condition(refused)["reason"] == "DependencyForbidden", condition(refused)
    assert f"ConfigMap/{ns}/flag" in condition(refused)["message"]
    assert condition(refused, "Stalled").get("status") != "True"
    kube("kubectl", "-n", ns, "create", "role", "read-flags", "--verb=get", "--resource=configmaps")
    kube("kubectl", "-n", ns, "create", "rolebinding", "read-flags", "--role=read-flags",
         f"--serviceaccount={ns}:deployer")
    allowed = locked.turn("HelmRelease", ns, "app")
    assert condition(allowed)["reason"] != "DependencyForbidden", condition(allowed)


def test_a_cycle_through_a_project_is_found_on_both(turns: Turns, kube: Run, ns: str, chart_repo: ChartRepo) -> None:
    project = f"p-{ns}"
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=hr(
        "a", chart_repo, dependsOn=[{"apiVersion": "helmop.dev/v1alpha1", "kind": "Project", "name": project}]))
    kube("kubectl", "apply", "-f", "-", stdin=yaml.safe_dump({
        "apiVersion": "helmop.dev/v1alpha1", "kind": "Project", "metadata": {"name": project},
        "spec": {"dependsOn": [{"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease", "name": "a",
                                "namespace": ns}]}}))
    for kind, where, name in (("HelmRelease", ns, "a"), ("Project", "", project)):
        obj = turns.turn(kind, where, name)
        assert condition(obj)["reason"] == "DependencyCycle", (kind, condition(obj))
        assert f"HelmRelease/{ns}/a" in condition(obj)["message"] or f"{ns}/a" in condition(obj)["message"]
        assert f"Project/{project}" in condition(obj)["message"] or f" {project}" in condition(obj)["message"]
