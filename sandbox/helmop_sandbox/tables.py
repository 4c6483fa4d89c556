"""Server-side printing: ``meta.k8s.io/v1`` Table replies, as ``kubectl get`` asks for them.

Built-in kinds get the columns kubectl users know for the common ones (a name and an age for the
rest); custom resources get their CRD's ``additionalPrinterColumns``, evaluated as JSONPath.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from .kinds import ResourceType

Obj = dict[str, Any]
_MISSING = object()


def age(timestamp: str | None) -> str:
    if not timestamp:
        return "<unknown>"
    try:
        then = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "<unknown>"
    seconds = max(0, int((datetime.now(UTC) - then).total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes}m{seconds % 60}s" if minutes < 10 else f"{minutes}m"
    hours = minutes // 60
    if hours < 48:
        return f"{hours}h{minutes % 60}m" if hours < 8 else f"{hours}h"
    return f"{hours // 24}d"


_STEP = re.compile(r"""\.([A-Za-z0-9_-]+)|\[(\d+|\*)\]|\[\?\(@\.([A-Za-z0-9_.-]+)\s*==\s*["']([^"']*)["']\)\]""")


def jsonpath(obj: Any, path: str) -> list[Any]:
    """The values at a kubectl-style JSONPath (``.a.b``, ``[0]``, ``[*]``, ``[?(@.k=="v")]``)."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    if path.startswith("$"):
        path = path[1:]
    values = [obj]
    pos = 0
    while pos < len(path):
        m = _STEP.match(path, pos)
        if not m:
            return []
        pos = m.end()
        name, index, filter_key, filter_value = m.groups()
        out: list[Any] = []
        for value in values:
            if name is not None and isinstance(value, dict) and name in value:
                out.append(value[name])
            elif index is not None and isinstance(value, list):
                if index == "*":
                    out.extend(value)
                elif int(index) < len(value):
                    out.append(value[int(index)])
            elif filter_key is not None and isinstance(value, list):
                for item in value:
                    found = jsonpath(item, "." + filter_key)
                    if found and str(found[0]) == filter_value:
                        out.append(item)
        values = out
    return values


def _cell(values: list[Any], kind: str) -> Any:
    if not values:
        return None
    value = values[0] if len(values) == 1 else ",".join(str(v) for v in values)
    if kind == "integer" and isinstance(value, int | float):
        return int(value)
    if isinstance(value, dict | list):
        return json.dumps(value)
    if kind == "date":  # as the apiserver's CRD table convertor: a relative age
        return age(str(value))
    return value


def _ready(status: Obj, ready_key: str, total: Any) -> str:
    return f"{status.get(ready_key, 0)}/{total}"


def _spec(obj: Obj) -> Obj:
    return obj.get("spec") or {}


def _status(obj: Obj) -> Obj:
    return obj.get("status") or {}


def _pod_ready(obj: Obj) -> str:
    ready = sum(1 for c in _status(obj).get("containerStatuses") or [] if c.get("ready"))
    return f"{ready}/{len(_spec(obj).get('containers') or [])}"


