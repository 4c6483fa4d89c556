"""Decoding of the Kubernetes protobuf wire format for the few types typed clients send that way.

helm (through client-go's typed clientset) writes its release Secrets, and Namespaces with
``--create-namespace``, as ``application/vnd.kubernetes.protobuf`` (kubectl's ``create`` verbs do the
same for ConfigMaps, Secrets, Namespaces and ServiceAccounts): the magic ``k8s\\0`` then a
``runtime.Unknown`` envelope {1: typeMeta{1: apiVersion, 2: kind}, 2: raw object bytes}. A 415
reply does not make it fall back to JSON, so the sandbox decodes those types. Field numbers come
from upstream ``generated.proto`` files and are stable. Replies are always JSON, which the clients'
Accept header allows.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any

from .errors import ApiError

MAGIC = b"k8s\x00"

# field number -> (json name, type). Types: str, bytes, int, bool, time, strs (repeated string),
# map (map<string,string>), bmap (map<string,bytes>), msg:<Name>, msgs:<Name> (repeated message),
# raw (bytes kept as a JSON object: FieldsV1).
MESSAGES: dict[str, dict[int, tuple[str, str]]] = {
    "Unknown": {1: ("typeMeta", "msg:TypeMeta"), 2: ("raw", "bytes"), 3: ("contentEncoding", "str"),
                4: ("contentType", "str")},
    "TypeMeta": {1: ("apiVersion", "str"), 2: ("kind", "str")},
    "ObjectMeta": {1: ("name", "str"), 2: ("generateName", "str"), 3: ("namespace", "str"),
                   4: ("selfLink", "str"), 5: ("uid", "str"), 6: ("resourceVersion", "str"),
                   7: ("generation", "int"), 8: ("creationTimestamp", "time"),
                   9: ("deletionTimestamp", "time"), 10: ("deletionGracePeriodSeconds", "int"),
                   11: ("labels", "map"), 12: ("annotations", "map"),
                   13: ("ownerReferences", "msgs:OwnerReference"), 14: ("finalizers", "strs"),
                   17: ("managedFields", "msgs:ManagedFieldsEntry")},
    "OwnerReference": {1: ("kind", "str"), 3: ("name", "str"), 4: ("uid", "str"), 5: ("apiVersion", "str"),
                       6: ("controller", "bool"), 7: ("blockOwnerDeletion", "bool")},
    "ManagedFieldsEntry": {1: ("manager", "str"), 2: ("operation", "str"), 3: ("apiVersion", "str"),
                           4: ("time", "time"), 6: ("fieldsType", "str"), 7: ("fieldsV1", "msg:FieldsV1"),
                           8: ("subresource", "str")},
    "FieldsV1": {1: ("Raw", "bytes")},
    "Time": {1: ("seconds", "int"), 2: ("nanos", "int")},
    "Secret": {1: ("metadata", "msg:ObjectMeta"), 2: ("data", "bmap"), 3: ("type", "str"),
               4: ("stringData", "map"), 5: ("immutable", "bool")},
    "ConfigMap": {1: ("metadata", "msg:ObjectMeta"), 2: ("data", "map"), 3: ("binaryData", "bmap"),
                  4: ("immutable", "bool")},
    "ServiceAccount": {1: ("metadata", "msg:ObjectMeta"), 2: ("secrets", "msgs:ObjectReference"),
                       3: ("imagePullSecrets", "msgs:LocalObjectReference"),
                       4: ("automountServiceAccountToken", "bool")},
    "ObjectReference": {1: ("kind", "str"), 2: ("namespace", "str"), 3: ("name", "str"), 4: ("uid", "str"),
                        5: ("apiVersion", "str"), 6: ("resourceVersion", "str"), 7: ("fieldPath", "str")},
    "LocalObjectReference": {1: ("name", "str")},
    "RoleBinding": {1: ("metadata", "msg:ObjectMeta"), 2: ("subjects", "msgs:Subject"), 3: ("roleRef", "msg:RoleRef")},
    "ClusterRoleBinding": {1: ("metadata", "msg:ObjectMeta"), 2: ("subjects", "msgs:Subject"),
                           3: ("roleRef", "msg:RoleRef")},
    "Subject": {1: ("kind", "str"), 2: ("apiGroup", "str"), 3: ("name", "str"), 4: ("namespace", "str")},
    "RoleRef": {1: ("apiGroup", "str"), 2: ("kind", "str"), 3: ("name", "str")},
    "Namespace": {1: ("metadata", "msg:ObjectMeta"), 2: ("spec", "msg:NamespaceSpec"),
                  3: ("status", "msg:NamespaceStatus")},
    "NamespaceSpec": {1: ("finalizers", "strs")},
    "NamespaceStatus": {1: ("phase", "str")},
    "Role": {1: ("metadata", "msg:ObjectMeta"), 2: ("rules", "msgs:PolicyRule")},
    "ClusterRole": {1: ("metadata", "msg:ObjectMeta"), 2: ("rules", "msgs:PolicyRule"),
                    3: ("aggregationRule", "msg:AggregationRule")},
    "PolicyRule": {1: ("verbs", "strs"), 2: ("apiGroups", "strs"), 3: ("resources", "strs"),
                   4: ("resourceNames", "strs"), 5: ("nonResourceURLs", "strs")},
    "AggregationRule": {1: ("clusterRoleSelectors", "msgs:LabelSelector")},
    "LabelSelector": {1: ("matchLabels", "map"), 2: ("matchExpressions", "msgs:LabelSelectorRequirement")},
    "LabelSelectorRequirement": {1: ("key", "str"), 2: ("operator", "str"), 3: ("values", "strs")},
    # authorization.k8s.io/v1 and authentication.k8s.io/v1 reviews (kubectl auth can-i / whoami)
    "SelfSubjectAccessReview": {1: ("metadata", "msg:ObjectMeta"), 2: ("spec", "msg:SelfSubjectAccessReviewSpec")},
    "SelfSubjectAccessReviewSpec": {1: ("resourceAttributes", "msg:ResourceAttributes"),
                                    2: ("nonResourceAttributes", "msg:NonResourceAttributes")},
    "SubjectAccessReview": {1: ("metadata", "msg:ObjectMeta"), 2: ("spec", "msg:SubjectAccessReviewSpec")},
    "LocalSubjectAccessReview": {1: ("metadata", "msg:ObjectMeta"), 2: ("spec", "msg:SubjectAccessReviewSpec")},
    "SubjectAccessReviewSpec": {1: ("resourceAttributes", "msg:ResourceAttributes"),
                                2: ("nonResourceAttributes", "msg:NonResourceAttributes"), 3: ("user", "str"),
                                4: ("groups", "strs"), 6: ("uid", "str")},
    "ResourceAttributes": {1: ("namespace", "str"), 2: ("verb", "str"), 3: ("group", "str"), 4: ("version", "str"),
                           5: ("resource", "str"), 6: ("subresource", "str"), 7: ("name", "str")},
    "NonResourceAttributes": {1: ("path", "str"), 2: ("verb", "str")},
    "SelfSubjectRulesReview": {1: ("metadata", "msg:ObjectMeta"), 2: ("spec", "msg:SelfSubjectRulesReviewSpec")},
    "SelfSubjectRulesReviewSpec": {1: ("namespace", "str")},
    "SelfSubjectReview": {1: ("metadata", "msg:ObjectMeta")},
    "DeleteOptions": {1: ("gracePeriodSeconds", "int"), 2: ("preconditions", "msg:Preconditions"),
                      3: ("orphanDependents", "bool"), 4: ("propagationPolicy", "str"), 5: ("dryRun", "strs")},
    "Preconditions": {1: ("uid", "str"), 2: ("resourceVersion", "str")},
}


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, varint value or length-delimited bytes) in wire order."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            out.append((number, value))
        elif wire == 2:
            size, pos = _varint(data, pos)
            if pos + size > len(data):
                raise ValueError("truncated field")
            out.append((number, data[pos:pos + size]))
            pos += size
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
    return out


def _time(data: bytes) -> str:
    fields = decode_message(data, "Time")
    return datetime.fromtimestamp(fields.get("seconds", 0), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _map_entry(data: bytes) -> tuple[str, bytes]:
    key, value = "", b""
    for number, raw in _fields(data):
        if number == 1 and isinstance(raw, bytes):
            key = raw.decode()
        elif number == 2 and isinstance(raw, bytes):
            value = raw
    return key, value


def decode_message(data: bytes, name: str) -> dict[str, Any]:
    table = MESSAGES[name]
    out: dict[str, Any] = {}
    for number, raw in _fields(data):
        if number not in table:
            continue  # a newer field we do not know: the server would keep it; we cannot
        key, kind = table[number]
        if isinstance(raw, int):
            if kind == "bool":
                out[key] = bool(raw)
            else:
                out[key] = raw - (1 << 64) if raw >= 1 << 63 else raw
            continue
        if kind == "str":
            out[key] = raw.decode()
        elif kind == "bytes":
            out[key] = raw
        elif kind == "time":
            out[key] = _time(raw)
        elif kind == "strs":
            out.setdefault(key, []).append(raw.decode())
        elif kind in ("map", "bmap"):
            k, v = _map_entry(raw)
            out.setdefault(key, {})[k] = v.decode() if kind == "map" else base64.b64encode(v).decode()
        elif kind.startswith("msgs:"):
            out.setdefault(key, []).append(decode_message(raw, kind[5:]))
        elif kind.startswith("msg:"):
            out[key] = decode_message(raw, kind[4:])
    if name == "FieldsV1":
        fields: dict[str, Any] = json.loads(out.get("Raw") or b"{}")
        return fields
    return out


def decode(body: bytes) -> dict[str, Any]:
    """A protobuf request body as the equivalent JSON object; 415 for types not known here."""
    if not body.startswith(MAGIC):
        raise ApiError("UnsupportedMediaType", "protobuf body does not start with the k8s magic prefix")
    try:
        envelope = decode_message(body[len(MAGIC):], "Unknown")
        type_meta = envelope.get("typeMeta", {})
        kind = type_meta.get("kind", "")
        if kind not in MESSAGES or kind in ("Unknown", "TypeMeta", "Time"):
            raise ApiError("UnsupportedMediaType",
                           f"the sandbox cannot decode protobuf bodies of kind {kind!r}; send JSON")
        obj = decode_message(envelope.get("raw", b""), kind)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError("BadRequest", f"invalid protobuf body: {exc}") from exc
    obj["apiVersion"] = type_meta.get("apiVersion", "v1")
    obj["kind"] = kind
    return obj
