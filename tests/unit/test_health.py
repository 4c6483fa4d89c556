"""kstatus-style health of a release's objects, and CEL expressions for kinds kstatus cannot judge."""

from __future__ import annotations

from typing import Any

import pytest

from helmop.api.helmrelease import HealthExpr, SpecError
from helmop.reconcile.health import CURRENT, FAILED, IN_PROGRESS, check_exprs, judge


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
])
def test_kstatus_rules(thing: dict[str, Any], verdict: str) -> None:
    assert judge(thing)[0] == verdict


def test_cel_expressions_decide_for_their_kind() -> None:
    exprs = (HealthExpr("x.io/v1", "Gizmo", current="self.status.phase == 'Ready'",
                        failed="has(self.status.error) && self.status.error != ''"),)
    assert judge(obj("Gizmo", api_version="x.io/v1"), exprs)[0] == IN_PROGRESS  # no status yet: not an error
    assert judge(obj("Gizmo", api_version="x.io/v1", status={"phase": "Ready"}), exprs)[0] == CURRENT
    assert judge(obj("Gizmo", api_version="x.io/v1", status={"phase": "Ready", "error": "boom"}), exprs)[0] == FAILED
    with pytest.raises(SpecError, match=r"healthCheckExprs\[0\]\.failed"):
        check_exprs((HealthExpr("x.io/v1", "Gizmo", current="true", failed="self.status =="),))
