"""Whether an object of a release is healthy, as kstatus judges it (Current, InProgress, Failed), with
CEL expressions (spec.healthCheckExprs) for kinds kstatus cannot judge. Pure: an object in, a verdict
out; the controllers fetch the objects, evaluate the expressions (off the event loop, bounded) and wait.
"""

from __future__ import annotations

import re
from typing import Any

from helmop.api.conditions import condition_of
from helmop.api.errors import SpecError
from helmop.api.helmrelease import HealthExpr
from helmop.api.kinds import APPS_GROUP, FLUX_GROUPS, GROUP

CURRENT, IN_PROGRESS, FAILED = "Current", "InProgress", "Failed"


# What an expression may cost, judged before it ever runs (Kubernetes estimates CEL's cost statically and
# refuses rules over budget): its length, and how deeply comprehensions nest (each level multiplies the
# work by the size of a list: three levels over a few hundred items is already minutes).
MAX_EXPRESSION = 4096
MAX_NESTING = 2
_MACROS = re.compile(r"\.\s*(map|filter|all|exists|exists_one)\s*\(")


def cost_problem(expression: str) -> str:
    """Why ``expression`` is over the cost budget ("" when it is not)."""
    if len(expression) > MAX_EXPRESSION:
        return f"longer than {MAX_EXPRESSION} characters"
    depth, deepest, stack = 0, 0, []
    code = re.sub(r"'(?:\\.|[^'\\])*'|\"(?:\\.|[^\"\\])*\"", "''", expression)  # string literals say nothing
    macros = {m.end() - 1 for m in _MACROS.finditer(code)}
    for i, c in enumerate(code):
        if c == "(":
            stack.append(i in macros)
            depth += i in macros
            deepest = max(deepest, depth)
        elif c == ")" and stack:
            depth -= stack.pop()
    if deepest > MAX_NESTING:
        return f"comprehensions (map, filter, all, exists) nest {deepest} deep; at most {MAX_NESTING} are allowed"
    return ""


def check_exprs(exprs: tuple[HealthExpr, ...]) -> None:
    """SpecError naming the first spec.healthCheckExprs expression that does not compile or is over the
    cost budget."""
    for i, expr in enumerate(exprs):
        for field, text in (("current", expr.current), ("inProgress", expr.in_progress), ("failed", expr.failed)):
            if text:
                check_expression(text, f"spec.healthCheckExprs[{i}].{field}")


def check_expression(text: str, where: str) -> None:
    """SpecError when the CEL expression ``text`` (the field ``where``) does not compile or is over the cost
    budget."""
    problem = cost_problem(text)
    if problem:
        raise SpecError("InvalidSpec", f"{where}: over the cost budget: {problem}")
    # Imported only here: the cel package imports its own CLI (typer, prompt_toolkit), a fifth of a second
    # and megabytes that the CLI and an operator without expressions never need.
    import cel

    try:
        cel.compile(text)
    except ValueError as exc:
        raise SpecError("InvalidSpec", f"{where}: {str(exc).splitlines()[0]}") from None


def expression_for(obj: dict[str, Any], exprs: tuple[HealthExpr, ...]) -> HealthExpr | None:
    """The spec.healthCheckExprs entry that judges ``obj`` (by apiVersion and kind), if any."""
    return next((e for e in exprs if (e.api_version, e.kind) == (obj.get("apiVersion"), obj.get("kind"))), None)


# Kinds kstatus always judges Current once they exist (no status to wait for): not read back after a deploy.
_STATIC = {("v1", "ConfigMap"), ("v1", "Secret"), ("v1", "ServiceAccount"), ("v1", "Endpoints"),
           ("rbac.authorization.k8s.io/v1", "Role"), ("rbac.authorization.k8s.io/v1", "RoleBinding"),
           ("rbac.authorization.k8s.io/v1", "ClusterRole"), ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
           ("networking.k8s.io/v1", "NetworkPolicy"), ("scheduling.k8s.io/v1", "PriorityClass")}


def needs_live(obj: dict[str, Any], exprs: tuple[HealthExpr, ...]) -> bool:
    """Whether the verdict on a deployed object (as its manifest says it) depends on its live state: not for
    kinds kstatus judges Current on sight, nor a Service that is not a LoadBalancer, unless an expression
    of spec.healthCheckExprs judges the kind."""
    if expression_for(obj, exprs) is not None:
        return True
    if (obj.get("apiVersion"), obj.get("kind")) in _STATIC:
        return False
    return not (obj.get("kind") == "Service" and (obj.get("spec") or {}).get("type") != "LoadBalancer")


