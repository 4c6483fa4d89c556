"""What kube-controller-manager and the kubelet would do, reduced to what clients observe.

* garbage collection by ownerReferences (background, foreground, orphan);
* namespace termination (delete the contents, then the namespace) and CRD cleanup;
* a ``default`` ServiceAccount in every namespace, one Ready node;
* workloads that become ready after a delay, so ``helm --wait``, ``--wait-for-jobs``, ``helm test``
  and ``kubectl wait`` work: Deployments (with their ReplicaSet, which helm 3 inspects),
  StatefulSets (ordinal Pods with their PVCs from volumeClaimTemplates), DaemonSets, ReplicaSets, Jobs, Pods,
  PersistentVolumeClaims (bound to volumes of the default StorageClass: :mod:`.volumes`), Services (cluster
  IP, load balancer address; Endpoints and EndpointSlices of what they select: :mod:`.endpoints`).

The annotation ``sandbox.helmop.dev/simulate: fail`` makes an object never become ready (Jobs and
run-to-completion Pods fail instead); ``sandbox.helmop.dev/ready-delay: "<seconds>"`` overrides the
delay for one object. All work runs on the sandbox's event loop, triggered by store events.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import platform
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from .apiserver import CRD_FINALIZER, CRD_KEY, NAMESPACE_KEY, ApiServer, DeleteOptions, WriteOptions, now
from .batch import CRONJOBS, JOBS, PODS, Batch, knobs, owner_ref, stamp
from .endpoints import EndpointsController, address
from .errors import ApiError
from .events import Recorder
from .kinds import ResourceType
from .roles import CLUSTER_ROLES, aggregated
from .rollouts import Rollouts, template_hash
from .store import Event, Key, Obj, clone
from .volumes import Volumes

REVISION_LABEL = "controller-revision-hash"

log = logging.getLogger(__name__)

SIMULATE = "sandbox.helmop.dev/simulate"
READY_DELAY = "sandbox.helmop.dev/ready-delay"
MANAGER = WriteOptions(manager="kube-controller-manager")
NODE_NAME = "sandbox-node"
ROOT_CA = "kube-root-ca.crt"
# Kinds whose controller still writes their status while finalizers hold them in deletion (nothing is scaled).
STATUS_WHILE_HELD = ("Deployment", "ReplicaSet")
ROOT_CA_DESCRIPTION = ("Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
                       "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
                       "guaranteed across distributions of Kubernetes clusters.")


def _node() -> dict[str, Any]:
    """The one Node, as its kubelet registers and describes it."""
    info = {"kubeletVersion": "v1.35.0", "kubeProxyVersion": "", "osImage": "helmop sandbox",
            "kernelVersion": platform.release(), "operatingSystem": "linux", "architecture": "amd64",
            "containerRuntimeVersion": "sandbox://1.0", "machineID": "", "systemUUID": "", "bootID": ""}
    return {"metadata": {"name": NODE_NAME, "labels": {"kubernetes.io/hostname": NODE_NAME}},
            "status": {"conditions": [_condition("Ready", True, "KubeletReady", "kubelet is ready")],
                       "capacity": {"cpu": "2", "memory": "24Gi", "pods": "110"},
                       "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                                     {"type": "Hostname", "address": NODE_NAME}],
                       "nodeInfo": info}}


def _failing(obj: Obj) -> bool:
    return (obj["metadata"].get("annotations") or {}).get(SIMULATE) == "fail"


def _condition(kind: str, status: bool | None, reason: str = "", message: str = "") -> dict[str, str]:
    text = "Unknown" if status is None else "True" if status else "False"
    out = {"type": kind, "status": text, "lastTransitionTime": now()}
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    return out


def _same_conditions(old: Any, new: list[dict[str, str]]) -> list[dict[str, str]]:
    """Keep lastTransitionTime of conditions whose status did not change."""
    before = {c.get("type"): c for c in old or [] if isinstance(c, dict)}
    out = []
    for cond in new:
        prev = before.get(cond["type"])
        if prev and prev.get("status") == cond["status"] and prev.get("reason") == cond.get("reason"):
            cond = {**cond, "lastTransitionTime": prev.get("lastTransitionTime", cond["lastTransitionTime"])}
        out.append(cond)
    return out


class Controllers:
    def __init__(self, api: ApiServer, loop: asyncio.AbstractEventLoop, ready_delay: float,
                 ca_pem: bytes = b"") -> None:
        self.api = api
        self.ca_pem = ca_pem.decode()  # published in every namespace as kube-root-ca.crt
        self.loop = loop
        self.ready_delay = ready_delay
        self._busy: set[tuple[str, str]] = set()  # namespaces / CRDs being cleaned up
        self._pending: dict[tuple[Key, str, str], asyncio.TimerHandle] = {}
        # The controllers' clock: tests move it to reach a CronJob's next schedule without waiting.
        self.clock: Callable[[], datetime] = lambda: datetime.now(UTC)
        self.cronjob_passes = 0  # whole passes of the CronJob controller: what a test sees it looked
        self.manager = MANAGER
        self.recorder = Recorder(api, MANAGER, lambda: stamp(self.clock()))
        self.batch = Batch(self, self.recorder, lambda: self.clock())
        self.rollouts = Rollouts(self)
        self.volumes = Volumes(self)
        self.endpoints = EndpointsController(api, loop, MANAGER, NODE_NAME)
        self.workloads: dict[str, Callable[[ResourceType, Obj], None]] = {
            "Deployment": self.rollouts.deployment, "StatefulSet": self._statefulset, "DaemonSet": self._daemonset,
            "ReplicaSet": self.rollouts.replicaset, "Job": self.batch.job, "CronJob": self.batch.cronjob,
            "Pod": self._pod, "PersistentVolumeClaim": self._pvc, "Service": self._service,
        }

    def start(self) -> None:
        self.api.store.listeners.append(self._on_event)
        self.volumes.default_class()
        for ns in self.api.store.items(NAMESPACE_KEY):
            self._default_service_account(ns["metadata"]["name"])
            self._root_ca(ns["metadata"]["name"])
        node = _node()
        if self.api.store.get(("", "nodes"), "", NODE_NAME) is None:
            nodes = self.api.type_of(("", "nodes"))
            created = self.api.create(nodes, "", node, MANAGER)  # the kubelet registers, then reports status
            self.write_status(nodes, created, node["status"])
        # After a restart with kept state, pick up what was under way (rollouts, deletions), as
        # controllers do from their informers' initial list.
        for key, obj in self.api.store.everything():
            self._on_event(key, Event(int(obj["metadata"]["resourceVersion"]), "MODIFIED", obj, obj))
        self.loop.call_soon_threadsafe(self._cronjob_resync)

    def _aggregate(self) -> None:
        """Every aggregated ClusterRole's rules: the union of those of the ClusterRoles it selects."""
        rt = self.api.type_of(CLUSTER_ROLES)
        everyone = list(self.api.store.items(CLUSTER_ROLES))
        for role in everyone:
            rules = aggregated(role, everyone)
            if rules is not None and rules != (role.get("rules") or []):
                self.api.update(rt, "", role["metadata"]["name"], {**role, "rules": rules}, MANAGER)

    def _cronjob_resync(self) -> None:
        try:
            self.batch.cronjobs()
            self.cronjob_passes += 1
        except ApiError as exc:
            log.debug("sandbox cronjob controller: %s", exc)
        self.loop.call_later(1.0, self._cronjob_resync)

    # What the controllers of .batch and .rollouts use of this one (also: owned, schedule, owner,
    # write_status, delete_dependent, manager, recorder).
    condition = staticmethod(_condition)
    failing = staticmethod(_failing)

    def owned(self, owner: Obj, key: Key) -> list[Obj]:
        """The ``key`` objects ``owner`` controls, from the store's owner index."""
        uid = owner["metadata"]["uid"]
        found = (self.api.store.get(k, ns, name) for k, ns, name in sorted(self.api.store.dependents.get(uid, ()))
                 if k == key)
        return [obj for obj in found if obj is not None and any(
            r.get("uid") == uid and r.get("controller") for r in obj["metadata"].get("ownerReferences") or [])]

    def delete_dependent(self, key: Key, obj: Obj) -> None:
        meta = obj["metadata"]
        with contextlib.suppress(ApiError):
            self.api.delete(self.api.type_of(key), meta.get("namespace", ""), meta["name"],
                            DeleteOptions(propagation="Background"))

    def _on_event(self, key: Key, event: Event) -> None:
        # Called inside the store lock on the writing thread: only schedule here.
        self.loop.call_soon_threadsafe(self._dispatch, key, event)

    def _dispatch(self, key: Key, event: Event) -> None:
        try:
            self._handle(key, event)
        except ApiError as exc:  # a race with a client write; the next event retries
            log.debug("sandbox controller: %s", exc)

    def _handle(self, key: Key, event: Event) -> None:
        obj = event.obj
        meta = obj["metadata"]
        self.endpoints.on_event(key, event)
        if event.type == "DELETED":
            if key == ("", "configmaps") and meta["name"] == ROOT_CA:
                self._root_ca(meta["namespace"])  # the publisher puts it back
            self._collect_dependents(obj)
            self._release_owners(obj)
            if key == ("", "persistentvolumeclaims"):  # the persistent-volume controller's reclaim
                self.volumes.released(obj)
            return
        if meta.get("deletionTimestamp"):
            finalizers = meta.get("finalizers") or []
            if "foregroundDeletion" in finalizers:
                self._foreground(key, obj)
            if obj.get("kind") in STATUS_WHILE_HELD:
                self.schedule(key, obj)
                for ref in meta.get("ownerReferences") or []:
                    held = self.owner(ref, meta.get("namespace", ""))
                    if held is not None and held[1]["metadata"].get("deletionTimestamp"):
                        self.schedule(held[0].storage_key, held[1])
            if "orphan" in finalizers:
                self._orphan(key, obj)
            if key == NAMESPACE_KEY:
                self._spawn(("ns", meta["name"]), self._terminate_namespace(meta["name"]))
            if key == CRD_KEY and CRD_FINALIZER in finalizers:
                self._spawn(("crd", meta["name"]), self._cleanup_crd(obj))
            return
        if key == NAMESPACE_KEY and event.type == "ADDED":
            self._default_service_account(meta["name"])
            self._root_ca(meta["name"])
        if key == CLUSTER_ROLES:  # the clusterrole-aggregation controller
            self._aggregate()
        rt = self._rt(key)
        if rt is not None and not rt.custom and obj.get("kind") in self.workloads:
            self.schedule(key, obj)
            # A Job counts its Pods, a CronJob its Jobs: a change of theirs is the owner's cue.
            for ref in meta.get("ownerReferences") or []:
                owner_key = {"Job": JOBS, "CronJob": CRONJOBS}.get(ref.get("kind", ""))
                owner = self.api.store.get(owner_key, meta.get("namespace", ""), ref["name"]) if owner_key else None
                if owner is not None and ref.get("controller"):
                    self.schedule(owner_key, owner)  # type: ignore[arg-type]

    # --- garbage collection ------------------------------------------------------------------------

    def _rt(self, key: Key) -> ResourceType | None:
        try:
            return self.api.type_of(key)
        except ApiError:
            return None

    def owner(self, ref: dict[str, Any], namespace: str) -> tuple[ResourceType, Obj] | None:
        rt = self.api.registry.by_kind(ref.get("apiVersion", ""), ref.get("kind", ""))
        if rt is None:
            return None
        obj = self.api.store.get(rt.storage_key, namespace if rt.namespaced else "", ref.get("name", ""))
        if obj is None or obj["metadata"].get("uid") != ref.get("uid"):
            return None
        return rt, obj

    def _collect_dependents(self, owner: Obj) -> None:
        uid = owner["metadata"].get("uid", "")
        for key, ns, name in sorted(self.api.store.dependents.pop(uid, set())):
            rt, dep = self._rt(key), self.api.store.get(key, ns, name)
            if rt is None or dep is None:
                continue
            refs = dep["metadata"].get("ownerReferences") or []
            others = [r for r in refs if r.get("uid") != uid]
            if any(self.owner(r, ns) for r in others):
                self._set_owner_refs(rt, dep, others)
            elif not dep["metadata"].get("deletionTimestamp"):
                self.api.delete(rt, ns, name, DeleteOptions(propagation="Background"))

    def _set_owner_refs(self, rt: ResourceType, dep: Obj, refs: list[dict[str, Any]]) -> None:
        meta = {**dep["metadata"], "ownerReferences": refs}
        if not refs:
            meta.pop("ownerReferences")
        self.api.update(rt, meta.get("namespace", ""), meta["name"], {**dep, "metadata": meta}, MANAGER)

    def _release_owners(self, dep: Obj) -> None:
        """A dependent is gone: an owner waiting in foreground deletion may now go too."""
        for ref in dep["metadata"].get("ownerReferences") or []:
            found = self.owner(ref, dep["metadata"].get("namespace", ""))
            if found and "foregroundDeletion" in (found[1]["metadata"].get("finalizers") or []):
                self._foreground(found[0].storage_key, found[1])

    def _dependents(self, owner: Obj) -> list[tuple[ResourceType, Obj]]:
        out = []
        for key, ns, name in sorted(self.api.store.dependents.get(owner["metadata"].get("uid", ""), set())):
            rt, dep = self._rt(key), self.api.store.get(key, ns, name)
            if rt is not None and dep is not None:
                out.append((rt, dep))
        return out

    def _foreground(self, key: Key, owner: Obj) -> None:
        """As upstream's garbage collector: every dependent is deleted (in the foreground itself when it has
        dependents of its own), and the owner waits for those that block its deletion (``blockOwnerDeletion``)."""
        uid = owner["metadata"].get("uid")
        for rt, dep in self._dependents(owner):
            if not dep["metadata"].get("deletionTimestamp"):
                meta = dep["metadata"]
                policy = "Foreground" if self._dependents(dep) else "Background"
                self.api.delete(rt, meta.get("namespace", ""), meta["name"], DeleteOptions(propagation=policy))
        blocking = [dep for _, dep in self._dependents(owner)
                    if any(r.get("uid") == uid and r.get("blockOwnerDeletion")
                           for r in dep["metadata"].get("ownerReferences") or [])]
        owner_rt = self._rt(key)
        current = self.api.store.get(key, owner["metadata"].get("namespace", ""), owner["metadata"]["name"])
        if not blocking and owner_rt is not None and current is not None and \
                "foregroundDeletion" in (current["metadata"].get("finalizers") or []):
            self.api.remove_finalizer(owner_rt, current, "foregroundDeletion")

    def _orphan(self, key: Key, owner: Obj) -> None:
        uid = owner["metadata"].get("uid")
        for rt, dep in self._dependents(owner):
            refs = [r for r in dep["metadata"].get("ownerReferences") or [] if r.get("uid") != uid]
            self._set_owner_refs(rt, dep, refs)
        self.api.store.dependents.pop(uid or "", None)
        owner_rt = self._rt(key)
        if owner_rt is not None:
            self.api.remove_finalizer(owner_rt, owner, "orphan")

    def _spawn(self, ident: tuple[str, str], work: Any) -> None:
        if ident in self._busy:
            work.close()
            return
        self._busy.add(ident)
        task = self.loop.create_task(work)
        task.add_done_callback(lambda _t: self._busy.discard(ident))

    async def _terminate_namespace(self, name: str) -> None:
        while True:
            remaining = 0
            for key in self.api.store.resource_keys():
                rt = self._rt(key)
                if rt is None or not rt.namespaced:
                    continue
                for obj in self.api.store.items(key, name):
                    remaining += 1
                    if not obj["metadata"].get("deletionTimestamp"):
                        with contextlib.suppress(ApiError):
                            self.api.delete(rt, name, obj["metadata"]["name"],
                                            DeleteOptions(propagation="Background"))
            if not remaining:
                self.api.finish_namespace(name)
                return
            await asyncio.sleep(0.05)

    async def _cleanup_crd(self, crd: Obj) -> None:
        spec = crd.get("spec") or {}
        key = (spec.get("group", ""), (spec.get("names") or {}).get("plural", ""))
        rt = self._rt(key)
        while rt is not None:
            objs = list(self.api.store.items(key))
            if not objs:
                break
            for obj in objs:
                if not obj["metadata"].get("deletionTimestamp"):
                    with contextlib.suppress(ApiError):
                        self.api.delete(rt, obj["metadata"].get("namespace", ""), obj["metadata"]["name"],
                                        DeleteOptions())
            await asyncio.sleep(0.05)
        self.api.remove_finalizer(self.api.type_of(CRD_KEY), crd, CRD_FINALIZER)

    def _root_ca(self, namespace: str) -> None:
        """kube-controller-manager's root CA publisher: the CA clients in pods verify the API server with."""
        rt = self.api.type_of(("", "configmaps"))
        if not self.ca_pem or self.api.store.get(rt.storage_key, namespace, ROOT_CA) is not None:
            return
        ns = self.api.store.get(NAMESPACE_KEY, "", namespace)
        if ns is None or ns["metadata"].get("deletionTimestamp"):
            return
        body = {"metadata": {"name": ROOT_CA, "annotations": {"kubernetes.io/description": ROOT_CA_DESCRIPTION}},
                "data": {"ca.crt": self.ca_pem}}
        with contextlib.suppress(ApiError):
            self.api.create(rt, namespace, body, WriteOptions(manager="kube-controller-manager"))

    def _default_service_account(self, namespace: str) -> None:
        rt = self.api.type_of(("", "serviceaccounts"))
        if self.api.store.get(rt.storage_key, namespace, "default") is None:
            with contextlib.suppress(ApiError):  # the namespace is already terminating
                self.api.create(rt, namespace, {"metadata": {"name": "default"}}, MANAGER)

    # --- workloads ---------------------------------------------------------------------------------

    def schedule(self, key: Key, obj: Obj) -> None:
        meta = obj["metadata"]
        ident = (key, meta.get("namespace", ""), meta["name"])
        if ident in self._pending:
            return
        try:
            delay = float((meta.get("annotations") or {}).get(READY_DELAY, self.ready_delay))
        except ValueError:
            delay = self.ready_delay
        self._pending[ident] = self.loop.call_later(delay, self._run_workload, ident)

    def _run_workload(self, ident: tuple[Key, str, str]) -> None:
        self._pending.pop(ident, None)
        key, namespace, name = ident
        obj, rt = self.api.store.get(key, namespace, name), self._rt(key)
        if obj is None or rt is None:
            return
        being_deleted = bool(obj["metadata"].get("deletionTimestamp"))
        if being_deleted and obj["kind"] not in STATUS_WHILE_HELD:
            return
        try:
            (self.rollouts.deleting if being_deleted else self.workloads[obj["kind"]])(rt, obj)
        except ApiError as exc:
            log.debug("sandbox workload %s/%s: %s", namespace, name, exc)

    def write_status(self, rt: ResourceType, obj: Obj, status: dict[str, Any]) -> None:
        old = obj.get("status") or {}
        if "conditions" in status:
            status["conditions"] = _same_conditions(old.get("conditions"), status["conditions"])
        self.api.write_status(rt, obj, {**old, **status})

    def _replicas(self, obj: Obj) -> int:
        return int((obj.get("spec") or {}).get("replicas", 1))

    def _statefulset(self, rt: ResourceType, obj: Obj) -> None:
        spec, meta = obj.get("spec") or {}, obj["metadata"]
        replicas = self._replicas(obj)
        ready = 0 if _failing(obj) else replicas
        pvc_rt = self.api.type_of(("", "persistentvolumeclaims"))
        for tmpl in spec.get("volumeClaimTemplates") or []:
            for i in range(replicas):
                claim = f"{tmpl['metadata']['name']}-{meta['name']}-{i}"
                if self.api.store.get(pvc_rt.storage_key, meta["namespace"], claim) is None:
                    body = {"metadata": {"name": claim, "labels": (tmpl.get("metadata") or {}).get("labels", {})},
                            "spec": clone(tmpl.get("spec") or {})}
                    self.api.create(pvc_rt, meta["namespace"], body, MANAGER)
        revision = f"{meta['name']}-{template_hash(spec.get('template'))}"
        self._statefulset_pods(obj, replicas, revision)
        self.write_status(rt, obj, {"observedGeneration": meta.get("generation", 1), "replicas": replicas,
                               "readyReplicas": ready, "currentReplicas": replicas,
                               "updatedReplicas": replicas, "availableReplicas": ready,
                               "currentRevision": revision, "updateRevision": revision, "collisionCount": 0})

    def _statefulset_pods(self, obj: Obj, replicas: int, revision: str) -> None:
        """Pods <name>-0 .. <name>-(replicas-1), each with its claims of the volumeClaimTemplates mounted; a
        pod of an older revision is replaced, pods past the replicas are deleted (their claims are kept, as
        the default persistentVolumeClaimRetentionPolicy keeps them)."""
        spec, meta = obj.get("spec") or {}, obj["metadata"]
        pods_rt = self.api.type_of(PODS)
        existing = {p["metadata"]["name"]: p for p in self.owned(obj, PODS)}
        for i in range(replicas):
            name = f"{meta['name']}-{i}"
            current = existing.pop(name, None)
            if current is not None and (current["metadata"].get("labels") or {}).get(REVISION_LABEL) == revision:
                continue
            if current is not None:  # an older revision: replaced
                self.delete_dependent(PODS, current)
            template = clone(spec.get("template") or {})
            pod_spec = template.get("spec") or {}
            pod_spec["volumes"] = [*(pod_spec.get("volumes") or []), *(
                {"name": t["metadata"]["name"],
                 "persistentVolumeClaim": {"claimName": f"{t['metadata']['name']}-{name}"}}
                for t in spec.get("volumeClaimTemplates") or [])]
            pod_spec.setdefault("hostname", name)
            pod_spec.setdefault("subdomain", spec.get("serviceName", ""))
            labels = {**((template.get("metadata") or {}).get("labels") or {}), REVISION_LABEL: revision,
                      "statefulset.kubernetes.io/pod-name": name, "apps.kubernetes.io/pod-index": str(i)}
            pod = {"metadata": {"name": name, "labels": labels, "annotations": {
                       **((template.get("metadata") or {}).get("annotations") or {}), **knobs(obj)},
                                "ownerReferences": [owner_ref(obj)]}, "spec": pod_spec}
            with contextlib.suppress(ApiError):  # being deleted still: the next pass creates it
                self.api.create(pods_rt, meta["namespace"], pod, MANAGER)
                self.recorder.emit(obj, "SuccessfulCreate", f"create Pod {name} in StatefulSet {meta['name']} "
                                   "successful", "statefulset-controller")
        for extra in existing.values():
            self.delete_dependent(PODS, extra)

    def _daemonset(self, rt: ResourceType, obj: Obj) -> None:
        ready = 0 if _failing(obj) else 1
        self.write_status(rt, obj, {"observedGeneration": obj["metadata"].get("generation", 1),
                               "desiredNumberScheduled": 1, "currentNumberScheduled": 1,
                               "updatedNumberScheduled": 1, "numberReady": ready, "numberAvailable": ready,
                               "numberMisscheduled": 0})

    def _pod(self, rt: ResourceType, obj: Obj) -> None:
        spec = obj.get("spec") or {}
        runs_once = spec.get("restartPolicy", "Always") != "Always"
        failing = _failing(obj)
        containers = spec.get("containers") or []
        if runs_once:
            code = 1 if failing else 0
            phase = "Failed" if failing else "Succeeded"
            state = {"terminated": {"exitCode": code, "reason": "Error" if failing else "Completed",
                                    "startedAt": now(), "finishedAt": now()}}
            ready, reason = False, "PodCompleted"
        else:
            phase = "Running"
            state = ({"waiting": {"reason": "CrashLoopBackOff"}} if failing
                     else {"running": {"startedAt": now()}})
            ready, reason = not failing, "" if not failing else "ContainersNotReady"
        if not (obj.get("status") or {}).get("startTime"):
            meta = obj["metadata"]
            self.recorder.emit(obj, "Scheduled", f"Successfully assigned {meta['namespace']}/{meta['name']} to "
                               f"{NODE_NAME}", "default-scheduler")
            for c in containers:
                self.recorder.emit(obj, "Started", f"Started container {c.get('name', '')}", "kubelet")
        statuses = [{"name": c.get("name", ""), "image": c.get("image", ""), "imageID": "", "ready": ready,
                     "restartCount": 0, "started": ready, "state": state} for c in containers]
        self.write_status(rt, obj, {
            "phase": phase, "hostIP": "127.0.0.1", "podIP": address(obj["metadata"]["uid"]),
            "podIPs": [{"ip": address(obj["metadata"]["uid"])}], "startTime":
            (obj.get("status") or {}).get("startTime", now()), "containerStatuses": statuses,
            "conditions": [_condition("PodScheduled", True), _condition("Initialized", True),
                           _condition("ContainersReady", ready, reason), _condition("Ready", ready, reason)]})

    def _pvc(self, _rt: ResourceType, obj: Obj) -> None:
        if not _failing(obj):
            self.volumes.claim(obj)

    def _service(self, rt: ResourceType, obj: Obj) -> None:
        spec = obj.get("spec") or {}
        if spec.get("type") == "LoadBalancer" and not _failing(obj):
            self.write_status(rt, obj, {"loadBalancer": {"ingress": [{"ip": "127.0.0.1", "ipMode": "VIP"}]}})
