"""A commit that changes a dependency and its dependent rolls out in that order: a ConfigSync (or Kustomization) a
dependent waits for counts as ready only once it applied the revision its source holds now, not the last one it
applied (as Flux checks). Driven by turns, so that the dependent's turn comes first: with an operator, whose watches
wake both, the dependency is usually first anyway, and the test could not tell."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from helmop_sandbox import Sandbox

from tests.chartrepo import ChartRepo
from tests.conftest import _runner
from tests.controllers.conftest import condition, operator_settings
from tests.controllers.turns import Turns
from tests.gitserver import GitServer, Repo
from tests.tools import Run


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(ready_delay=0.05) as running:
        yield running


@pytest.fixture(scope="module")
def turns(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory, chart_repo: ChartRepo) -> Iterator[Turns]:
    harness = Turns(sandbox, operator_settings(sandbox.kubeconfig, "helm", tmp_path_factory.mktemp("order"),
                                               chart_repo))
    yield harness
    harness.close()


@pytest.fixture(scope="module")
def kube(sandbox: Sandbox) -> Run:
    return _runner(sandbox)


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
