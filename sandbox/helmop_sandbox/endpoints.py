"""kube-controller-manager's endpoints and EndpointSlice controllers, for the workloads the sandbox runs.

A Service with a selector (not of type ExternalName) gets an Endpoints object and EndpointSlices
(discovery.k8s.io/v1) listing what its selector picks, written as upstream's controllers write them: slices
named ``<service>-<random>``, labelled ``kubernetes.io/service-name`` and ``endpointslice.kubernetes.io/
managed-by``, owned by the Service (so they go with it), one per set of ports and at most 100 endpoints
each, and a placeholder without endpoints or ports while nothing is selected.

What a selector picks: Pods by their labels (the sandbox runs Pods for StatefulSets, Jobs and bare Pods),
and the Deployments, ReplicaSets (not a Deployment's: it counts for them) and DaemonSets the sandbox reports
Ready without Pods, by their pod template's labels. Each of those stands for as many endpoints as its status
has replicas, ready as many as it says are, at addresses made up from its uid, and without a ``targetRef``
(there is no Pod to point at). A named ``targetPort`` is looked up in
the containers' ports, as upstream. :mod:`.network` asks the same question when a webhook names a Service.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ipaddress
import logging
from dataclasses import dataclass
from typing import Any

from .apiserver import ApiServer, DeleteOptions, WriteOptions
from .errors import ApiError
from .selection import PODS, SELECTABLE, SERVICES, Selection, selectable_labels, selector_of
from .store import Event, Key, Obj

log = logging.getLogger(__name__)

ENDPOINTS: Key = ("", "endpoints")
SLICES: Key = ("discovery.k8s.io", "endpointslices")
SERVICE_NAME = "kubernetes.io/service-name"
MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
CONTROLLER = "endpointslice-controller.k8s.io"
HEADLESS = "service.kubernetes.io/headless"
PER_SLICE = 100  # upstream's default --max-endpoints-per-slice
_POD_NETWORK = ipaddress.IPv4Address("10.244.0.0")  # kind's pod subnet, 10.244.0.0/16

Port = tuple[str, int, str, str]  # a Service port as served: name, number, protocol, appProtocol ("" for none)


@dataclass(frozen=True)
class Backend:
    """One endpoint: a Pod, or one replica of a workload that has none."""

    address: str
    ready: bool
    ports: tuple[Port, ...]
    owner: str  # what it stands for, as people name it: "Deployment web", "StatefulSet db", "Pod debug"
    pod: Obj | None = None
    hostname: str = ""


def address(uid: str, index: int = 0) -> str:
    """A made-up address in the Pod network, the same for the same object and index."""
    offset = int(hashlib.sha256(uid.encode()).hexdigest()[:8], 16)
    return str(_POD_NETWORK + (offset + index) % 65536)


def _port_number(port: dict[str, Any], pod_spec: dict[str, Any]) -> int | None:
    """The Pod's port a Service port reaches: ``targetPort`` as a number, or the container port of that name."""
    target = port.get("targetPort", port.get("port"))
    if isinstance(target, int):
        return target
    sidecars = [c for c in pod_spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
    for container in [*(pod_spec.get("containers") or []), *sidecars]:
        for named in container.get("ports") or []:
            if named.get("name") == target and named.get("protocol", "TCP") == port.get("protocol", "TCP"):
                return int(named["containerPort"])
    return None


def _ports(service: Obj, pod_spec: dict[str, Any]) -> tuple[Port, ...]:
    out = []
    for port in (service.get("spec") or {}).get("ports") or []:
        number = _port_number(port, pod_spec)
        if number is not None:
            out.append((str(port.get("name", "")), number, str(port.get("protocol", "TCP")),
                        str(port.get("appProtocol", ""))))
    return tuple(out)


def _controller(obj: Obj) -> dict[str, Any] | None:
    return next((r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")), None)


def _owner(obj: Obj) -> str:
    """The object's controller as people name it (a StatefulSet for its Pod), else the object."""
    ref = _controller(obj)
    return f"{ref['kind']} {ref['name']}" if ref else f"{obj['kind']} {obj['metadata']['name']}"


def _pod_backends(service: Obj, pod: Obj) -> list[Backend]:
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    if not status.get("podIP") or status.get("phase") in ("Succeeded", "Failed") or meta.get("deletionTimestamp"):
        return []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    hostname = spec.get("hostname", "") if spec.get("subdomain") == service["metadata"]["name"] else ""
    return [Backend(status["podIP"], ready, _ports(service, spec), _owner(pod), pod, hostname)]


def _workload_backends(service: Obj, obj: Obj) -> list[Backend]:
    meta, status = obj["metadata"], obj.get("status") or {}
    if meta.get("deletionTimestamp") or (_controller(obj) or {}).get("kind") == "Deployment":
        return []
    template = (obj.get("spec") or {}).get("template") or {}
    if obj["kind"] == "DaemonSet":
        total, ready = status.get("desiredNumberScheduled", 0), status.get("numberReady", 0)
    else:
        total, ready = status.get("replicas", 0), status.get("readyReplicas", 0)
    ports = _ports(service, template.get("spec") or {})
    return [Backend(address(meta["uid"], i), i < ready, ports, _owner(obj)) for i in range(int(total))]


def backends(selection: Selection, service: Obj) -> list[Backend]:
    """What ``service``'s selector picks in its namespace, ordered by address."""
    found: list[Backend] = []
    for key, obj in selection.selected(service["metadata"]["namespace"], selector_of(service)):
        found += _pod_backends(service, obj) if key == PODS else _workload_backends(service, obj)
    return sorted(found, key=lambda b: ipaddress.IPv4Address(b.address))


def _by_ports(found: list[Backend]) -> dict[tuple[Port, ...], list[Backend]]:
    """Backends grouped by the ports they serve (those that serve none of a Service's ports too: upstream's
    EndpointSlices list them without ports, its Endpoints leave them out)."""
    groups: dict[tuple[Port, ...], list[Backend]] = {}
    for backend in found:
        groups.setdefault(backend.ports, []).append(backend)
    return groups


class EndpointsController:
    """Keeps each selecting Service's Endpoints and EndpointSlices up to date, on the sandbox's event loop."""

    def __init__(self, api: ApiServer, loop: asyncio.AbstractEventLoop, manager: WriteOptions, node: str) -> None:
        self.api, self.loop, self.manager, self.node = api, loop, manager, node
        self._dirty: set[tuple[str, str]] = set()  # (namespace, service) to sync at the loop's next turn

    def on_event(self, key: Key, event: Event) -> None:
        """Note the Services an event concerns: the Service itself, or those selecting the object (or it before)."""
        meta = event.obj["metadata"]
        namespace = meta.get("namespace", "")
        if key == SERVICES:
            if event.type == "DELETED":  # its slices go with it (owner references); its Endpoints are removed
                self._delete_endpoints(namespace, meta["name"])
            else:
                self._mark(namespace, meta["name"])
        elif key in SELECTABLE:
            for one in (o for o in (event.obj, event.old) if o is not None):  # the Services of either version
                for name in self.api.selection.services_selecting(namespace, selectable_labels(key, one)):
                    self._mark(namespace, name)

    def _mark(self, namespace: str, name: str) -> None:
        if not self._dirty:  # events of one turn of the loop (a rollout's writes) are synced once
            self.loop.call_soon(self._flush)
        self._dirty.add((namespace, name))

    def _flush(self) -> None:
        dirty, self._dirty = sorted(self._dirty), set()
        for namespace, name in dirty:
            service = self.api.store.get(SERVICES, namespace, name)
            spec = (service or {}).get("spec") or {}
            if service is None or not spec.get("selector") or spec.get("type") == "ExternalName":
                continue
            try:
                found = backends(self.api.selection, service)
                self._write_endpoints(service, found)
                self._write_slices(service, found)
            except ApiError as exc:  # a namespace terminating, a race with a client: the next event retries
                log.debug("sandbox endpoints of %s/%s: %s", namespace, name, exc)

    def _delete_endpoints(self, namespace: str, name: str) -> None:
        if self.api.store.get(ENDPOINTS, namespace, name) is not None:
            with contextlib.suppress(ApiError):
                self.api.delete(self.api.type_of(ENDPOINTS), namespace, name, DeleteOptions())

    def _address(self, backend: Backend) -> dict[str, Any]:
        out: dict[str, Any] = {"ip": backend.address}
        if backend.hostname:
            out["hostname"] = backend.hostname
        out["nodeName"] = self.node
        if backend.pod is not None:
            out["targetRef"] = _target(backend.pod)
        return out

    def _write_endpoints(self, service: Obj, found: list[Backend]) -> None:
        subsets = []
        has_ports = bool((service.get("spec") or {}).get("ports"))
        for ports, members in _by_ports(found).items():
            if has_ports and not ports:
                continue
            subset: dict[str, Any] = {}
            for field, ready in (("addresses", True), ("notReadyAddresses", False)):
                chosen = [self._address(b) for b in members if b.ready == ready]
                if chosen:
                    subset[field] = chosen
            subset["ports"] = [{k: v for k, v in (("name", name), ("port", number), ("protocol", protocol),
                                                  ("appProtocol", app)) if v != ""}
                               for name, number, protocol, app in ports]
            subsets.append({k: v for k, v in subset.items() if v})
        meta = service["metadata"]
        body: dict[str, Any] = {"metadata": {"name": meta["name"], "labels": meta.get("labels") or {}}}
        if subsets:
            body["subsets"] = subsets
        rt = self.api.type_of(ENDPOINTS)
        current = self.api.store.get(ENDPOINTS, meta["namespace"], meta["name"])
        if current is None:
            self.api.create(rt, meta["namespace"], body, self.manager)
        elif current.get("subsets") != body.get("subsets"):
            updated = {k: v for k, v in current.items() if k != "subsets"} | ({"subsets": subsets} if subsets else {})
            self.api.update(rt, meta["namespace"], meta["name"], updated, self.manager)

    def _owned_slices(self, namespace: str, uid: str) -> list[Obj]:
        """The slices that name the Service as an owner, by name, from the store's owner index."""
        store = self.api.store
        with store.lock:
            names = sorted(name for key, ns, name in store.dependents.get(uid, ()) if key == SLICES and ns == namespace)
        return [s for s in (store.get(SLICES, namespace, name) for name in names) if s is not None]

    def _slice_endpoint(self, backend: Backend) -> dict[str, Any]:
        out: dict[str, Any] = {"addresses": [backend.address],
                               "conditions": {"ready": backend.ready, "serving": backend.ready, "terminating": False}}
        if backend.hostname:
            out["hostname"] = backend.hostname
        if backend.pod is not None:
            out["targetRef"] = _target(backend.pod)
        out["nodeName"] = self.node
        return out

    def _desired_slices(self, service: Obj, found: list[Backend]) -> list[tuple[Any, Any]]:
        """(ports, endpoints) of each slice; the placeholder (both null, as stored upstream) when there are none."""
        out: list[tuple[Any, Any]] = []
        for ports, members in _by_ports(found).items():
            served = [{k: v for k, v in (("name", name), ("protocol", protocol), ("port", number),
                                         ("appProtocol", app)) if k == "name" or v != ""}
                      for name, number, protocol, app in ports] or None
            for start in range(0, len(members), PER_SLICE):
                out.append((served, [self._slice_endpoint(b) for b in members[start:start + PER_SLICE]]))
        return out or [(None, None)]

    def _write_slices(self, service: Obj, found: list[Backend]) -> None:
        meta = service["metadata"]
        namespace, uid = meta["namespace"], meta["uid"]
        rt = self.api.type_of(SLICES)
        existing = self._owned_slices(namespace, uid)
        labels, desired = _slice_labels(service), self._desired_slices(service, found)
        for i, (ports, endpoints) in enumerate(desired):
            body = {"addressType": "IPv4", "endpoints": endpoints, "ports": ports}
            if i >= len(existing):
                owner = {"apiVersion": "v1", "kind": "Service", "name": meta["name"], "uid": uid,
                         "controller": True, "blockOwnerDeletion": True}
                self.api.create(rt, namespace, {"metadata": {"generateName": f"{meta['name']}-", "labels": labels,
                                                             "ownerReferences": [owner]}, **body}, self.manager)
                continue
            current = existing[i]
            if any(current.get(k) != v for k, v in body.items()) or current["metadata"].get("labels") != labels:
                self.api.update(rt, namespace, current["metadata"]["name"],
                                {**current, **body, "metadata": {**current["metadata"], "labels": labels}},
                                self.manager)
        for extra in existing[len(desired):]:
            with contextlib.suppress(ApiError):
                self.api.delete(rt, namespace, extra["metadata"]["name"], DeleteOptions())


def _target(pod: Obj) -> dict[str, str]:
    meta = pod["metadata"]
    return {"kind": "Pod", "namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"]}


def _slice_labels(service: Obj) -> dict[str, str]:
    """The Service's labels (not the reserved ones), which upstream copies, and the slice's own."""
    spec = service.get("spec") or {}
    labels = {k: v for k, v in (service["metadata"].get("labels") or {}).items()
              if k not in (SERVICE_NAME, MANAGED_BY, HEADLESS)}
    if spec.get("clusterIP") in (None, "", "None"):
        labels[HEADLESS] = ""
    return {**labels, SERVICE_NAME: service["metadata"]["name"], MANAGED_BY: CONTROLLER}
