"""Object semantics over HTTP, as a kube-apiserver has them: the rules clients depend on."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from helmop_sandbox import Sandbox
from support import Raw

from tests.tools import eventually


def cm(name: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **extra}, "data": {"a": "1"}}


def deployment(name: str, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, **meta},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}}


def test_server_fields_and_resource_versions(http: Raw, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    code, first = http("POST", base, cm("one"))
    assert code == 201 and first["metadata"]["uid"] and first["metadata"]["creationTimestamp"]
    code, second = http("POST", base, cm("two"))
    assert int(second["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    first["data"] = {"a": "2"}
    code, updated = http("PUT", f"{base}/one", first)
    assert code == 200 and int(updated["metadata"]["resourceVersion"]) > int(second["metadata"]["resourceVersion"])
    assert updated["metadata"]["uid"] == first["metadata"]["uid"]
    # A write that changes nothing keeps the resourceVersion.
    code, same = http("PUT", f"{base}/one", updated)
    assert same["metadata"]["resourceVersion"] == updated["metadata"]["resourceVersion"]


def test_generation_counts_spec_changes_only(http: Raw, namespace: str) -> None:
    base = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    # The simulated controller keeps its hands off this one's status for an hour.
    code, obj = http("POST", base, deployment("gen", annotations={"sandbox.helmop.dev/ready-delay": "3600"}))
    assert obj["metadata"]["generation"] == 1
    code, obj = http("PATCH", f"{base}/gen", {"metadata": {"labels": {"x": "y"}}},
                     ctype="application/merge-patch+json")
    assert obj["metadata"]["generation"] == 1
    code, obj = http("PATCH", f"{base}/gen", {"spec": {"replicas": 3}}, ctype="application/merge-patch+json")
    assert obj["metadata"]["generation"] == 2
    _, obj = http("PATCH", f"{base}/gen/status", {"status": {"replicas": 9}}, ctype="application/merge-patch+json")
    assert obj["metadata"]["generation"] == 2 and obj["status"]["replicas"] == 9
    # Status sent to the main resource is ignored; spec sent to /status is ignored.
    _code, obj = http("PATCH", f"{base}/gen", {"status": {"replicas": 1}}, ctype="application/merge-patch+json")
    assert obj["status"]["replicas"] == 9


def test_optimistic_concurrency(http: Raw, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    code, obj = http("POST", base, cm("occ"))
    stale = dict(obj, data={"a": "stale"})
    http("PUT", f"{base}/occ", dict(obj, data={"a": "new"}))
    code, err = http("PUT", f"{base}/occ", stale)
    assert code == 409 and err["kind"] == "Status" and err["reason"] == "Conflict"
    assert "the object has been modified" in err["message"]
    code, err = http("PATCH", f"{base}/occ", {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]}},
                     ctype="application/merge-patch+json")
    assert code == 409
    # kopf's finalizer patches: a JSON patch guarded by a `test` of the resourceVersion (422 on mismatch,
    # as upstream answers a failed test operation).
    ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": obj["metadata"]["resourceVersion"]},
           {"op": "add", "path": "/metadata/finalizers", "value": ["x/y"]}]
    code, err = http("PATCH", f"{base}/occ", ops, ctype="application/json-patch+json")
    assert code == 422 and err["kind"] == "Status"
    code, current = http("GET", f"{base}/occ")
    ops[0]["value"] = current["metadata"]["resourceVersion"]
    code, patched = http("PATCH", f"{base}/occ", ops, ctype="application/json-patch+json")
    assert code == 200 and patched["metadata"]["finalizers"] == ["x/y"]


def test_errors_are_status_bodies(http: Raw, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    http("POST", base, cm("dup"))
    code, err = http("POST", base, cm("dup"))
    assert (code, err["reason"], err["details"]["name"]) == (409, "AlreadyExists", "dup")
    code, err = http("GET", f"{base}/missing")
    assert (code, err["reason"], err["message"]) == (404, "NotFound", 'configmaps "missing" not found')
    code, err = http("POST", "/api/v1/namespaces/no-such-ns/configmaps", cm("x"))
    assert (code, err["reason"], err["message"]) == (404, "NotFound", 'namespaces "no-such-ns" not found')
    bad = deployment("Bad_Name")
    bad["spec"]["template"]["spec"]["containers"][0].pop("name")
    code, err = http("POST", f"/apis/apps/v1/namespaces/{namespace}/deployments", bad)
    assert code == 422 and err["reason"] == "Invalid"
    fields = {c["field"]: c["reason"] for c in err["details"]["causes"]}
    assert fields == {"spec.template.spec.containers[0].name": "FieldValueRequired",
                      "metadata.name": "FieldValueInvalid"}
    code, err = http("GET", f"/apis/nothing.example/v1/namespaces/{namespace}/things")
    assert code == 404 and err["kind"] == "Status"


def test_generate_name_and_dry_run(http: Raw, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    code, made = http("POST", base, {"metadata": {"generateName": "gen-"}, "data": {}})
    assert code == 201 and made["metadata"]["name"].startswith("gen-") and len(made["metadata"]["name"]) > 4
    code, dry = http("POST", base, cm("dry"), dryRun="All")
    assert code == 201 and dry["metadata"]["name"] == "dry"
    assert http("GET", f"{base}/dry")[0] == 404
    code, _ = http("DELETE", f"{base}/{made['metadata']['name']}", dryRun="All")
    assert code == 200 and http("GET", f"{base}/{made['metadata']['name']}")[0] == 200


def test_finalizers_hold_deletion(http: Raw, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    http("POST", base, cm("held", finalizers=["example.com/hold"]))
    code, obj = http("DELETE", f"{base}/held")
    assert code == 200 and obj["metadata"]["deletionTimestamp"]
    code, _err = http("PATCH", f"{base}/held", {"metadata": {"finalizers": ["example.com/hold", "more/one"]}},
                     ctype="application/merge-patch+json")
    assert code == 422  # no new finalizers while deleting
    code, _ = http("PATCH", f"{base}/held", {"metadata": {"finalizers": None}}, ctype="application/merge-patch+json")
    assert code == 200 and http("GET", f"{base}/held")[0] == 404


def test_preconditions_on_delete(http: Raw, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    code, obj = http("POST", base, cm("pre"))
    code, _err = http("DELETE", f"{base}/pre", {"preconditions": {"uid": "not-it"}})
    assert code == 409
    code, _ = http("DELETE", f"{base}/pre", {"preconditions": {"uid": obj["metadata"]["uid"]}})
    assert code == 200 and http("GET", f"{base}/pre")[0] == 404


def test_namespace_deletion_cascades(http: Raw) -> None:
    http("POST", "/api/v1/namespaces", {"metadata": {"name": "doomed"}})
    http("POST", "/api/v1/namespaces/doomed/configmaps", cm("plain"))
    http("POST", "/api/v1/namespaces/doomed/configmaps", cm("held", finalizers=["example.com/hold"]))
    code, ns = http("DELETE", "/api/v1/namespaces/doomed")
    assert code == 200 and ns["status"]["phase"] == "Terminating"
    assert eventually(lambda: http("GET", "/api/v1/namespaces/doomed/configmaps/plain")[0] == 404)
    code, err = http("POST", "/api/v1/namespaces/doomed/configmaps", cm("late"))
    assert code == 403 and "being terminated" in err["message"]
    assert http("GET", "/api/v1/namespaces/doomed")[0] == 200  # still held by the finalizer of `held`
    http("PATCH", "/api/v1/namespaces/doomed/configmaps/held", {"metadata": {"finalizers": None}},
         ctype="application/merge-patch+json")
    assert eventually(lambda: http("GET", "/api/v1/namespaces/doomed")[0] == 404)


def _owned(http: Raw, ns: str, owner: dict[str, Any], name: str) -> None:
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": owner["metadata"]["name"],
           "uid": owner["metadata"]["uid"], "blockOwnerDeletion": True}
    http("POST", f"/api/v1/namespaces/{ns}/configmaps", cm(name, ownerReferences=[ref]))


@pytest.mark.parametrize("policy", ["Background", "Foreground", "Orphan"])
def test_owner_reference_garbage_collection(http: Raw, namespace: str, policy: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    _, owner = http("POST", base, cm("owner"))
    _owned(http, namespace, owner, "child")
    code, body = http("DELETE", f"{base}/owner", {"propagationPolicy": policy})
    assert code == 200
    if policy == "Orphan":
        assert eventually(lambda: http("GET", f"{base}/owner")[0] == 404)
        code, child = http("GET", f"{base}/child")
        assert code == 200 and not child["metadata"].get("ownerReferences")
        return
    if policy == "Foreground":
        assert body["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert eventually(lambda: http("GET", f"{base}/child")[0] == 404)
    assert eventually(lambda: http("GET", f"{base}/owner")[0] == 404)


def test_selectors_and_pagination(http: Raw, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    for i, (env, tier) in enumerate([("prod", "web"), ("dev", "web"), ("prod", "db"), ("qa", None)]):
        labels = {"env": env, **({"tier": tier} if tier else {}), "n": str(i)}
        http("POST", base, cm(f"c{i}", labels=labels))

    def names(**params: Any) -> list[str]:
        code, body = http("GET", base, **params)
        assert code == 200, body
        return [o["metadata"]["name"] for o in body["items"]]

    assert names(labelSelector="env=prod") == ["c0", "c2"]
    assert names(labelSelector="env==prod,tier!=web") == ["c2"]
    assert names(labelSelector="env in (dev,qa)") == ["c1", "c3"]
    assert names(labelSelector="env notin (dev,qa),tier") == ["c0", "c2"]
    assert names(labelSelector="n,!tier") == ["c3"]  # (kube-root-ca.crt has no labels either)
    assert names(labelSelector="n>1") == ["c2", "c3"]
    assert names(labelSelector="n<1") == ["c0"]
    assert names(fieldSelector="metadata.name=c1") == ["c1"]
    assert names(fieldSelector="metadata.name!=c1,metadata.namespace=" + namespace) == [
        "c0", "c2", "c3", "kube-root-ca.crt"]
    code, _err = http("GET", base, fieldSelector="spec.bogus=1")
    assert code == 400
    code, page = http("GET", base, limit=3, labelSelector="n")
    assert [o["metadata"]["name"] for o in page["items"]] == ["c0", "c1", "c2"]
    assert page["metadata"]["remainingItemCount"] == 1
    code, rest = http("GET", base, limit=3, labelSelector="n", **{"continue": page["metadata"]["continue"]})
    assert [o["metadata"]["name"] for o in rest["items"]] == ["c3"] and "continue" not in rest["metadata"]
    code, _ = http("DELETE", base, labelSelector="env=prod")
    assert names() == ["c1", "c3", "kube-root-ca.crt"]


def _watch(http: Raw, path: str, **params: Any) -> Iterator[dict[str, Any]]:
    with http.session.get(http.base + path, params={"watch": "true", **params}, stream=True) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line:
                yield json.loads(line)


def test_watch_resume_bookmarks_and_timeout(http: Raw, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    _, obj = http("POST", base, cm("w"))
    start = obj["metadata"]["resourceVersion"]
    http("PATCH", f"{base}/w", {"data": {"a": "2"}}, ctype="application/merge-patch+json")
    http("DELETE", f"{base}/w")
    started = time.monotonic()
    events = list(_watch(http, base, resourceVersion=start, timeoutSeconds=1))
    assert [e["type"] for e in events] == ["MODIFIED", "DELETED"]
    assert 0.9 < time.monotonic() - started < 5
    # No resourceVersion: the current state first, as ADDED events; then changes as they come.
    http("POST", base, cm("x1"))
    threading.Timer(0.3, lambda: http("POST", base, cm("x2"))).start()
    seen = []
    mine = "metadata.name!=kube-root-ca.crt"  # every namespace has it
    for event in _watch(http, base, timeoutSeconds=2, fieldSelector=mine):
        seen.append((event["type"], event["object"]["metadata"]["name"]))
    assert seen == [("ADDED", "x1"), ("ADDED", "x2")]
    # Initial events end with a bookmark when asked (client-go's WatchList).
    events = list(_watch(http, base, sendInitialEvents="true", allowWatchBookmarks="true",
                         resourceVersionMatch="NotOlderThan", timeoutSeconds=1, fieldSelector=mine))
    assert [e["type"] for e in events[:3]] == ["ADDED", "ADDED", "BOOKMARK"]
    assert events[2]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_watch_label_selector_sees_objects_leave(http: Raw, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    _, obj = http("POST", base, cm("sel", labels={"keep": "yes"}))
    threading.Timer(0.3, lambda: http("PATCH", f"{base}/sel", {"metadata": {"labels": {"keep": "no"}}},
                                      ctype="application/merge-patch+json")).start()
    events = list(_watch(http, base, labelSelector="keep=yes", resourceVersion=obj["metadata"]["resourceVersion"],
                         timeoutSeconds=1))
    assert [e["type"] for e in events] == ["DELETED"]


def test_watch_too_old_resource_version_is_gone() -> None:
    with Sandbox(history=5) as small:
        raw = Raw(small)
        _, first = raw("POST", "/api/v1/namespaces/default/configmaps", cm("c0"))
        for i in range(1, 10):
            raw("POST", "/api/v1/namespaces/default/configmaps", cm(f"c{i}"))
        events = list(_watch(raw, "/api/v1/namespaces/default/configmaps",
                             resourceVersion=first["metadata"]["resourceVersion"], timeoutSeconds=1))
        assert len(events) == 1 and events[0]["type"] == "ERROR"
        assert events[0]["object"]["code"] == 410 and events[0]["object"]["reason"] == "Expired"
        raw.session.close()


def test_strategic_merge_patch_uses_merge_keys(http: Raw, namespace: str) -> None:
    base = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    body = deployment("smp")
    body["spec"]["template"]["spec"]["containers"].append({"name": "side", "image": "busybox:1",
                                                           "env": [{"name": "A", "value": "1"}]})
    http("POST", base, body)
    patch = {"spec": {"template": {"spec": {"containers": [
        {"name": "side", "env": [{"name": "B", "value": "2"}]},
        {"name": "c", "$patch": "delete"}]}}}}
    code, obj = http("PATCH", f"{base}/smp", patch, ctype="application/strategic-merge-patch+json")
    assert code == 200
    containers = obj["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["side"]
    assert containers[0]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert containers[0]["image"] == "busybox:1"
    code, _err = http("PATCH", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x", {},
                     ctype="application/strategic-merge-patch+json")
    assert code == 404


def _varint(n: int) -> bytes:
    out = b""
    while True:
        byte, n = n & 0x7F, n >> 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def test_protobuf_secret_as_typed_clients_send_it(http: Raw, namespace: str) -> None:
    meta = _field(1, b"proto-secret") + _field(11, _field(1, b"owner") + _field(2, b"helm"))
    secret = _field(1, meta) + _field(2, _field(1, b"release") + _field(2, b"\x00\x01binary")) + _field(3, b"Opaque")
    envelope = b"k8s\x00" + _field(1, _field(1, b"v1") + _field(2, b"Secret")) + _field(2, secret)
    code, obj = http("POST", f"/api/v1/namespaces/{namespace}/secrets", raw=envelope,
                     ctype="application/vnd.kubernetes.protobuf")
    assert code == 201, obj
    assert obj["metadata"]["labels"] == {"owner": "helm"} and obj["type"] == "Opaque"
    assert obj["data"]["release"] == "AAFiaW5hcnk="
    code, _err = http("POST", f"/api/v1/namespaces/{namespace}/secrets", raw=b"k8s\x00\xff\xff",
                     ctype="application/vnd.kubernetes.protobuf")
    assert 400 <= code < 500


def test_simulated_failures(http: Raw, namespace: str) -> None:
    fail = {"sandbox.helmop.dev/simulate": "fail"}
    http("POST", f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment("bad", annotations=fail))
    job = {"metadata": {"name": "job", "annotations": fail},
           "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}}
    http("POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", job)
    http("POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", dict(job, metadata={"name": "ok"}))

    def conditions(path: str) -> dict[str, str]:
        return {c["type"]: c["status"] for c in http("GET", path)[1].get("status", {}).get("conditions", [])}

    jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    assert eventually(lambda: conditions(f"{jobs}/job").get("Failed") == "True")
    assert eventually(lambda: conditions(f"{jobs}/ok").get("Complete") == "True")
    deploy = f"/apis/apps/v1/namespaces/{namespace}/deployments/bad"
    assert eventually(lambda: conditions(deploy).get("Available") == "False")


@pytest.mark.parametrize("body,ctype", [
    (b"{not json", "application/json"),
    (b"[1, 2]", "application/json"),
    (b'{"metadata": "nope"}', "application/json"),
    (b'{"metadata": {"name": 5}}', "application/json"),
    (b"a: [unclosed", "application/apply-patch+yaml"),
    (b'{"data": {"k": 1}}', "application/json"),
    (b'{"metadata": {"name": "x", "labels": {"bad key!": "v"}}}', "application/json"),
])
def test_bad_bodies_get_4xx_never_500(http: Raw, namespace: str, body: bytes, ctype: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    if "apply" in ctype:
        code, err = http("PATCH", f"{base}/x", raw=body, ctype=ctype, fieldManager="t")
    else:
        code, err = http("POST", base, raw=body, ctype=ctype)
    assert 400 <= code < 500 and err["kind"] == "Status", (code, err)
    # Nothing was stored by the failed request.
    assert http("GET", f"{base}/x")[0] == 404


def test_unauthenticated_requests_are_refused(sandbox: Sandbox) -> None:
    r = requests.get(sandbox.url + "/api/v1/namespaces", verify=str(sandbox.ca_file))
    assert r.status_code == 401 and r.json()["reason"] == "Unauthorized"
    assert requests.get(sandbox.url + "/version", verify=str(sandbox.ca_file)).status_code == 200


def test_metadata_only_views(http: Raw, namespace: str) -> None:
    """What a metadata informer asks for (client-go's metadata client): names and versions, never data."""
    base = f"/api/v1/namespaces/{namespace}/secrets"
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "meta", "labels": {"a": "b"}},
              "stringData": {"password": "hunter2"}}
    assert http("POST", base, secret)[0] == 201
    one = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1," \
          "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
    listing = one.replace("PartialObjectMetadata;", "PartialObjectMetadataList;")
    got = http.session.get(http.base + base + "/meta", headers={"Accept": one}).json()
    assert got["kind"] == "PartialObjectMetadata" and got["apiVersion"] == "meta.k8s.io/v1"
    assert got["metadata"]["labels"] == {"a": "b"} and "data" not in got and "hunter2" not in json.dumps(got)
    listed = http.session.get(http.base + base, headers={"Accept": listing}).json()
    assert listed["kind"] == "PartialObjectMetadataList" and listed["metadata"]["resourceVersion"]
    assert [i["kind"] for i in listed["items"]] == ["PartialObjectMetadata"] and "data" not in listed["items"][0]
    # The form must fit: an object asked as a list (or a list as an object) is 406, as the API server says.
    r = http.session.get(http.base + base, headers={"Accept": "application/json;as=PartialObjectMetadata;"
                                                              "g=meta.k8s.io;v=v1"})
    assert r.status_code == 406 and "is a list" in r.json()["message"]
    with http.session.get(http.base + base, params={"watch": "true", "resourceVersion": listed["metadata"][
            "resourceVersion"], "timeoutSeconds": "2"}, headers={"Accept": one}, stream=True) as r:
        assert http("PATCH", base + "/meta", {"metadata": {"labels": {"a": "c"}}},
                    ctype="application/merge-patch+json")[0] == 200
        event = json.loads(next(line for line in r.iter_lines() if line))
    assert event["type"] == "MODIFIED" and event["object"]["kind"] == "PartialObjectMetadata"
    assert event["object"]["metadata"]["labels"] == {"a": "c"} and "data" not in event["object"]
    # helm's release records can be left out of a watch by their type
    selected = http.session.get(http.base + base, params={"fieldSelector": "type!=helm.sh/release.v1"},
                                headers={"Accept": listing}).json()
    assert [i["metadata"]["name"] for i in selected["items"]] == ["meta"]


