"""What the API server does to a built-in object before storing it besides schema checks.

Defaulting of the fields clients rely on (Service cluster IPs, workload replicas, Secret
``stringData``), validation of object metadata (names, labels), and immutable fields. Each rule
here is one a chart or client was seen to depend on; it is not the whole upstream validation.
"""

from __future__ import annotations

import base64
import ipaddress
import itertools
import re
from typing import Any

from .errors import Cause

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
# Kinds whose names must be DNS labels (63 chars, no dots) rather than subdomains.
_LABEL_NAMED = {"Namespace", "Service"}
# Kinds whose names need only be a path segment (ValidatePathSegmentName): RBAC's, as in system:controller:...
_SEGMENT_NAMED = {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}
_IPS = (str(ip) for ip in itertools.islice(ipaddress.ip_network("10.96.0.0/12").hosts(), 10, None))
_NODE_PORTS = itertools.count(30000)


def _qualified_name_problem(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return "prefix part must be a lowercase RFC 1123 subdomain"
    if not name or len(name) > 63 or not _LABEL_NAME.match(name):
        return ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
                "end with an alphanumeric character, at most 63 characters")
    return None


def metadata_problems(obj: dict[str, Any], kind: str, namespaced: bool) -> list[Cause]:
    meta = obj.get("metadata") or {}
    causes = []
    name = meta.get("name", "")
    if not name:
        causes.append(Cause("FieldValueRequired", "Required value: name or generateName is required",
                            "metadata.name"))
    elif kind in _SEGMENT_NAMED:
        segment = ("may not be '.'" if name == "." else "may not be '..'" if name == ".." else
                   next((f"may not contain '{c}'" for c in "/%" if c in name), ""))
        if segment:
            causes.append(Cause("FieldValueInvalid", f'Invalid value: "{name}": {segment}', "metadata.name"))
    else:
        rule, limit, pattern = (("RFC 1123 label", 63, _DNS_LABEL) if kind in _LABEL_NAMED
                                else ("RFC 1123 subdomain", 253, _DNS_SUBDOMAIN))
        if len(name) > limit or not pattern.match(name):
            causes.append(Cause("FieldValueInvalid",
                                f'Invalid value: "{name}": a lowercase {rule} must consist of lower case '
                                f"alphanumeric characters, '-' or '.', and must start and end with an "
                                f"alphanumeric character (at most {limit} characters)", "metadata.name"))
    for key, value in (meta.get("labels") or {}).items():
        problem = _qualified_name_problem(key)
        if problem:
            causes.append(Cause("FieldValueInvalid", f'Invalid value: "{key}": {problem}', "metadata.labels"))
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            causes.append(Cause("FieldValueInvalid",
                                f'Invalid value: "{value}": a valid label must be an empty string or '
                                f"consist of alphanumeric characters, '-', '_' or '.' (at most 63)",
                                "metadata.labels"))
    for key in meta.get("annotations") or {}:
        problem = _qualified_name_problem(key)
        if problem:
            causes.append(Cause("FieldValueInvalid", f'Invalid value: "{key}": {problem}',
                                "metadata.annotations"))
    if not namespaced and meta.get("namespace"):
        meta.pop("namespace")  # the server drops it for cluster-scoped kinds
    return causes + _size_problems(obj, kind)


MAX_DATA_BYTES = 1 << 20  # corev1.MaxSecretSize: the data of a Secret or ConfigMap, decoded


def _size_problems(obj: dict[str, Any], kind: str) -> list[Cause]:
    """ValidateSecret / ValidateConfigMap: the data may not exceed 1 MiB in all."""
    if kind == "Secret":
        size = sum(len(base64.b64decode(str(v), validate=False)) for v in (obj.get("data") or {}).values())
        field = "data"
    elif kind == "ConfigMap":
        size = sum(len(str(v).encode()) for v in (obj.get("data") or {}).values())
        size += sum(len(base64.b64decode(str(v), validate=False)) for v in (obj.get("binaryData") or {}).values())
        field = ""
    else:
        return []
    if size <= MAX_DATA_BYTES:
        return []
    return [Cause("FieldValueTooLong", f"Too long: may not be more than {MAX_DATA_BYTES} bytes", field)]


def _default_pod_spec(spec: dict[str, Any]) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    for container in spec.get("containers") or []:
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        image = str(container.get("image", ""))
        container.setdefault("imagePullPolicy", "Always" if image.endswith(":latest") or ":" not in
                             image.rsplit("/", 1)[-1] else "IfNotPresent")
        for port in container.get("ports") or []:
            port.setdefault("protocol", "TCP")


