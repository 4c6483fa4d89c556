"""The deployment controller: one ReplicaSet per pod template, revisions, pause and history.

As upstream: the ReplicaSet of the current template is named ``<deployment>-<template hash>`` and is
scaled up, the others down to zero; each new ReplicaSet gets the next revision
(``deployment.kubernetes.io/revision``, also written on the Deployment, where ``kubectl rollout
undo`` reads it); going back to an older template (``rollout undo``) reuses that ReplicaSet and gives
it the next revision, remembering the old ones in ``revision-history``. The Deployment's own annotations
(``kubernetes.io/change-cause``, which ``kubectl rollout history`` shows) are copied onto the ReplicaSet of
its current template, and ``rollout undo`` copies them back from the one it returns to. A paused Deployment rolls out
no new template (scaling still applies) and says so in its Progressing condition. ReplicaSets beyond
``revisionHistoryLimit`` (default 10) that are scaled to zero are deleted.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .store import Obj, clone

REPLICASETS = ("apps", "replicasets")
REVISION = "deployment.kubernetes.io/revision"
HISTORY = "deployment.kubernetes.io/revision-history"
# Not copied from a Deployment onto its ReplicaSets (as upstream's annotationsToSkip).
_NOT_COPIED = {"kubectl.kubernetes.io/last-applied-configuration", REVISION, HISTORY,
               "deployment.kubernetes.io/desired-replicas", "deployment.kubernetes.io/max-replicas",
               "deprecated.deployment.rollback.to"}


def copied_annotations(deploy: Obj) -> dict[str, str]:
    """What of a Deployment's annotations its current ReplicaSet carries too."""
    return {k: v for k, v in (deploy["metadata"].get("annotations") or {}).items() if k not in _NOT_COPIED}


def template_hash(template: Any) -> str:
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]


def revision(obj: Obj) -> int:
    try:
        return int((obj["metadata"].get("annotations") or {}).get(REVISION, "0"))
    except ValueError:
        return 0