def test_rollout_strategies_are_defaulted_field_by_field(http: Raw, namespace: str) -> None:
    """`strategy: {type: RollingUpdate}` alone gets its parameters, as SetDefaults_Deployment gives them
    (helm 3's readiness check dereferences maxUnavailable and panics without it)."""
    base = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    body = deployment("strategy")
    body["spec"]["strategy"] = {"type": "RollingUpdate"}
    code, created = http("POST", base, body)
    assert code == 201
    assert created["spec"]["strategy"] == {"type": "RollingUpdate",
                                           "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}
    body = deployment("recreate")
    body["spec"]["strategy"] = {"type": "Recreate"}
    assert http("POST", base, body)[1]["spec"]["strategy"] == {"type": "Recreate"}


def test_boolean_parameters_read_as_the_api_server_reads_them(http: Raw, namespace: str) -> None:
    """Go's strconv.ParseBool: the official Python client 36.x sends `watch=True`."""
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    _, listed = http("GET", base)
    with http.session.get(http.base + base, params={"watch": "True", "timeoutSeconds": "2",
                                                    "resourceVersion": listed["metadata"]["resourceVersion"]},
                          stream=True) as r:
        assert http("POST", base, cm("bool"))[0] == 201
        event = json.loads(next(line for line in r.iter_lines() if line))
    assert event["type"] == "ADDED" and event["object"]["metadata"]["name"] == "bool"
    assert http("GET", base, watch="False")[1]["kind"] == "ConfigMapList"
    code, body = http("GET", base, watch="yes")
    assert code == 400 and "invalid boolean value" in body["message"]


def test_defaults_clients_rely_on(http: Raw, namespace: str) -> None:
    code, secret = http("POST", f"/api/v1/namespaces/{namespace}/secrets",
                        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "typeless"}, "type": ""})
    assert code == 201 and secret["type"] == "Opaque"
    _, ns = http("GET", f"/api/v1/namespaces/{namespace}")
    assert ns["metadata"]["labels"]["kubernetes.io/metadata.name"] == namespace
    _, default = http("GET", "/api/v1/namespaces/default")
    assert default["metadata"]["labels"]["kubernetes.io/metadata.name"] == "default"
    code, svc = http("POST", f"/api/v1/namespaces/{namespace}/services",
                     {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "plain"},
                      "spec": {"ports": [{"port": 80}]}})
    assert code == 201 and svc["status"] == {"loadBalancer": {}}


