"""kstatus-style health of a release's objects, and CEL expressions for kinds kstatus cannot judge."""

from __future__ import annotations

from typing import Any

import pytest

from helmop.api.errors import SpecError
from helmop.api.helmrelease import HealthExpr
from helmop.decisions.health import (
    CURRENT,
    FAILED,
    IN_PROGRESS,
    by_expression,
    check_exprs,
    expression_for,
    judge,
    needs_live,
)
from helmop.infra.worker import Worker, WorkerTimeout


def obj(kind: str, spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None,
        api_version: str = "apps/v1", generation: int = 2) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x", "generation": generation},
            "spec": spec or {}, "status": status or {}}


@pytest.mark.parametrize("thing,verdict", [
    (obj("Deployment", {"replicas": 2}, {"observedGeneration": 2, "updatedReplicas": 2, "availableReplicas": 2}),
     CURRENT),
    (obj("Deployment", {"replicas": 2}, {"observedGeneration": 1, "updatedReplicas": 2, "availableReplicas": 2}),
     IN_PROGRESS),
    (obj("Deployment", {"replicas": 2}, {"observedGeneration": 2, "updatedReplicas": 2, "availableReplicas": 1}),
     IN_PROGRESS),
    (obj("Deployment", {}, {"observedGeneration": 2, "conditions": [
        {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]}), FAILED),
    (obj("StatefulSet", {"replicas": 1}, {"observedGeneration": 2, "readyReplicas": 1, "currentRevision": "a",
                                          "updateRevision": "b"}), IN_PROGRESS),
    (obj("Job", api_version="batch/v1", status={"conditions": [{"type": "Complete", "status": "True"}]}), CURRENT),
    (obj("Job", api_version="batch/v1", status={"conditions": [{"type": "Failed", "status": "True"}]}), FAILED),
    (obj("PersistentVolumeClaim", api_version="v1", status={"phase": "Pending"}), IN_PROGRESS),
    (obj("Service", {"type": "LoadBalancer"}, api_version="v1"), IN_PROGRESS),
    (obj("Service", {"type": "ClusterIP"}, api_version="v1"), CURRENT),
    (obj("ConfigMap", api_version="v1"), CURRENT),
    (obj("Widget", api_version="x.io/v1", status={"conditions": [{"type": "Ready", "status": "False"}]}),
     IN_PROGRESS),
    (obj("Widget", api_version="x.io/v1", status={"conditions": [{"type": "Stalled", "status": "True"}]}), FAILED),
    (obj("Widget", api_version="x.io/v1"), CURRENT),  # kstatus: no conditions at all
    # a HelmRelease (helmop's or Flux's) nobody has reconciled yet is not current: its controller reports Ready
    (obj("HelmRelease", api_version="helmop.dev/v1alpha1"), IN_PROGRESS),
    (obj("HelmRelease", api_version="helm.toolkit.fluxcd.io/v2"), IN_PROGRESS),
    (obj("HelmRelease", api_version="helm.toolkit.fluxcd.io/v2", status={
        "observedGeneration": 2, "conditions": [{"type": "Ready", "status": "True"}]}), CURRENT),
])
def test_kstatus_rules(thing: dict[str, Any], verdict: str) -> None:
    assert judge(thing)[0] == verdict


async def test_cel_expressions_decide_for_their_kind() -> None:
    expr = HealthExpr("x.io/v1", "Gizmo", current="self.status.phase == 'Ready'",
                      failed="has(self.status.error) && self.status.error != ''")
    worker = Worker()

    async def verdict(thing: dict[str, Any]) -> str:
        assert expression_for(thing, (expr,)) is expr
        failed, current = await worker.evaluate([expr.failed, expr.current], thing)
        return by_expression(expr, failed, current)[0]

    try:
        assert await verdict(obj("Gizmo", api_version="x.io/v1")) == IN_PROGRESS  # no status yet: not an error
        assert await verdict(obj("Gizmo", api_version="x.io/v1", status={"phase": "Ready"})) == CURRENT
        assert await verdict(obj("Gizmo", api_version="x.io/v1", status={"phase": "Ready", "error": "boom"})) == FAILED
    finally:
        await worker.close()
    assert expression_for(obj("Deployment"), (expr,)) is None
    with pytest.raises(SpecError, match=r"healthCheckExprs\[0\]\.failed"):
        check_exprs((HealthExpr("x.io/v1", "Gizmo", current="true", failed="self.status =="),))


NESTED = "[1,2,3,4,5,6,7,8,9,10].map(a, [1,2,3,4,5,6,7,8,9,10].map(b, [1,2,3,4,5,6,7,8,9,10].map(c, a+b+c)))"


@pytest.mark.parametrize("expression,problem", [
    (NESTED + ".size() > 0", "nest 3 deep"),
    ("'" + "x" * 5000 + "' == self.kind", "longer than 4096"),
    ("self.items.all(i, i.names.exists(n, n == 'a'))", ""),  # two levels: allowed
    ("self.note == '.map(.map(.map('", ""),  # in a string literal: not a comprehension
])
def test_cost_budget_is_judged_before_running(expression: str, problem: str) -> None:
    if problem:
        with pytest.raises(SpecError, match=problem):
            check_exprs((HealthExpr("x.io/v1", "Gizmo", current=expression),))
    else:
        check_exprs((HealthExpr("x.io/v1", "Gizmo", current=expression),))


async def test_a_runaway_expression_is_stopped_and_the_worker_recovers() -> None:
    """Two levels of comprehension pass the static budget but can still be slow over big lists: the
    evaluation is cut at the time limit in the child process, and the next evaluation gets a new child."""
    worker = Worker(timeout=0.5)
    slow = "self.spec.xs.map(a, self.spec.xs.map(b, a * b)).size() > 0"
    big = obj("Gizmo", {"xs": list(range(3000))}, api_version="x.io/v1")
    try:
        with pytest.raises(WorkerTimeout):
            await worker.evaluate([slow], big)
        assert await worker.evaluate(["self.kind == 'Gizmo'"], big) == [True]
    finally:
        await worker.close()


@pytest.mark.parametrize("manifest,live", [
    (obj("Deployment"), True),
    (obj("ConfigMap", api_version="v1"), False),
    (obj("Secret", api_version="v1"), False),
    (obj("ClusterRole", api_version="rbac.authorization.k8s.io/v1"), False),
    (obj("Service", {"type": "ClusterIP"}, api_version="v1"), False),
    (obj("Service", {"type": "LoadBalancer"}, api_version="v1"), True),
    (obj("Widget", api_version="example.com/v1"), True),  # a custom resource may have a Ready condition
])
def test_only_objects_whose_verdict_can_change_are_read_back(manifest: dict[str, Any], live: bool) -> None:
    assert needs_live(manifest, ()) is live


def test_an_expression_makes_any_kind_read_back() -> None:
    config = obj("ConfigMap", api_version="v1")
    assert needs_live(config, (HealthExpr("v1", "ConfigMap", current="has(self.data)"),))
