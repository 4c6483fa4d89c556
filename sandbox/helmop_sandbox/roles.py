"""The user-facing ClusterRoles a cluster starts with (``admin``, ``edit``, ``view``) and the controller that
aggregates them, as kube-apiserver's bootstrap policy and kube-controller-manager's clusterrole-aggregation
controller do.

``admin``, ``edit`` and ``view`` carry an ``aggregationRule``: their rules are the union of the rules of
every ClusterRole labelled ``rbac.authorization.k8s.io/aggregate-to-<role>: "true"`` (an operator's roles
for its own kinds join them that way). The ``system:aggregate-to-*`` roles hold upstream's rules for the
built-in kinds, reduced to the resources the sandbox serves; ``view`` aggregates into ``edit`` and ``edit``
into ``admin``, as upstream.
"""

from __future__ import annotations

from typing import Any

from .selectors import selector_matches

RBAC = "rbac.authorization.k8s.io"
CLUSTER_ROLES = (RBAC, "clusterroles")
READ = ["get", "list", "watch"]
WRITE = ["create", "delete", "deletecollection", "patch", "update"]
_BOOT = {"kubernetes.io/bootstrapping": "rbac-defaults"}


def _label(*roles: str) -> dict[str, str]:
    return {**_BOOT, **{f"{RBAC}/aggregate-to-{role}": "true" for role in roles}}


_VIEW = [
    {"apiGroups": [""], "verbs": READ, "resources": [
        "configmaps", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "pods", "pods/log",
        "pods/status", "replicationcontrollers", "replicationcontrollers/scale", "replicationcontrollers/status",
        "serviceaccounts", "services", "services/status", "bindings", "events", "limitranges", "resourcequotas",
        "resourcequotas/status", "namespaces", "namespaces/status"]},
    {"apiGroups": ["apps"], "verbs": READ, "resources": [
        "controllerrevisions", "daemonsets", "daemonsets/status", "deployments", "deployments/scale",
        "deployments/status", "replicasets", "replicasets/scale", "replicasets/status", "statefulsets",
        "statefulsets/scale", "statefulsets/status"]},
    {"apiGroups": ["autoscaling"], "verbs": READ,
     "resources": ["horizontalpodautoscalers", "horizontalpodautoscalers/status"]},
    {"apiGroups": ["batch"], "verbs": READ, "resources": ["cronjobs", "cronjobs/status", "jobs", "jobs/status"]},
    {"apiGroups": ["policy"], "verbs": READ, "resources": ["poddisruptionbudgets", "poddisruptionbudgets/status"]},
    {"apiGroups": ["networking.k8s.io"], "verbs": READ,
     "resources": ["ingresses", "ingresses/status", "networkpolicies"]},
    {"apiGroups": ["discovery.k8s.io"], "verbs": READ, "resources": ["endpointslices"]},
]
_EDIT = [
    {"apiGroups": [""], "verbs": READ, "resources": [
        "pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets", "services/proxy"]},
    {"apiGroups": [""], "verbs": ["impersonate"], "resources": ["serviceaccounts"]},
    {"apiGroups": [""], "verbs": WRITE, "resources": [
        "pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "configmaps", "events",
        "persistentvolumeclaims", "replicationcontrollers", "replicationcontrollers/scale", "secrets",
        "serviceaccounts", "services", "services/proxy"]},
    {"apiGroups": [""], "verbs": ["create"], "resources": ["serviceaccounts/token"]},
    {"apiGroups": ["apps"], "verbs": WRITE, "resources": [
        "daemonsets", "deployments", "deployments/rollback", "deployments/scale", "replicasets",
        "replicasets/scale", "statefulsets", "statefulsets/scale"]},
    {"apiGroups": ["autoscaling"], "verbs": WRITE, "resources": ["horizontalpodautoscalers"]},
    {"apiGroups": ["batch"], "verbs": WRITE, "resources": ["cronjobs", "jobs"]},
    {"apiGroups": ["policy"], "verbs": WRITE, "resources": ["poddisruptionbudgets"]},
    {"apiGroups": ["networking.k8s.io"], "verbs": WRITE, "resources": ["ingresses", "networkpolicies"]},
    {"apiGroups": ["discovery.k8s.io"], "verbs": WRITE, "resources": ["endpointslices"]},
]
_ADMIN = [
    {"apiGroups": ["authorization.k8s.io"], "verbs": ["create"], "resources": ["localsubjectaccessreviews"]},
    {"apiGroups": [RBAC], "verbs": [*WRITE, *READ], "resources": ["rolebindings", "roles"]},
]


def bootstrap() -> list[dict[str, Any]]:
    """The ClusterRoles to create at start (beside cluster-admin)."""
    out: list[dict[str, Any]] = []
    for role in ("admin", "edit", "view"):
        out.append({"metadata": {"name": role, "labels": _BOOT, "annotations": {
            f"{RBAC}/autoupdate": "true"}},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {f"{RBAC}/aggregate-to-{role}": "true"}}]},
            "rules": []})
    out.append({"metadata": {"name": "system:aggregate-to-admin", "labels": _label("admin")}, "rules": _ADMIN})
    out.append({"metadata": {"name": "system:aggregate-to-edit", "labels": _label("admin", "edit")}, "rules": _EDIT})
    out.append({"metadata": {"name": "system:aggregate-to-view", "labels": _label("admin", "edit", "view")},
                "rules": _VIEW})
    return out


def aggregated(role: dict[str, Any], roles: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The rules an aggregated ClusterRole should have now (None: it aggregates nothing): every distinct
    rule of the other ClusterRoles its selectors match, in name order."""
    selectors = (role.get("aggregationRule") or {}).get("clusterRoleSelectors")
    if not selectors:
        return None
    rules: list[dict[str, Any]] = []
    for other in sorted(roles, key=lambda r: str(r["metadata"]["name"])):
        labels = other["metadata"].get("labels") or {}
        if other["metadata"]["name"] != role["metadata"]["name"] and \
                any(selector_matches(s, labels) for s in selectors):
            rules += [r for r in other.get("rules") or [] if r not in rules]
    return rules