def by_expression(expr: HealthExpr, failed: bool, current: bool) -> tuple[str, str]:
    """The verdict of an expression entry, given whether its ``failed`` and ``current`` expressions hold."""
    if failed:
        return FAILED, f"healthCheckExprs: failed ({expr.failed})"
    if current:
        return CURRENT, ""
    return IN_PROGRESS, f"healthCheckExprs: not current yet ({expr.current})"


def _generation_observed(obj: dict[str, Any]) -> bool:
    status = obj.get("status") or {}
    return int(status.get("observedGeneration", 0)) >= int(obj["metadata"].get("generation", 0))


def _reports_ready(obj: dict[str, Any]) -> bool:
    """A kind whose controller always reports a Ready condition (helmop's, Flux's): until it has, the object was
    not looked at yet, which is not "current" (kstatus' rule for a status with no conditions)."""
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    return group in (GROUP, APPS_GROUP) or group.endswith(FLUX_GROUPS)


def _replicas(obj: dict[str, Any]) -> int:
    return int((obj.get("spec") or {}).get("replicas", 1))


def _workload(obj: dict[str, Any]) -> tuple[str, str]:
    kind, status = obj.get("kind"), obj.get("status") or {}
    if not _generation_observed(obj):
        return IN_PROGRESS, "the controller has not seen the newest generation yet"
    if kind == "Deployment":
        progressing = condition_of(obj, "Progressing")
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


def _job(obj: dict[str, Any]) -> tuple[str, str]:
    if condition_of(obj, "Failed").get("status") == "True":
        return FAILED, "the Job failed"
    done = condition_of(obj, "Complete").get("status") == "True"
    return (CURRENT, "") if done else (IN_PROGRESS, "the Job has not completed")


def _pod(obj: dict[str, Any]) -> tuple[str, str]:
    phase = (obj.get("status") or {}).get("phase")
    if phase == "Failed":
        return FAILED, "the Pod failed"
    ready = phase == "Succeeded" or condition_of(obj, "Ready").get("status") == "True"
    return (CURRENT, "") if ready else (IN_PROGRESS, f"the Pod is {phase or 'pending'}")


def _claim(obj: dict[str, Any]) -> tuple[str, str]:
    bound = (obj.get("status") or {}).get("phase") == "Bound"
    return (CURRENT, "") if bound else (IN_PROGRESS, "the claim is not bound")


def _service(obj: dict[str, Any]) -> tuple[str, str]:
    """A LoadBalancer waits for its address; any other Service is judged by the generic rules."""
    if (obj.get("spec") or {}).get("type") != "LoadBalancer":
        return _by_conditions(obj)
    assigned = ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress")
    return (CURRENT, "") if assigned else (IN_PROGRESS, "no load balancer assigned")


def _by_conditions(obj: dict[str, Any]) -> tuple[str, str]:
    """kstatus' generic rules for anything else: Stalled/Ready conditions when there are any."""
    if condition_of(obj, "Stalled").get("status") == "True":
        return FAILED, str(condition_of(obj, "Stalled").get("message") or "Stalled")
    ready = condition_of(obj, "Ready")
    if ready and ready.get("status") != "True":
        return IN_PROGRESS, str(ready.get("message") or "not Ready")
    if not ready and _reports_ready(obj):
        return IN_PROGRESS, "its controller has not reported Ready yet"
    if "observedGeneration" in (obj.get("status") or {}) and not _generation_observed(obj):
        return IN_PROGRESS, "the controller has not seen the newest generation yet"
    return CURRENT, ""


# kstatus' rules by kind (kinds not named here: by their conditions)
_BY_KIND = {"Deployment": _workload, "StatefulSet": _workload, "DaemonSet": _workload, "ReplicaSet": _workload,
            "Job": _job, "Pod": _pod, "PersistentVolumeClaim": _claim, "Service": _service}


def judge(obj: dict[str, Any]) -> tuple[str, str]:
    """(Current | InProgress | Failed, why) for one live object, by kstatus' rules for its kind."""
    return _BY_KIND.get(str(obj.get("kind")), _by_conditions)(obj)
