"""Whether an object that another depends on (spec.dependsOn may name any kind) counts as ready, and if not, why
in a few words a status message can carry. Pure: the object as read from the API in, a reason out ("" when
ready).

It follows kstatus' rules for "Current" (sigs.k8s.io/cli-utils/pkg/kstatus), with one exception: a Job is ready
only once it has completed (kstatus counts a running Job as Current, but what depends on a Job, a migration say,
waits for its result). kstatus' caveat holds too: an object without a status it can judge (a ConfigMap, or a
custom resource whose controller reports no conditions) counts as ready as soon as it exists; readyExpr is how
to ask more of such a kind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from helmop.api.conditions import READY, RECONCILING, STALLED
from helmop.api.kinds import APPS_GROUP, GROUP

_MESSAGE = 200  # a condition's message quoted in a reason: its first line, at most this long


def readiness(obj: dict[str, Any] | None) -> str:
    """"" when ``obj`` counts as ready for what depends on it; else why not, in a few words a status message can
    carry (e.g. "not found", "being deleted", "Ready is False (InstallFailed: ...)", "generation 3 not observed
    yet (observed 2)", "rolling out: 1 of 3 replicas updated", "Job not complete", "CRD not Established")."""
    if obj is None:
        return "not found"
    meta, status = _mapping(obj.get("metadata")), _mapping(obj.get("status"))
    if meta.get("deletionTimestamp"):
        return "being deleted"
    generic = _generic(meta, status)
    if generic:
        return generic
    group = str(obj.get("apiVersion") or "").rpartition("/")[0]
    by_kind = _BY_KIND.get((group, str(obj.get("kind"))))
    if by_kind is not None:
        return by_kind(_mapping(obj.get("spec")), status)
    return _ready_condition(meta, status, required=_reports_ready(group, str(obj.get("kind"))))


# helmop's and Flux's kinds whose controller writes no Ready condition (notifications' Providers and Alerts)
NO_READY = frozenset({"Provider", "Alert"})


def _reports_ready(group: str, kind: str) -> bool:
    """helmop's kinds and Flux's (but :data:`NO_READY`) get a Ready condition from their controller: until then,
    not ready (Flux's dependsOn asks Ready=True of its kinds)."""
    return (group in (GROUP, APPS_GROUP) or group.endswith("toolkit.fluxcd.io")) and kind not in NO_READY


def _generic(meta: dict[str, Any], status: dict[str, Any]) -> str:
    """kstatus' checks for any kind: the newest generation observed, no Reconciling or Stalled condition."""
    seen, generation = status.get("observedGeneration"), meta.get("generation")
    if seen is not None and generation is not None and seen != generation:
        return f"generation {generation} not observed yet (observed {seen})"
    reconciling = _condition(status, RECONCILING)
    if reconciling.get("status") == "True":
        return f"in progress{_detail(reconciling)}"
    stalled = _condition(status, STALLED)
    if stalled.get("status") == "True":
        return f"stalled{_detail(stalled)}"
    return ""


def _ready_condition(meta: dict[str, Any], status: dict[str, Any], required: bool) -> str:
    """A Ready condition, when there is one (or must be one), says: True, and for the newest generation."""
    ready = _condition(status, READY)
    if not ready:
        return "no Ready condition yet" if required else ""
    if ready.get("status") != "True":
        return f"Ready is {ready.get('status') or 'unset'}{_detail(ready)}"
    seen, generation = ready.get("observedGeneration"), meta.get("generation")
    if seen is not None and generation is not None and seen != generation:
        return f"Ready is for generation {seen}, not yet for {generation}"
    return ""


def _deployment(spec: dict[str, Any], status: dict[str, Any]) -> str:
    progressing = _condition(status, "Progressing")
    if progressing.get("reason") == "ProgressDeadlineExceeded":
        return f"failed: progress deadline exceeded{_detail(progressing)}"
    want, have = _int(spec, "replicas", 1), _int(status, "replicas")
    if have < want:
        return f"rolling out: {have} of {want} replicas created"
    if have > want:
        return f"rolling out: {have - want} old replicas terminating"
    for field, word in (("updatedReplicas", "updated"), ("availableReplicas", "available"),
                        ("readyReplicas", "ready")):
        if _int(status, field) != want:
            return f"rolling out: {_int(status, field)} of {want} replicas {word}"
    available = _condition(status, "Available")
    if available and available.get("status") != "True":
        return f"Available is {available.get('status') or 'unset'}{_detail(available)}"
    return ""


def _statefulset(spec: dict[str, Any], status: dict[str, Any]) -> str:
    want, have = _int(spec, "replicas", 1), _int(status, "replicas")
    if have < want:
        return f"rolling out: {have} of {want} replicas created"
    if have > want:
        return f"rolling out: {have - want} old replicas terminating"
    if _int(status, "readyReplicas") != want:
        return f"rolling out: {_int(status, 'readyReplicas')} of {want} replicas ready"
    strategy = _mapping(spec.get("updateStrategy"))
    if strategy.get("type") == "OnDelete":
        return ""  # pods are replaced only when someone deletes them: waiting for updated ones could be forever
    partition = _int(_mapping(strategy.get("rollingUpdate")), "partition")
    if partition > 0:  # only the pods from the partition up are updated: kstatus asks no more
        updated, wanted = _int(status, "updatedReplicas"), max(want - partition, 0)
        return "" if updated >= wanted else f"rolling out: {updated} of {wanted} replicas updated (partition)"
    return _statefulset_revision(want, status)


def _statefulset_revision(want: int, status: dict[str, Any]) -> str:
    for field, word in (("updatedReplicas", "updated"), ("currentReplicas", "current")):
        if _int(status, field) != want:
            return f"rolling out: {_int(status, field)} of {want} replicas {word}"
    current, update = status.get("currentRevision"), status.get("updateRevision")
    if current and update and current != update:
        return f"rolling out: revision {update} not current yet (current {current})"
    return ""


def _daemonset(_spec: dict[str, Any], status: dict[str, Any]) -> str:
    # As kstatus: until the controller has reported, zero pods wanted is not known to be the truth.
    if "observedGeneration" not in status or "desiredNumberScheduled" not in status:
        return "DaemonSet not observed yet"
    want = _int(status, "desiredNumberScheduled")
    for field, word in (("updatedNumberScheduled", "updated"), ("numberAvailable", "available"),
                        ("numberReady", "ready")):
        if _int(status, field) != want:
            return f"rolling out: {_int(status, field)} of {want} pods {word}"
    return ""


def _job(_spec: dict[str, Any], status: dict[str, Any]) -> str:
    failed = _condition(status, "Failed")
    if failed.get("status") == "True":
        return f"Job failed{_detail(failed)}"
    return "" if _condition(status, "Complete").get("status") == "True" else "Job not complete"


def _crd(_spec: dict[str, Any], status: dict[str, Any]) -> str:
    names = _condition(status, "NamesAccepted")
    if names.get("status") == "False":
        return f"CRD names not accepted{_detail(names)}"
    return "" if _condition(status, "Established").get("status") == "True" else "CRD not Established"


def _pod(_spec: dict[str, Any], status: dict[str, Any]) -> str:
    """A Pod that ran to completion is done (its Ready turns False then); one that failed is not ready."""
    phase = status.get("phase")
    if phase == "Succeeded":
        return ""
    if phase == "Failed":
        return f"Pod failed{_detail(status)}"
    return _ready_condition({}, status, required=True)


# Kinds judged by their own status (by API group and kind, any version); any other kind by its Ready condition.
_BY_KIND: dict[tuple[str, str], Callable[[dict[str, Any], dict[str, Any]], str]] = {
    ("apps", "Deployment"): _deployment,
    ("apps", "StatefulSet"): _statefulset,
    ("apps", "DaemonSet"): _daemonset,
    ("batch", "Job"): _job,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): _crd,
    ("", "Pod"): _pod,
}


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        return {}
    return next((c for c in conditions if isinstance(c, dict) and c.get("type") == kind), {})


def _detail(condition: dict[str, Any]) -> str:
    """" (Reason: message)" of a condition (or of a status with reason and message), as much as it has."""
    reason = str(condition.get("reason") or "")
    lines = str(condition.get("message") or "").strip().splitlines()
    message = lines[0] if lines else ""
    if len(message) > _MESSAGE:
        message = message[: _MESSAGE - 1] + "…"
    text = ": ".join(part for part in (reason, message) if part)
    return f" ({text})" if text else ""


def _mapping(value: object) -> dict[str, Any]:
    """A field that should be an object ({} when it is missing or malformed, as a custom resource's may be)."""
    return value if isinstance(value, dict) else {}


def _int(fields: dict[str, Any], name: str, default: int = 0) -> int:
    value = fields.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else default