def apply_defaults(obj: dict[str, Any], kind: str, old: dict[str, Any] | None) -> None:
    """Defaults the server sets on create and update of built-in kinds."""
    spec = obj.get("spec")
    if kind == "Secret":
        if not obj.get("type"):  # absent, null or "" (what some clients send): Opaque, as upstream
            obj["type"] = "Opaque"
        extra = obj.pop("stringData", None) or {}
        if extra:
            data = obj.setdefault("data", {}) or {}
            obj["data"] = data
            for key, value in extra.items():
                data[key] = base64.b64encode(str(value).encode()).decode()
    elif kind == "Namespace":
        # Set on every write, as the NamespaceDefaultLabelName feature does: selectors rely on it.
        meta = obj.setdefault("metadata", {})
        meta["labels"] = {**(meta.get("labels") or {}), "kubernetes.io/metadata.name": meta.get("name", "")}
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj.setdefault("status", {}).setdefault("phase", "Active")
    elif kind == "Service" and isinstance(spec, dict):
        _default_service(spec, old)
        obj.setdefault("status", {}).setdefault("loadBalancer", {})
    elif kind in ("Deployment", "StatefulSet", "ReplicaSet") and isinstance(spec, dict):
        spec.setdefault("replicas", 1)
        if kind != "ReplicaSet":  # a ReplicaSet has no history of its own
            spec.setdefault("revisionHistoryLimit", 10)
        if kind == "Deployment":
            spec.setdefault("progressDeadlineSeconds", 600)
            _default_strategy(spec, "strategy", {"maxUnavailable": "25%", "maxSurge": "25%"})
        if kind == "StatefulSet":
            spec.setdefault("podManagementPolicy", "OrderedReady")
            _default_strategy(spec, "updateStrategy", {"partition": 0})
    elif kind == "DaemonSet" and isinstance(spec, dict):
        _default_strategy(spec, "updateStrategy", {"maxUnavailable": 1, "maxSurge": 0})
    elif kind == "Job" and isinstance(spec, dict):
        spec.setdefault("completions", 1)
        spec.setdefault("parallelism", 1)
        spec.setdefault("backoffLimit", 6)
        tmpl = spec.get("template") or {}
        if isinstance(tmpl.get("spec"), dict):
            tmpl["spec"].setdefault("restartPolicy", "Never")
    elif kind == "PersistentVolumeClaim" and isinstance(spec, dict):
        spec.setdefault("volumeMode", "Filesystem")
        obj.setdefault("status", {}).setdefault("phase", "Pending")
    elif kind == "Pod" and isinstance(spec, dict):
        _default_pod_spec(spec)
        obj.setdefault("status", {}).setdefault("phase", "Pending")
    template = spec.get("template") if isinstance(spec, dict) else None
    if isinstance(template, dict) and isinstance(template.get("spec"), dict) and kind != "PodTemplate":
        _default_pod_spec(template["spec"])


def _default_strategy(spec: dict[str, Any], field: str, rolling: dict[str, Any]) -> None:
    """As SetDefaults_Deployment/StatefulSet/DaemonSet: field by field, so ``{type: RollingUpdate}``
    alone gets its rollingUpdate parameters (helm 3's readiness check dereferences maxUnavailable)."""
    strategy = spec.setdefault(field, {})
    if not isinstance(strategy, dict):
        return
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        params = strategy.setdefault("rollingUpdate", {})
        if isinstance(params, dict):
            for key, value in rolling.items():
                params.setdefault(key, value)


def _default_service(spec: dict[str, Any], old: dict[str, Any] | None) -> None:
    old_spec = (old or {}).get("spec") or {}
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec["type"] != "ExternalName":
        if "clusterIP" not in spec or spec.get("clusterIP") == "":
            spec["clusterIP"] = old_spec.get("clusterIP") or next(_IPS)
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        spec.setdefault("internalTrafficPolicy", "Cluster")
    old_ports = {p.get("port"): p for p in old_spec.get("ports") or []}
    for port in spec.get("ports") or []:
        port.setdefault("protocol", "TCP")
        port.setdefault("targetPort", port.get("port"))
        if spec["type"] in ("NodePort", "LoadBalancer") and "nodePort" not in port:
            port["nodePort"] = old_ports.get(port.get("port"), {}).get("nodePort") or next(_NODE_PORTS)
    if spec["type"] in ("NodePort", "LoadBalancer"):
        spec.setdefault("externalTrafficPolicy", "Cluster")


# (kind, path) -> fields that may not change once set; the server answers "field is immutable".
_IMMUTABLE = {
    "Deployment": [("spec", "selector")],
    "ReplicaSet": [("spec", "selector")],
    "DaemonSet": [("spec", "selector")],
    "StatefulSet": [("spec", "selector"), ("spec", "serviceName"), ("spec", "volumeClaimTemplates")],
    "Job": [("spec", "selector"), ("spec", "template"), ("spec", "completions")],
    "Service": [("spec", "clusterIP")],
    "PersistentVolumeClaim": [("spec", "storageClassName"), ("spec", "accessModes"), ("spec", "volumeMode")],
}


def _dig(obj: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def immutable_problems(old: dict[str, Any], new: dict[str, Any], kind: str) -> list[Cause]:
    causes = []
    for path in _IMMUTABLE.get(kind, []):
        before = _dig(old, path)
        if before is not None and _dig(new, path) != before:
            causes.append(Cause("FieldValueInvalid", "field is immutable", ".".join(path)))
    if kind in ("Secret", "ConfigMap") and old.get("immutable"):
        for part in ("data", "binaryData", "stringData", "immutable"):
            if old.get(part) != new.get(part):
                causes.append(Cause("FieldValueForbidden",
                                    "Forbidden: field is immutable when `immutable` is set", part))
    return causes
