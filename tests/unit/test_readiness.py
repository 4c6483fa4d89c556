"""Whether an object something depends on counts as ready (kstatus' Current, a Job only once complete), and the
reason given when it does not."""

from __future__ import annotations

from typing import Any

import pytest

from helmop.decisions.readiness import readiness


def obj(api_version: str, kind: str, *, spec: dict[str, Any] | None = None, status: Any = None,
        generation: int | None = 3, **metadata: Any) -> dict[str, Any]:
    meta = {"name": "x", "namespace": "apps", **metadata}
    if generation is not None:
        meta["generation"] = generation
    thing: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": meta}
    if spec is not None:
        thing["spec"] = spec
    if status is not None:
        thing["status"] = status
    return thing


def cond(kind: str, status: str, reason: str = "", message: str = "", **more: Any) -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message, **more}


def widget(*conditions: dict[str, Any], **status: Any) -> dict[str, Any]:
    """A custom resource of no kind helmop knows."""
    return obj("example.com/v1", "Widget", spec={}, status={"conditions": list(conditions), **status})


def deployment(want: int | None = 3, conditions: tuple[dict[str, Any], ...] = (), **counts: int) -> dict[str, Any]:
    """spec.replicas ``want`` (None: unset), every count of the status ``want`` but those given."""
    status: dict[str, Any] = {"observedGeneration": 3, "conditions": list(conditions)}
    for field in ("replicas", "updatedReplicas", "availableReplicas", "readyReplicas"):
        status[field] = counts.get(field, 1 if want is None else want)
    return obj("apps/v1", "Deployment", spec={} if want is None else {"replicas": want}, status=status)


