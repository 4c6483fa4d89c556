"""Whether an object of a release is healthy, as kstatus judges it (Current, InProgress, Failed), with
CEL expressions (spec.healthCheckExprs, evaluated by the ``cel`` library) for kinds kstatus cannot
judge. Pure: an object in, a verdict out; the controllers fetch the objects and wait.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import cel

from helmop.api.helmrelease import HealthExpr, SpecError

CURRENT, IN_PROGRESS, FAILED = "Current", "InProgress", "Failed"


@lru_cache(maxsize=256)
def _program(expression: str) -> Any:
    return cel.compile(expression)


def check_exprs(exprs: tuple[HealthExpr, ...]) -> None:
    """SpecError naming the first spec.healthCheckExprs expression that does not compile."""
    for i, expr in enumerate(exprs):
        for field, text in (("current", expr.current), ("inProgress", expr.in_progress), ("failed", expr.failed)):
            try:
                if text:
                    _program(text)
            except ValueError as exc:
                raise SpecError("InvalidSpec", f"spec.healthCheckExprs[{i}].{field}: "
                                               f"{str(exc).splitlines()[0]}") from None


def _true(expression: str, obj: dict[str, Any]) -> bool:
    if not expression:
        return False
    try:
        return _program(expression).execute({"self": obj}) is True
    except (KeyError, ValueError, TypeError):  # a field the object does not have yet: not true (yet)
        return False


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), {})


def _generation_observed(obj: dict[str, Any]) -> bool:
    status = obj.get("status") or {}
    return int(status.get("observedGeneration", 0)) >= int(obj["metadata"].get("generation", 0))


def _replicas(obj: dict[str, Any]) -> int:
    return int((obj.get("spec") or {}).get("replicas", 1))


def _workload(obj: dict[str, Any]) -> tuple[str, str]:
    kind, status = obj.get("kind"), obj.get("status") or {}
    if not _generation_observed(obj):
        return IN_PROGRESS, "the controller has not seen the newest generation yet"
    if kind == "Deployment":
        progressing = _condition(obj, "Progressing")
        if progressing.get("reason") == "ProgressDeadlineExceeded":
            return FAILED, "progress deadline exceeded"
        ready = min(int(status.get("updatedReplicas", 0)), int(status.get("availableReplicas", 0)))
    elif kind == "StatefulSet":
        if status.get("updateRevision") and status.get("currentRevision") != status.get("updateRevision"):
            return IN_PROGRESS, "rolling out a new revision"
        ready = int(status.get("readyReplicas", 0))
    elif kind == "DaemonSet":
        wanted = int(status.get("desiredNumberScheduled", 0))
        ready = min(int(status.get("numberReady", 0)), int(status.get("updatedNumberScheduled", 0)))
        return (CURRENT, "") if ready >= wanted else (IN_PROGRESS, f"{ready}/{wanted} ready")
    else:  # ReplicaSet
        ready = int(status.get("readyReplicas", 0))
    wanted = _replicas(obj)
    return (CURRENT, "") if ready >= wanted else (IN_PROGRESS, f"{ready}/{wanted} replicas ready")


def judge(obj: dict[str, Any], exprs: tuple[HealthExpr, ...] = ()) -> tuple[str, str]:
    """(Current | InProgress | Failed, why) for one live object."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    for expr in exprs:
        if (expr.api_version, expr.kind) == (api_version, kind):
            if _true(expr.failed, obj):
                return FAILED, f"healthCheckExprs: failed ({expr.failed})"
            if _true(expr.current, obj):
                return CURRENT, ""
            return IN_PROGRESS, f"healthCheckExprs: not current yet ({expr.current})"
    status = obj.get("status") or {}
    if kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"):
        return _workload(obj)
    if kind == "Job":
        if _condition(obj, "Failed").get("status") == "True":
            return FAILED, "the Job failed"
        done = _condition(obj, "Complete").get("status") == "True"
        return (CURRENT, "") if done else (IN_PROGRESS, "the Job has not completed")
    if kind == "Pod":
        phase = status.get("phase")
        if phase == "Failed":
            return FAILED, "the Pod failed"
        ready = phase == "Succeeded" or _condition(obj, "Ready").get("status") == "True"
        return (CURRENT, "") if ready else (IN_PROGRESS, f"the Pod is {phase or 'pending'}")
    if kind == "PersistentVolumeClaim":
        return (CURRENT, "") if status.get("phase") == "Bound" else (IN_PROGRESS, "the claim is not bound")
    if kind == "Service" and (obj.get("spec") or {}).get("type") == "LoadBalancer":
        assigned = (status.get("loadBalancer") or {}).get("ingress")
        return (CURRENT, "") if assigned else (IN_PROGRESS, "no load balancer assigned")
    # kstatus' generic rules for anything else: Stalled/Ready conditions when there are any
    if _condition(obj, "Stalled").get("status") == "True":
        return FAILED, str(_condition(obj, "Stalled").get("message") or "Stalled")
    ready = _condition(obj, "Ready")
    if ready and ready.get("status") != "True":
        return IN_PROGRESS, str(ready.get("message") or "not Ready")
    if "observedGeneration" in status and not _generation_observed(obj):
        return IN_PROGRESS, "the controller has not seen the newest generation yet"
    return CURRENT, ""
