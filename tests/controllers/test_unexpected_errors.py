"""No silent failure: an exception that escapes any kind's reconcile or clean-up is said on the object
(Ready=False, reason ReconcileError, the exception), as a Warning Event and in
helmop_reconcile_errors_total, and retried with backoff; once the fault is gone the resource recovers
(and a deleted one goes). Driven by turns (:mod:`tests.controllers.turns`: the operator's dispatcher and services,
no kopf, no scheduler): the turn that meets the fault is asked for, and so is the retry, the turn after it (the
scheduler's backoff, which would start it, is not what is tested here)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
import yaml
from helmop_sandbox import Sandbox

from helmop.controllers import configsyncs, gitrepositories, helmreleases
from helmop.controllers.apps import App
from helmop.helm import inputs
from helmop.infra.kube import KubeError
from tests.chartrepo import ChartRepo
from tests.conftest import _runner
from tests.controllers.conftest import GITREPO, condition, get, operator_settings
from tests.controllers.turns import Turns
from tests.gitserver import GitServer, Repo
from tests.tools import Run

GROUP = "helmop.dev/v1alpha1"


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory, chart_repo: ChartRepo) -> Iterator[tuple[Turns, Run]]:
    """Turns of their own (the faults are injected into the operator's modules, for this module's tests alone)."""
    workdir = tmp_path_factory.mktemp("unexpected")
    with Sandbox(ready_delay=0.05) as sandbox:
        settings = operator_settings(sandbox.kubeconfig, "helm", workdir, chart_repo)
        # an app's clean-up looks once for the HelmRelease it deleted to be gone, and is retried: that one's
        # clean-up is a turn of its own, which the app's turn cannot wait for (the operator runs both at once)
        settings = replace(settings, limits=replace(settings.limits, uninstall_wait=0.1, uninstall_poll=0.1))
        turns = Turns(sandbox, settings)
        yield turns, _runner(sandbox)
        turns.close()


async def _boom(*_: Any, **__: Any) -> Any:
    raise RuntimeError("injected fault")


def _objects(chart_repo: ChartRepo, repo: Repo) -> list[tuple[str, str, dict[str, Any], Any]]:
    """(kubectl kind, Kind, manifest, the class or module whose reconcile/finalize the fault replaces) for one
    resource of each kind."""
    chart = {"repository": {"url": chart_repo.url, "name": "demo", "version": "0.1.0"}}
    return [
        ("hr", "HelmRelease", {"apiVersion": GROUP, "kind": "HelmRelease", "metadata": {"name": "web"},
                               "spec": {"interval": "1h", "chart": chart,
                                        "values": {"fullnameOverride": "web"}}}, helmreleases),
        (GITREPO, "GitRepository", {"apiVersion": GROUP, "kind": "GitRepository", "metadata": {"name": "src"},
                                      "spec": {"url": repo.url, "interval": "1h", "ref": {"branch": "main"}}},
         gitrepositories),
        ("csync", "ConfigSync", {"apiVersion": GROUP, "kind": "ConfigSync", "metadata": {"name": "apps"},
                                 "spec": {"sourceRef": {"name": "src"}, "path": "apps", "interval": "1h"}},
         configsyncs),
        ("jenkins", "Jenkins", {"apiVersion": "apps.helmop.dev/v1alpha1", "kind": "Jenkins",
                                "metadata": {"name": "ci"}, "spec": {"project": "p", "interval": "1h"}},
         App),
    ]


def _ready(turns: Turns, ns: str, kind: str, name: str) -> None:
    obj = turns.settle(ns, f"{kind}/{name}")
    assert condition(obj).get("status") == "True", condition(obj)


def _warned(kube: Run, ns: str, name: str, reason: str) -> None:
    """A Warning Event of ``reason`` about ``name``: posted by the turn that wrote the status, there once it ended."""
    events = [e for e in get(kube, ns, "events")["items"] if e["involvedObject"]["name"] == name]
    assert any(e["reason"] == reason and e["type"] == "Warning" for e in events), events


def _cleaned_up(turns: Turns, ns: str, kind: str, name: str) -> dict[str, Any]:
    """The clean-up retried to its end; the object after it ({}: gone). A Jenkins' deletes the HelmRelease it owns
    and goes once that one is gone: the HelmRelease's clean-up is a turn of its own, between two of the Jenkins'."""
    if kind == "Jenkins":
        turns.turn(kind, ns, name)
        assert not turns.turn("HelmRelease", ns, f"{name}-jenkins")
    return turns.turn(kind, ns, name)


def test_an_exception_in_any_kind_is_reported_and_retried(running: tuple[Turns, Run], chart_repo: ChartRepo,
                                                          tmp_path_factory: pytest.TempPathFactory,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    turns, kube = running
    server = GitServer(tmp_path_factory.mktemp("git"))
    try:
        repo = Repo(server, "config", tmp_path_factory.mktemp("work") / "w")
        repo.commit({"apps/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: note}\ndata: {a: b}\n"})
        ns = f"errors-{uuid.uuid4().hex[:5]}"
        kube("kubectl", "create", "namespace", ns)
        objects = _objects(chart_repo, repo)
        kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump_all([o[2] for o in objects]))
        for _short, kind, manifest, _target in objects:
            _ready(turns, ns, kind, manifest["metadata"]["name"])

        for _short, kind, manifest, target in objects:  # a reconcile that raises
            name = manifest["metadata"]["name"]
            before = turns.metric("helmop_reconcile_errors_total", kind=kind)
            monkeypatch.setattr(target, "reconcile", _boom)
            failed = turns.turn(kind, ns, name)
            assert condition(failed).get("reason") == "ReconcileError", condition(failed)
            assert "the reconcile raised RuntimeError: injected fault" in condition(failed)["message"]
            assert not condition(failed, "Reconciling")  # no stale "in progress"
            _warned(kube, ns, name, "ReconcileError")
            assert turns.metric("helmop_reconcile_errors_total", kind=kind) > before
            monkeypatch.undo()  # the fault is gone: the retry succeeds
            assert condition(turns.turn(kind, ns, name)).get("status") == "True"

        for short, kind, manifest, target in reversed(objects):  # a clean-up that raises
            name = manifest["metadata"]["name"]
            monkeypatch.setattr(target, "finalize", _boom)
            kube("kubectl", "-n", ns, "delete", short, name, "--wait=false")
            failed = turns.turn(kind, ns, name)
            assert condition(failed).get("reason") == "ReconcileError", condition(failed)
            assert "the clean-up raised RuntimeError: injected fault" in condition(failed)["message"]
            monkeypatch.undo()
            assert not _cleaned_up(turns, ns, kind, name)
        assert json.dumps(get(kube, ns, "events")).count("ReconcileError") >= 8
    finally:
        server.close()


def test_what_an_unexpected_error_quotes_of_a_secret_is_masked(running: tuple[Turns, Run], chart_repo: ChartRepo,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    """An exception may quote anything, a value read from a Secret included: in the condition, the Event
    and the log it is masked like every other message (the secret strings the object's reconcile read)."""
    turns, kube = running
    secret = "s3cr3t-" + uuid.uuid4().hex[:12]
    ns = f"quoted-{uuid.uuid4().hex[:5]}"
    kube("kubectl", "create", "namespace", ns)
    kube("kubectl", "-n", ns, "create", "secret", "generic", "creds", f"--from-literal=values.yaml=password: {secret}")
    chart = {"repository": {"url": chart_repo.url, "name": "demo", "version": "0.1.0"}}
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump(
        {"apiVersion": GROUP, "kind": "HelmRelease", "metadata": {"name": "web"},
         "spec": {"interval": "1h", "chart": chart, "values": {"fullnameOverride": "web"},
                  "valuesFrom": [{"kind": "Secret", "name": "creds"}]}}))
    _ready(turns, ns, "HelmRelease", "web")

    async def quoting(*_: Any, **__: Any) -> Any:
        raise RuntimeError(f"could not use {secret} (upper: {secret.upper()})")

    monkeypatch.setattr(helmreleases, "reconcile", quoting)
    failed = turns.turn("HelmRelease", ns, "web")
    monkeypatch.undo()
    assert condition(failed).get("reason") == "ReconcileError", condition(failed)
    assert "could not use ***" in condition(failed)["message"]
    events = [e["message"] for e in get(kube, ns, "events")["items"]
              if e["reason"] == "ReconcileError"]  # posted by the turn that wrote the status
    assert events
    assert not [m for m in events if secret in m or secret.upper() in m]
    assert secret not in json.dumps(failed) and secret.upper() not in json.dumps(failed)
    logged = "\n".join(r.getMessage() for r in caplog.records)  # the turns' thread logs to the same handlers
    assert "ReconcileError" in logged or "raised RuntimeError" in logged
    assert secret not in logged and secret.upper() not in logged


