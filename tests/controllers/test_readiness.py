"""Who waits for a release's objects: helmop from one shared watch per kind and namespace (helm runs with
--wait=hookOnly, helm 3 without --wait), or helm's own --wait where the chart has post-install/post-upgrade
hooks, which helm runs after its wait. Judged through the real operator, helm and the sandbox's audit."""

from __future__ import annotations

import time
import uuid
from datetime import datetime
from typing import Any

import pytest

from tests.controllers.conftest import ChartRepo, Operator, apply, condition, eventually, get, helm_calls, hr, ready
from tests.tools import Run

SLOW_DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  annotations: {sandbox.helmop.dev/ready-delay: "2"}
spec:
  replicas: 1
  selector: {matchLabels: {app: {{ .Release.Name }}}}
  template:
    metadata: {labels: {app: {{ .Release.Name }}}}
    spec: {containers: [{name: app, image: "nginx:1"}]}
"""
POST_INSTALL_JOB = """apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-migrate
  annotations:
    "helm.sh/hook": post-install,post-upgrade
spec:
  template:
    spec: {restartPolicy: Never, containers: [{name: migrate, image: busybox, command: ["true"]}]}
"""


def _at(obj: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(obj["metadata"]["creationTimestamp"].replace("Z", "+00:00"))


def _upgrades(operator: Operator, release: str) -> list[list[str]]:
    return [args for args, _ in helm_calls(operator.values_log, release) if args[0] == "upgrade"]


@pytest.mark.helm_versions
def test_releases_without_post_hooks_are_judged_from_one_shared_watch(operator: Operator, kube: Run, ns: str,
                                                                      chart_repo: ChartRepo) -> None:
    chart = f"slowweb-{uuid.uuid4().hex[:5]}"
    chart_repo.publish(chart, "0.1.0", templates={"deployment.yaml": SLOW_DEPLOYMENT})
    started = time.monotonic()
    for name in ("a", "b", "c"):
        apply(kube, ns, hr(name, chart_repo, chart=chart, version="0.1.0"))
    for name in ("a", "b", "c"):
        obj = ready(kube, ns, name)
        assert obj["status"]["readinessCheck"] == {"by": "helmop"}
        # Ready only once the Deployment was (2 s after it was created), not when helm returned
        assert get(kube, ns, "deploy", name)["status"]["availableReplicas"] == 1
        args = _upgrades(operator, name)[-1]
        assert "--wait=watcher" not in args and "--wait" not in args
        assert ("--wait=hookOnly" in args) == (operator.helm == "helm")
    assert time.monotonic() - started >= 2
    # one watch of the namespace's Deployments for the three releases (helm's --wait would start one each)
    asked = [(a.verb, a.resource, a.namespace) for _, a in operator.sandbox.audit]
    assert asked.count(("watch", "deployments", ns)) == 1


@pytest.mark.helm_versions
def test_a_chart_with_a_post_install_hook_gets_helms_wait(operator: Operator, kube: Run, ns: str,
                                                         chart_repo: ChartRepo) -> None:
    chart = f"migrating-{uuid.uuid4().hex[:5]}"
    chart_repo.publish(chart, "0.1.0", templates={"deployment.yaml": SLOW_DEPLOYMENT, "migrate.yaml": POST_INSTALL_JOB})
    apply(kube, ns, hr("db", chart_repo, chart=chart, version="0.1.0"))
    obj = ready(kube, ns, "db")
    check = obj["status"]["readinessCheck"]
    assert check["by"] == "helm" and "templates/migrate.yaml has a post-install or post-upgrade hook" in check["reason"]
    args = _upgrades(operator, "db")[-1]
    assert ("--wait=watcher" if operator.helm == "helm" else "--wait") in args
    # helm ran the hook after the Deployment was ready (2 s after it was created), as it does by hand
    hook, deployment = get(kube, ns, "job", "db-migrate"), get(kube, ns, "deploy", "db")
    assert (_at(hook) - _at(deployment)).total_seconds() >= 1
    assert condition(obj)["reason"] == "InstallSucceeded"


def test_disabled_wait_is_said_in_status(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo) -> None:
    apply(kube, ns, hr("quick", chart_repo, version="0.1.0", install={"disableWait": True}))
    assert ready(kube, ns, "quick")["status"]["readinessCheck"] == {"by": "none"}


def test_the_operator_says_how_many_turns_run_and_wait(operator: Operator, kube: Run, ns: str,
                                                       chart_repo: ChartRepo) -> None:
    """helmop_turns_running counts a release waiting for its objects; with helmop_turns_waiting, 0 once nothing
    is left to do (what a benchmark waits for before it measures a pass that should do nothing)."""
    chart = f"slowweb-{uuid.uuid4().hex[:5]}"
    chart_repo.publish(chart, "0.1.0", templates={"deployment.yaml": SLOW_DEPLOYMENT})
    apply(kube, ns, hr("busy", chart_repo, chart=chart, version="0.1.0"))
    eventually(lambda: operator.metric("helmop_turns_running") >= 1)  # its Deployment is Ready after 2 s
    ready(kube, ns, "busy")
    eventually(lambda: operator.metric("helmop_turns_running") + operator.metric("helmop_turns_waiting") == 0)