def statefulset(strategy: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    status = {"observedGeneration": 3, "replicas": 3, "readyReplicas": 3, "updatedReplicas": 3,
              "currentReplicas": 3, "currentRevision": "web-7", "updateRevision": "web-7", **fields}
    spec: dict[str, Any] = {"replicas": 3, **({"updateStrategy": strategy} if strategy else {})}
    return obj("apps/v1", "StatefulSet", spec=spec, status=status)


def daemonset(**fields: int) -> dict[str, Any]:
    status = {"observedGeneration": 3, "desiredNumberScheduled": 2, "currentNumberScheduled": 2,
              "updatedNumberScheduled": 2, "numberAvailable": 2, "numberReady": 2, **fields}
    return obj("apps/v1", "DaemonSet", spec={}, status=status)


def job(*conditions: dict[str, Any]) -> dict[str, Any]:
    return obj("batch/v1", "Job", spec={}, status={"active": 1, "conditions": list(conditions)}, generation=1)


def crd(*conditions: dict[str, Any]) -> dict[str, Any]:
    return obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", spec={}, status={"conditions": list(conditions)})


def pod(phase: str, *conditions: dict[str, Any], **status: Any) -> dict[str, Any]:
    return obj("v1", "Pod", spec={}, status={"phase": phase, "conditions": list(conditions), **status},
               generation=None)


def kind_of(api_version: str, kind: str, *conditions: dict[str, Any], generation: int = 3) -> dict[str, Any]:
    return obj(api_version, kind, spec={}, status={"conditions": list(conditions)}, generation=generation)


READY = [
    # 1. present, not being deleted
    pytest.param(obj("v1", "ConfigMap", generation=None), id="present"),
    # 2. the newest generation observed (or no observedGeneration to compare)
    pytest.param(widget(observedGeneration=3), id="generation-observed"),
    pytest.param(obj("example.com/v1", "Widget", status={"observedGeneration": 2}, generation=None),
                 id="generation-unknown"),
    # 3. Reconciling and Stalled only count when True
    pytest.param(widget(cond("Reconciling", "False"), cond("Stalled", "False")), id="not-reconciling-or-stalled"),
    # Deployment
    pytest.param(deployment(conditions=(cond("Available", "True"), cond("Progressing", "True",
                                                                         "NewReplicaSetAvailable"))),
                 id="deployment-rolled-out"),
    pytest.param(deployment(None), id="deployment-default-one-replica"),
    pytest.param(obj("apps/v1", "Deployment", spec={"replicas": 0}, status={"observedGeneration": 3}),
                 id="deployment-scaled-to-zero"),
    # StatefulSet
    pytest.param(statefulset(), id="statefulset-rolled-out"),
    pytest.param(statefulset(updateRevision=None), id="statefulset-one-revision-known"),
    pytest.param(statefulset({"type": "OnDelete"}, updatedReplicas=0, currentReplicas=3, updateRevision="web-8"),
                 id="statefulset-ondelete-waits-for-no-one"),
    pytest.param(statefulset({"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}, updatedReplicas=1,
                             currentReplicas=2, updateRevision="web-8"), id="statefulset-partition-rolled-out"),
    # DaemonSet
    pytest.param(daemonset(), id="daemonset-rolled-out"),
    pytest.param(daemonset(desiredNumberScheduled=0, currentNumberScheduled=0, updatedNumberScheduled=0,
                           numberAvailable=0, numberReady=0), id="daemonset-on-no-node"),
    # Job: complete only
    pytest.param(job(cond("SuccessCriteriaMet", "True"), cond("Complete", "True")), id="job-complete"),
    # CustomResourceDefinition
    pytest.param(crd(cond("NamesAccepted", "True"), cond("Established", "True")), id="crd-established"),
    # a Ready condition: True, for the newest generation when it says which
    pytest.param(widget(cond("Ready", "True")), id="ready-true"),
    pytest.param(widget(cond("Ready", "True", observedGeneration=3)), id="ready-for-this-generation"),
    pytest.param(kind_of("helm.toolkit.fluxcd.io/v2", "HelmRelease", cond("Ready", "True")), id="flux-ready"),
    pytest.param(kind_of("source.toolkit.fluxcd.io/v1", "GitRepository", cond("Ready", "True")),
                 id="flux-source-ready"),
    pytest.param(kind_of("helmop.dev/v1alpha1", "HelmRelease", cond("Ready", "True", observedGeneration=3)),
                 id="helmop-ready"),
    pytest.param(kind_of("apps.helmop.dev/v1alpha1", "Jenkins", cond("Ready", "True")), id="helmop-app-ready"),
    pytest.param(pod("Running", cond("Ready", "True")), id="pod-ready"),
    pytest.param(pod("Succeeded", cond("Ready", "False", "PodCompleted")), id="pod-succeeded"),
    # anything else: present is enough (kstatus' caveat: readyExpr asks more)
    pytest.param(obj("v1", "Secret", generation=None), id="secret"),
    pytest.param(obj("v1", "Service", spec={"type": "ClusterIP"}, status={"loadBalancer": {}}), id="service"),
    pytest.param(widget(), id="custom-kind-without-conditions"),
    pytest.param(obj("example.com/v1", "Widget", status="not an object"), id="custom-kind-malformed-status"),
]


NOT_READY = [
    # 1.
    pytest.param(None, ("not found",), id="missing"),
    pytest.param(obj("v1", "ConfigMap", deletionTimestamp="2024-01-01T00:00:00Z"), ("being deleted",),
                 id="being-deleted"),
    # 2. checked before anything of the kind: a rolled-out Deployment of an older generation is not this one
    pytest.param(deployment() | {"metadata": {"name": "x", "generation": 4}}, ("generation 4 not observed yet",
                                                                               "observed 3"),
                 id="generation-not-observed"),
    # 3.
    pytest.param(widget(cond("Reconciling", "True", "Progressing", "upgrading to 1.2.0"), cond("Ready", "True")),
                 ("in progress", "upgrading to 1.2.0"), id="reconciling"),
    pytest.param(widget(cond("Stalled", "True", "InvalidSpec", "spec.chart is required")),
                 ("stalled", "InvalidSpec", "spec.chart is required"), id="stalled"),
    # Deployment
    pytest.param(obj("apps/v1", "Deployment", spec={}), ("rolling out", "0 of 1 replicas created"),
                 id="deployment-not-started"),
    pytest.param(deployment(updatedReplicas=1), ("rolling out: 1 of 3 replicas updated",), id="deployment-updating"),
    pytest.param(deployment(replicas=4), ("rolling out", "1 old replicas terminating"),
                 id="deployment-old-replicas-left"),
    pytest.param(deployment(availableReplicas=2), ("2 of 3 replicas available",), id="deployment-unavailable"),
    pytest.param(deployment(readyReplicas=2), ("2 of 3 replicas ready",), id="deployment-not-ready"),
    pytest.param(deployment(conditions=(cond("Progressing", "False", "ProgressDeadlineExceeded",
                                             'ReplicaSet "web-5d" has timed out progressing.'),)),
                 ("failed", "progress deadline exceeded", 'ReplicaSet "web-5d" has timed out'),
                 id="deployment-deadline-exceeded"),
    pytest.param(deployment(conditions=(cond("Available", "False", "MinimumReplicasUnavailable",
                                             "Deployment does not have minimum availability."),)),
                 ("Available is False", "MinimumReplicasUnavailable"), id="deployment-available-false"),
    # StatefulSet
    pytest.param(statefulset(replicas=2, readyReplicas=2), ("rolling out", "2 of 3 replicas created"),
                 id="statefulset-scaling-up"),
    pytest.param(statefulset(replicas=5), ("2 old replicas terminating",), id="statefulset-scaling-down"),
    pytest.param(statefulset(readyReplicas=2), ("2 of 3 replicas ready",), id="statefulset-not-ready"),
    pytest.param(statefulset(updatedReplicas=1, updateRevision="web-8"), ("1 of 3 replicas updated",),
                 id="statefulset-updating"),
    pytest.param(statefulset(currentReplicas=2), ("2 of 3 replicas current",), id="statefulset-not-current"),
    pytest.param(statefulset(updateRevision="web-8"), ("revision web-8 not current yet", "web-7"),
                 id="statefulset-revision-pending"),
    pytest.param(statefulset({"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}, updatedReplicas=0,
                             updateRevision="web-8"), ("0 of 1 replicas updated", "partition"),
                 id="statefulset-partition-rolling"),
    pytest.param(statefulset({"type": "OnDelete"}, readyReplicas=1), ("1 of 3 replicas ready",),
                 id="statefulset-ondelete-not-ready"),
    # DaemonSet
    pytest.param(obj("apps/v1", "DaemonSet", spec={}), ("DaemonSet not observed yet",), id="daemonset-not-observed"),
    pytest.param(daemonset(updatedNumberScheduled=1), ("rolling out: 1 of 2 pods updated",),
                 id="daemonset-updating"),
    pytest.param(daemonset(numberAvailable=1), ("1 of 2 pods available",), id="daemonset-unavailable"),
    pytest.param(daemonset(numberReady=0), ("0 of 2 pods ready",), id="daemonset-not-ready"),
    # Job: a running Job is not ready (kstatus would count it Current)
    pytest.param(job(), ("Job not complete",), id="job-running"),
    pytest.param(job(cond("Failed", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit")),
                 ("Job failed", "BackoffLimitExceeded", "backoff limit"), id="job-failed"),
    # CustomResourceDefinition
    pytest.param(crd(), ("CRD not Established",), id="crd-new"),
    pytest.param(crd(cond("NamesAccepted", "False", "MultipleNamesNotAllowed",
                          '"widgets" is already in use'), cond("Established", "False")),
                 ("names not accepted", '"widgets" is already in use'), id="crd-names-conflict"),
    # a Ready condition
    pytest.param(widget(cond("Ready", "False", "InstallFailed", "chart web-1.2.0: image pull failed")),
                 ("Ready is False (InstallFailed: chart web-1.2.0: image pull failed)",), id="ready-false"),
    pytest.param(widget(cond("Ready", "Unknown", "Progressing")), ("Ready is Unknown (Progressing)",),
                 id="ready-unknown"),
    pytest.param(widget(cond("Ready", "True", observedGeneration=2)), ("Ready is for generation 2", "3"),
                 id="ready-for-an-older-generation"),
    pytest.param(kind_of("helm.toolkit.fluxcd.io/v2", "HelmRelease"), ("no Ready condition yet",),
                 id="flux-not-reconciled-yet"),
    pytest.param(obj("kustomize.toolkit.fluxcd.io/v1", "Kustomization", status={"conditions": "not a list"}),
                 ("no Ready condition yet",), id="flux-malformed-conditions"),
    pytest.param(kind_of("helmop.dev/v1alpha1", "HelmRelease"), ("no Ready condition yet",),
                 id="helmop-not-reconciled-yet"),
    pytest.param(kind_of("apps.helmop.dev/v1alpha1", "Jenkins"), ("no Ready condition yet",),
                 id="helmop-app-not-reconciled-yet"),
    pytest.param(pod("Running", cond("Ready", "False", "ContainersNotReady", "containers with unready status: [web]")),
                 ("Ready is False", "ContainersNotReady"), id="pod-not-ready"),
    pytest.param(pod("Pending"), ("no Ready condition yet",), id="pod-pending"),
    pytest.param(pod("Failed", reason="Evicted", message="The node was low on resource: memory."),
                 ("Pod failed", "Evicted", "low on resource"), id="pod-failed"),
]


@pytest.mark.parametrize("thing", READY)
def test_ready(thing: dict[str, Any]) -> None:
    assert readiness(thing) == ""


@pytest.mark.parametrize("thing,fragments", NOT_READY)
def test_not_ready_says_why(thing: dict[str, Any] | None, fragments: tuple[str, ...]) -> None:
    reason = readiness(thing)
    assert reason
    for fragment in fragments:
        assert fragment in reason


def test_rules_apply_in_order() -> None:
    """Deletion before generations, generations before conditions, Reconciling before Stalled and Ready."""
    doomed = widget(cond("Ready", "False"), observedGeneration=2) | {
        "metadata": {"generation": 3, "deletionTimestamp": "2024-01-01T00:00:00Z"}}
    assert readiness(doomed) == "being deleted"
    stale = widget(cond("Stalled", "True", "InvalidSpec"), observedGeneration=2)
    assert readiness(stale) == "generation 3 not observed yet (observed 2)"
    busy = widget(cond("Reconciling", "True", "Progressing", "installing"), cond("Stalled", "True", "Failed"))
    assert readiness(busy) == "in progress (Progressing: installing)"
    stuck = kind_of("helm.toolkit.fluxcd.io/v2", "HelmRelease", cond("Stalled", "True", "InvalidChartReference"),
                    cond("Ready", "False", "InvalidChartReference"))
    assert readiness(stuck).startswith("stalled (InvalidChartReference")


def test_a_long_message_is_cut_to_its_first_line() -> None:
    """A condition's message can be a whole helm error: a status message carries its first line, bounded."""
    long = widget(cond("Ready", "False", "UpgradeFailed", "x" * 500 + "\nstack trace"))
    reason = readiness(long)
    assert reason.startswith("Ready is False (UpgradeFailed: xxx") and reason.endswith("…)")
    assert "stack trace" not in reason and len(reason) < 250
