"""The ClusterRoles that give helmop's kinds to the cluster's user-facing roles (aggregated into ``admin``,
``edit`` and ``view``): a member bound to ``edit`` in a namespace may create HelmReleases there, as it may
create Deployments, and a Project's deployer ServiceAccount may sync them. Installed with the CRDs."""

from __future__ import annotations

from typing import Any

from .kinds import BUILTIN

RBAC = "rbac.authorization.k8s.io"


def definitions() -> list[dict[str, Any]]:
    namespaced = [k for k in BUILTIN if k.namespaced]
    groups = sorted({k.group for k in namespaced})

    def rules(verbs: list[str]) -> list[dict[str, Any]]:
        return [{"apiGroups": [group], "resources": sorted(k.plural for k in namespaced if k.group == group),
                 "verbs": list(verbs)} for group in groups]

    def role(name: str, labels: tuple[str, ...], verbs: list[str]) -> dict[str, Any]:
        return {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole",
                "metadata": {"name": name, "labels": {f"{RBAC}/aggregate-to-{r}": "true" for r in labels}},
                "rules": rules(verbs)}

    return [role("helmop-edit", ("admin", "edit"), ["get", "list", "watch", "create", "update", "patch", "delete",
                                                    "deletecollection"]),
            role("helmop-view", ("view",), ["get", "list", "watch"])]