def test_an_api_error_in_a_releases_reconcile_is_said_in_ready(running: tuple[Turns, Run], chart_repo: ChartRepo,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The API server failing a request a HelmRelease's reconcile makes (here: reading its valuesFrom) leaves
    Ready=False with reason APIError and a Warning Event, never only a log line; it recovers by itself (its
    retry: the next turn)."""
    turns, kube = running
    ns = f"api-{uuid.uuid4().hex[:5]}"
    kube("kubectl", "create", "namespace", ns)
    kube("kubectl", "-n", ns, "create", "configmap", "v", "--from-literal=values.yaml=a: 1")
    chart = {"repository": {"url": chart_repo.url, "name": "demo", "version": "0.1.0"}}

    async def failing(*_: Any, **__: Any) -> Any:
        raise KubeError(500, "InternalError", "etcdserver: leader changed")

    monkeypatch.setattr(inputs, "values_pieces", failing)
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump(
        {"apiVersion": GROUP, "kind": "HelmRelease", "metadata": {"name": "web"},
         "spec": {"interval": "1h", "chart": chart, "valuesFrom": [{"kind": "ConfigMap", "name": "v"}]}}))
    failed = turns.turn("HelmRelease", ns, "web")
    assert condition(failed).get("reason") == "APIError", condition(failed)
    assert condition(failed)["message"] == "the API server answered 500: etcdserver: leader changed"
    _warned(kube, ns, "web", "APIError")
    monkeypatch.undo()
    assert condition(turns.turn("HelmRelease", ns, "web")).get("status") == "True"