def _pod_status(obj: Obj) -> str:
    """As kubectl's pod printer: the phase, or the pod's reason, or the last container's waiting or
    terminated reason (a finished run-once Pod shows Completed, a failed one Error), or Terminating."""
    status = _status(obj)
    reason = str(status.get("reason") or status.get("phase") or "Pending")
    for container in status.get("containerStatuses") or []:
        state = container.get("state") or {}
        waiting, terminated = state.get("waiting") or {}, state.get("terminated") or {}
        if waiting.get("reason"):
            reason = str(waiting["reason"])
        elif terminated:
            reason = str(terminated.get("reason") or (f"Signal:{terminated['signal']}" if terminated.get("signal")
                                                      else f"ExitCode:{terminated.get('exitCode', 0)}"))
    if obj["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    return reason


def _containers(obj: Obj, field: str) -> str:
    template = (_spec(obj).get("jobTemplate") or {}).get("spec", _spec(obj)) if obj.get("kind") != "Pod" else None
    pod_spec = _spec(obj) if template is None else ((template.get("template") or {}).get("spec") or {})
    return ",".join(str(c.get(field, "")) for c in pod_spec.get("containers") or []) or "<none>"


def _selector(obj: Obj) -> str:
    selector = _spec(obj).get("selector") or {}
    parts = [f"{k}={v}" for k, v in (selector.get("matchLabels") or {}).items()]
    parts += [f"{e['key']} {e['operator'].lower()} ({','.join(e.get('values') or [])})"
              for e in selector.get("matchExpressions") or []]
    return ",".join(parts) or "<none>"


_MODES = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX", "ReadWriteOncePod": "RWOP"}


def _access_modes(modes: list[str] | None) -> str:
    return ",".join(_MODES.get(m, m) for m in modes or [])


def _claim_of(volume: Obj) -> str:
    ref = _spec(volume).get("claimRef") or {}
    return f"{ref.get('namespace')}/{ref.get('name')}" if ref else ""


def _name(obj: Obj) -> str:
    """The Name cell; a default StorageClass is marked as kubectl's printer marks it."""
    name = str(obj["metadata"]["name"])
    default = (obj["metadata"].get("annotations") or {}).get("storageclass.kubernetes.io/is-default-class")
    return f"{name} (default)" if obj.get("kind") == "StorageClass" and default == "true" else name


def _node_status(obj: Obj) -> str:
    ready = next((c for c in _status(obj).get("conditions") or [] if c.get("type") == "Ready"), None)
    text = "Ready" if ready and ready.get("status") == "True" else "NotReady" if ready else "Unknown"
    return text + (",SchedulingDisabled" if _spec(obj).get("unschedulable") else "")


def _node_address(obj: Obj, kind: str) -> str:
    return next((a["address"] for a in _status(obj).get("addresses") or [] if a.get("type") == kind), "<none>")


def _event_time(event: Obj, *fields: str) -> str:
    stamp = next((event.get(f) for f in fields if event.get(f)), None)
    return age(str(stamp)) if stamp else "<unknown>"


def _event_source(event: Obj) -> str:
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingComponent", "")
    host = source.get("host") or event.get("reportingInstance", "")
    return f"{component}, {host}" if host else component


def _first_three(values: list[str]) -> str:
    """Upstream's listWithMoreString: three values, then how many more."""
    if len(values) > 3:
        return f"{','.join(values[:3])} + {len(values) - 3} more..."
    return ",".join(values) or "<unset>"


AGE = ("Age", "string", None, 0)  # where a kind's printer puts the Age column (default: last)
_WIDE = 1  # priority of the columns `kubectl get -o wide` adds


def _builtin_columns(rt: ResourceType) -> list[tuple[str, str, Any, int]]:
    """(name, type, function of the object, priority) for the kinds people `kubectl get` most, as
    kube-apiserver's printers (pkg/printers/internalversion) define them."""
    spec, status = _spec, _status
    images = [("Containers", "string", lambda o: _containers(o, "name"), _WIDE),
              ("Images", "string", lambda o: _containers(o, "image"), _WIDE)]
    table: dict[str, list[tuple[str, str, Any]]] = {
        "Pod": [("Ready", "string", _pod_ready),
                ("Status", "string", _pod_status),
                ("Restarts", "string", lambda o: "0")],
        "Deployment": [("Ready", "string", lambda o: _ready(status(o), "readyReplicas", spec(o).get("replicas", 1))),
                       ("Up-to-date", "string", lambda o: status(o).get("updatedReplicas", 0)),
                       ("Available", "string", lambda o: status(o).get("availableReplicas", 0))],
        "StatefulSet": [("Ready", "string", lambda o: _ready(status(o), "readyReplicas", spec(o).get("replicas", 1)))],
        "ReplicaSet": [("Desired", "integer", lambda o: spec(o).get("replicas", 1)),
                       ("Current", "integer", lambda o: status(o).get("replicas", 0)),
                       ("Ready", "integer", lambda o: status(o).get("readyReplicas", 0))],
        "Service": [("Type", "string", lambda o: spec(o).get("type", "ClusterIP")),
                    ("Cluster-IP", "string", lambda o: spec(o).get("clusterIP", "<none>")),
                    ("Ports", "string", lambda o: ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}"
                                                           for p in spec(o).get("ports") or []) or "<none>")],
        "EndpointSlice": [("AddressType", "string", lambda o: o.get("addressType", "")),
                          ("Ports", "string", lambda o: _first_three([str(p.get("port", p.get("name") or "*"))
                                                                      for p in o.get("ports") or []])),
                          ("Endpoints", "string", lambda o: _first_three([a for e in o.get("endpoints") or []
                                                                          for a in e.get("addresses") or []]))],
        "ConfigMap": [("Data", "integer", lambda o: len(o.get("data") or {}) + len(o.get("binaryData") or {}))],
        "Secret": [("Type", "string", lambda o: o.get("type", "Opaque")),
                   ("Data", "integer", lambda o: len(o.get("data") or {}))],
        "Namespace": [("Status", "string", lambda o: status(o).get("phase", "Active"))],
        "Job": [("Status", "string", lambda o: next((c["type"] for c in status(o).get("conditions") or []
                                                      if c.get("type") in ("Complete", "Failed")), "Running")),
                ("Completions", "string", lambda o: _ready(status(o), "succeeded", spec(o).get("completions", 1)))],
        "PersistentVolumeClaim": [("Status", "string", lambda o: status(o).get("phase", "Pending")),
                                  ("Volume", "string", lambda o: spec(o).get("volumeName", "")),
                                  ("Capacity", "string", lambda o: (status(o).get("capacity") or {})
                                   .get("storage", "")),
                                  ("Access Modes", "string", lambda o: _access_modes(status(o).get("accessModes"))),
                                  ("StorageClass", "string", lambda o: spec(o).get("storageClassName", "")),
                                  ("VolumeAttributesClass", "string", lambda o: "<unset>")],
        "PersistentVolume": [("Capacity", "string", lambda o: (spec(o).get("capacity") or {}).get("storage", "")),
                             ("Access Modes", "string", lambda o: _access_modes(spec(o).get("accessModes"))),
                             ("Reclaim Policy", "string", lambda o: spec(o).get("persistentVolumeReclaimPolicy", "")),
                             ("Status", "string", lambda o: status(o).get("phase", "Pending")),
                             ("Claim", "string", _claim_of),
                             ("StorageClass", "string", lambda o: spec(o).get("storageClassName", "")),
                             ("VolumeAttributesClass", "string", lambda o: "<unset>"),
                             ("Reason", "string", lambda o: status(o).get("reason", ""))],
        "StorageClass": [("Provisioner", "string", lambda o: o.get("provisioner", "")),
                         ("ReclaimPolicy", "string", lambda o: o.get("reclaimPolicy", "Delete")),
                         ("VolumeBindingMode", "string", lambda o: o.get("volumeBindingMode", "Immediate")),
                         ("AllowVolumeExpansion", "boolean", lambda o: bool(o.get("allowVolumeExpansion")))],
        "CustomResourceDefinition": [("Created At", "date", lambda o: o["metadata"].get("creationTimestamp"))],
        "DaemonSet": [("Desired", "integer", lambda o: status(o).get("desiredNumberScheduled", 0)),
                      ("Current", "integer", lambda o: status(o).get("currentNumberScheduled", 0)),
                      ("Ready", "integer", lambda o: status(o).get("numberReady", 0)),
                      ("Up-to-date", "integer", lambda o: status(o).get("updatedNumberScheduled", 0)),
                      ("Available", "integer", lambda o: status(o).get("numberAvailable", 0)),
                      ("Node Selector", "string", lambda o: ",".join(
                          f"{k}={v}" for k, v in ((spec(o).get("template") or {}).get("spec", {}).get(
                              "nodeSelector") or {}).items()) or "<none>")],
        "CronJob": [("Schedule", "string", lambda o: spec(o).get("schedule", "")),
                    ("Timezone", "string", lambda o: spec(o).get("timeZone") or "<none>"),
                    ("Suspend", "boolean", lambda o: bool(spec(o).get("suspend"))),
                    ("Active", "integer", lambda o: len(status(o).get("active") or [])),
                    ("Last Schedule", "string", lambda o: age(status(o).get("lastScheduleTime"))
                     if status(o).get("lastScheduleTime") else "<none>")],
        "Node": [("Status", "string", _node_status),
                 ("Roles", "string", lambda o: ",".join(sorted(
                     k.split("/", 1)[1] for k in o["metadata"].get("labels") or {}
                     if k.startswith("node-role.kubernetes.io/"))) or "<none>")],
    }
    columns = [(*c, 0) for c in table.get(rt.kind, [])]
    extra: dict[str, list[tuple[str, str, Any, int]]] = {
        "Pod": [AGE, ("IP", "string", lambda o: status(o).get("podIP") or "<none>", _WIDE),
                ("Node", "string", lambda o: spec(o).get("nodeName") or "<none>", _WIDE),
                ("Nominated Node", "string", lambda o: status(o).get("nominatedNodeName") or "<none>", _WIDE),
                ("Readiness Gates", "string", lambda o: "<none>", _WIDE)],
        "Deployment": [AGE, *images, ("Selector", "string", _selector, _WIDE)],
        "ReplicaSet": [AGE, *images, ("Selector", "string", _selector, _WIDE)],
        "StatefulSet": [AGE, *images],
        "DaemonSet": [AGE, *images, ("Selector", "string", _selector, _WIDE)],
        "Job": [AGE, *images, ("Selector", "string", _selector, _WIDE)],
        "CronJob": [AGE, *images, ("Selector", "string", _selector, _WIDE)],
        "Node": [AGE, ("Version", "string", lambda o: (status(o).get("nodeInfo") or {}).get("kubeletVersion", ""), 0),
                 ("Internal-IP", "string", lambda o: _node_address(o, "InternalIP"), _WIDE),
                 ("External-IP", "string", lambda o: _node_address(o, "ExternalIP"), _WIDE),
                 ("OS-Image", "string", lambda o: (status(o).get("nodeInfo") or {}).get("osImage", ""), _WIDE),
                 ("Kernel-Version", "string", lambda o: (status(o).get("nodeInfo") or {}).get("kernelVersion", ""),
                  _WIDE),
                 ("Container-Runtime", "string", lambda o: (status(o).get("nodeInfo") or {}).get(
                     "containerRuntimeVersion", ""), _WIDE)],
    }
    return columns + extra.get(rt.kind, [])