class Rollouts:
    def __init__(self, controllers: Any) -> None:
        self.c = controllers  # the Controllers: api, status writes, events, the simulation knobs
        self.api = controllers.api

    def deployment(self, rt: Any, deploy: Obj) -> None:
        spec, meta = deploy.get("spec") or {}, deploy["metadata"]
        replicas = int(spec.get("replicas", 1))
        ready = 0 if self.c.failing(deploy) else replicas
        current = self._ensure_replicaset(deploy, replicas)
        paused = bool(spec.get("paused"))
        name = current["metadata"]["name"] if current else f"{meta['name']}-{template_hash(spec.get('template'))}"
        up_to_date = current is not None and name == f"{meta['name']}-{template_hash(spec.get('template'))}"
        done = ready >= replicas and up_to_date
        if paused:
            progressing = self.c.condition("Progressing", None, "DeploymentPaused", "Deployment is paused")
        else:
            progressing = self.c.condition("Progressing", True, "NewReplicaSetAvailable" if done else
                                           "ReplicaSetUpdated", f'ReplicaSet "{name}" has '
                                           f"{'successfully progressed' if done else 'is progressing'}.")
        status: dict[str, Any] = {
            "observedGeneration": meta.get("generation", 1), "replicas": replicas,
            "updatedReplicas": replicas if up_to_date else 0, "readyReplicas": ready, "availableReplicas": ready,
            "conditions": [
                self.c.condition("Available", ready >= replicas,
                                 "MinimumReplicasAvailable" if ready >= replicas else "MinimumReplicasUnavailable",
                                 "Deployment has minimum availability." if ready >= replicas
                                 else "Deployment does not have minimum availability."),
                progressing,
            ],
        }
        old = dict(deploy.get("status") or {})
        if ready < replicas:
            status["unavailableReplicas"] = replicas - ready
        old.pop("unavailableReplicas", None)
        self.c.write_status(rt, {**deploy, "status": old}, status)

    def deleting(self, rt: Any, obj: Obj) -> None:
        """A Deployment or ReplicaSet being deleted (held by a finalizer): nothing is scaled, its status still
        follows, as upstream's (a Deployment's ``syncStatusOnly``): the new generation observed, a Deployment's
        counts summed from its ReplicaSets, and a ReplicaSet in foreground deletion without Pods (they go first)."""
        meta, status = obj["metadata"], dict(obj.get("status") or {})
        status["observedGeneration"] = meta.get("generation", 1)
        counts = ("replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas")
        if obj.get("kind") == "ReplicaSet":
            if "foregroundDeletion" in (meta.get("finalizers") or []):
                status = {k: v for k, v in status.items() if k not in counts} | {"replicas": 0}
        else:
            owned = [rs.get("status") or {} for rs in self._owned(obj)]
            total = {k: sum(int(rs.get(k, 0)) for rs in owned) for k in ("replicas", "readyReplicas",
                                                                          "availableReplicas")}
            status = {k: v for k, v in status.items() if k not in counts} | {k: v for k, v in total.items() if v}
            status["replicas"] = total["replicas"]
        self.c.write_status(rt, obj, status)

    def _owned(self, deploy: Obj) -> list[Obj]:
        """Its ReplicaSets, from the owner index (not a scan of the namespace)."""
        owned: list[Obj] = self.c.owned(deploy, REPLICASETS)
        return owned

    def _ensure_replicaset(self, deploy: Obj, replicas: int) -> Obj | None:
        """The ReplicaSet of the current template (a paused Deployment: its newest), scaled to ``replicas``."""
        rs_rt = self.api.type_of(REPLICASETS)
        spec, meta = deploy.get("spec") or {}, deploy["metadata"]
        template = clone(spec.get("template") or {})
        pod_hash = template_hash(template)
        ns, name = meta["namespace"], f"{meta['name']}-{pod_hash}"
        owned = self._owned(deploy)
        newest = max((revision(rs) for rs in owned), default=0)
        current = next((rs for rs in owned if rs["metadata"]["name"] == name), None)
        if spec.get("paused") and (current is None or revision(current) < newest):
            current = max(owned, key=revision, default=None)  # no new rollout while paused
        elif current is None:
            template.setdefault("metadata", {}).setdefault("labels", {})["pod-template-hash"] = pod_hash
            selector = clone(spec.get("selector") or {})
            selector.setdefault("matchLabels", {})["pod-template-hash"] = pod_hash
            owner = {"apiVersion": deploy["apiVersion"], "kind": "Deployment", "name": meta["name"],
                     "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}
            rs = {"metadata": {"name": name, "labels": template["metadata"]["labels"],
                               "annotations": {**copied_annotations(deploy), REVISION: str(newest + 1)},
                               "ownerReferences": [owner]},
                  "spec": {"replicas": 0, "selector": selector, "template": template}}
            current = self.api.create(rs_rt, ns, rs, self.c.manager)
        else:
            annotations = {**(current["metadata"].get("annotations") or {}), **copied_annotations(deploy)}
            if revision(current) < newest:  # back to an older template: it becomes the newest revision
                history = [h for h in annotations.get(HISTORY, "").split(",") if h] + [str(revision(current))]
                annotations.update({REVISION: str(newest + 1), HISTORY: ",".join(history)})
            if annotations != current["metadata"].get("annotations"):
                current = self.api.update(rs_rt, ns, name, {**current, "metadata": {**current["metadata"],
                                                                                    "annotations": annotations}},
                                          self.c.manager)
        if current is None:
            return None
        for rs in owned:
            if rs["metadata"]["name"] != current["metadata"]["name"]:
                self._scale(deploy, rs, 0)
        self._scale(deploy, current, replicas)
        self.c.schedule(REPLICASETS, current)  # the Deployment's annotations may have changed
        self._annotate(deploy, str(revision(current)))
        self._trim(deploy, owned, current)
        return current

    def _scale(self, deploy: Obj, rs: Obj, replicas: int) -> None:
        before = int((rs.get("spec") or {}).get("replicas", 0))
        if before == replicas:
            return
        scaled = {**rs, "spec": {**rs["spec"], "replicas": replicas}}  # the update copies what it stores
        self.api.update(self.api.type_of(REPLICASETS), rs["metadata"]["namespace"], rs["metadata"]["name"], scaled,
                        self.c.manager)
        self.c.recorder.emit(deploy, "ScalingReplicaSet", f"Scaled {'up' if replicas > before else 'down'} "
                             f"replica set {rs['metadata']['name']} from {before} to {replicas}",
                             "deployment-controller")

    def _annotate(self, deploy: Obj, number: str) -> None:
        annotations = deploy["metadata"].get("annotations") or {}
        if annotations.get(REVISION) == number:
            return
        latest = self.api.store.get(("apps", "deployments"), deploy["metadata"]["namespace"],
                                    deploy["metadata"]["name"])
        if latest is None:
            return
        meta = {**latest["metadata"], "annotations": {**(latest["metadata"].get("annotations") or {}),
                                                      REVISION: number}}
        self.api.update(self.api.type_of(("apps", "deployments")), meta["namespace"], meta["name"],
                        {**latest, "metadata": meta}, self.c.manager)

    def _trim(self, deploy: Obj, owned: list[Obj], current: Obj) -> None:
        limit = int((deploy.get("spec") or {}).get("revisionHistoryLimit", 10))
        old = sorted((rs for rs in owned if rs["metadata"]["name"] != current["metadata"]["name"]), key=revision)
        for rs in old[:max(0, len(old) - limit)]:
            self.c.delete_dependent(REPLICASETS, rs)

    def replicaset(self, rt: Any, rs: Obj) -> None:
        replicas = int((rs.get("spec") or {}).get("replicas", 1))
        refs = rs["metadata"].get("ownerReferences") or []
        owners = [self.c.owner(ref, rs["metadata"]["namespace"]) for ref in refs]
        # Pods of a failing Deployment are not ready in its ReplicaSet either (helm 3 looks there).
        failing = self.c.failing(rs) or any(found and self.c.failing(found[1]) for found in owners)
        ready = 0 if failing else replicas
        self.c.write_status(rt, rs, {"observedGeneration": rs["metadata"].get("generation", 1),
                                     "replicas": replicas, "fullyLabeledReplicas": replicas,
                                     "readyReplicas": ready, "availableReplicas": ready})