def test_error_bodies_are_byte_for_byte_the_api_servers(sandbox: Sandbox, namespace: str) -> None:
    session = Raw(sandbox).session
    reply = session.get(f"{sandbox.url}/api/v1/namespaces/{namespace}/configmaps/nope")
    assert reply.status_code == 404
    assert reply.content == (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
                             b'"configmaps \\"nope\\" not found","reason":"NotFound","details":{"name":"nope",'
                             b'"kind":"configmaps"},"code":404}\n')
    reply = session.get(f"{sandbox.url}/apis/apps/v1/namespaces/{namespace}/deployments/<x>")
    assert b'\\u003cx\\u003e' in reply.content and b"<x>" not in reply.content  # Go's HTML-safe escapes
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "caf\u00e9-x"}}
    reply = session.post(f"{sandbox.url}/api/v1/namespaces/{namespace}/configmaps", json=body)
    assert reply.status_code == 422
    assert reply.content.endswith(b'"code":422}\n') and b'"group":""' not in reply.content  # omitempty
    assert b'"details":{"name":"caf' in reply.content and b'"kind":"ConfigMap","causes":[{"reason":' in reply.content
    assert "caf\u00e9".encode() in reply.content  # UTF-8, not \\u escapes


def test_rbac_names_are_path_segments(http: Raw, namespace: str) -> None:
    """RBAC objects are named like system:controller:..., as kube-apiserver validates them
    (ValidatePathSegmentName: not "." or "..", no "/" or "%")."""
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    code, _ = http("POST", f"{rbac}/clusterroles", {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                                                    "metadata": {"name": f"metallb:{namespace}"}, "rules": []})
    assert code == 201
    code, _ = http("POST", f"{rbac}/namespaces/{namespace}/roles",
                   {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "Mixed:Case"},
                    "rules": []})
    assert code == 201
    for bad in ("..", "a%b"):
        code, answer = http("POST", f"{rbac}/namespaces/{namespace}/roles",
                            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": bad},
                             "rules": []})
        assert code == 422 and "may not" in answer["message"], answer
    code, _ = http("POST", f"/api/v1/namespaces/{namespace}/configmaps",
                   {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a:b"}})
    assert code == 422  # other kinds keep DNS names