# Events print without a leading Name (it comes last, wide only) and without Age.
_EVENT_COLUMNS: list[tuple[str, str, Any, int]] = [
    ("Last Seen", "string", lambda e: _event_time(e, "lastTimestamp", "eventTime", "firstTimestamp"), 0),
    ("Type", "string", lambda e: e.get("type", ""), 0),
    ("Reason", "string", lambda e: e.get("reason", ""), 0),
    ("Object", "string", lambda e: f"{str((e.get('involvedObject') or {}).get('kind', '')).lower()}/"
                                   f"{(e.get('involvedObject') or {}).get('name', '')}", 0),
    ("Subobject", "string", lambda e: (e.get("involvedObject") or {}).get("fieldPath", ""), _WIDE),
    ("Source", "string", _event_source, _WIDE),
    ("Message", "string", lambda e: str(e.get("message", "")).strip(), 0),
    ("First Seen", "string", lambda e: _event_time(e, "firstTimestamp", "eventTime"), _WIDE),
    ("Count", "string", lambda e: e.get("count", 1), _WIDE),
    ("Name", "string", lambda e: e["metadata"]["name"], _WIDE),
]


def _age(obj: Obj) -> str:
    return age(obj["metadata"].get("creationTimestamp"))


def table(rt: ResourceType, objects: list[Obj], meta: Obj, include: str) -> Obj:
    """The Table of ``objects``; ``meta``: its ListMeta (a list's ``continue`` included: kubectl asks for the
    next chunk with it, 500 rows at a time)."""
    columns: list[dict[str, Any]] = [{"name": "Name", "type": "string", "format": "name", "priority": 0,
                                      "description": "Name must be unique within a namespace."}]
    getters: list[Any] = [_name]
    has_age = False
    if rt.custom:
        for col in rt.printer_columns:
            kind = col.get("type", "string")
            columns.append({"name": col["name"], "type": kind, "format": col.get("format", ""),
                            "description": col.get("description", ""), "priority": col.get("priority", 0)})
            getters.append(lambda o, c=col, k=kind: _cell(jsonpath(o, c["jsonPath"]), k))
            has_age = has_age or col["name"] == "Age"
    else:
        builtin = _builtin_columns(rt)
        if rt.kind == "Event" and rt.group == "":
            columns, getters, builtin, has_age = [], [], _EVENT_COLUMNS, True
        for name, kind, getter, priority in builtin:
            if getter is None:  # AGE
                has_age = True
                getter = _age
            columns.append({"name": name, "type": kind, "format": "", "description": name, "priority": priority})
            getters.append(getter)
    if not has_age:
        columns.append({"name": "Age", "type": "string", "format": "", "priority": 0,
                        "description": "CreationTimestamp is a timestamp representing the server time when "
                                       "this object was created."})
        getters.append(_age)
    rows = []
    for obj in objects:
        row: Obj = {"cells": [g(obj) for g in getters]}
        if include == "Object":
            row["object"] = obj
        elif include != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": obj["metadata"]}
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta,
            "columnDefinitions": columns, "rows": rows}
