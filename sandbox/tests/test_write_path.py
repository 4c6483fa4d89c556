"""The write path's shortcuts keep its meaning: writes copy only what they change (a version shares the rest with
the one before, so no write may change a version already read or watched), validators are compiled once per schema
(a CRD's new schema is the one that judges), and the endpoints controller finds the Services an object concerns
through an index (so a label or selector change must move the object between Services), as do lists by label."""

from __future__ import annotations

import json
from typing import Any

from helmop_sandbox import Sandbox
from helmop_sandbox.apiserver import DeleteOptions, WriteOptions
from helmop_sandbox.endpoints import address
from support import Raw

from tests.tools import eventually

WRITER = WriteOptions(manager="pytest")


def _deployment(name: str, labels: dict[str, str], **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, **meta},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}}


def _configmap(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}}


def test_no_write_changes_a_version_read_before_it(sandbox: Sandbox, namespace: str) -> None:
    """Every kind of write that copies only part of an object: the controllers' status writes, a scale, a status
    update, a deletion held by a finalizer, the finalizer's removal, a rollout's ReplicaSet scaled down."""
    api = sandbox.api
    assert api is not None
    rt, rs_rt = api.type_of(("apps", "deployments")), api.type_of(("apps", "replicasets"))
    seen: list[tuple[dict[str, Any], str]] = []

    def keep(obj: dict[str, Any]) -> dict[str, Any]:
        seen.append((obj, json.dumps(obj, sort_keys=True)))
        return obj

    pods = api.type_of(("", "pods"))
    pod = {"metadata": {"name": "kept", "finalizers": ["example.com/hold"]},
           "spec": {"containers": [{"name": "c", "image": "c:1"}]}}
    keep(api.create(pods, namespace, pod, WRITER))  # the version the kubelet's status write starts from
    eventually(lambda: (keep(api.get(pods, namespace, "kept")).get("status") or {}).get("phase") == "Running")
    api.delete(pods, namespace, "kept", DeleteOptions())
    api.remove_finalizer(pods, keep(api.get(pods, namespace, "kept")), "example.com/hold")
    eventually(lambda: api.store.get(pods.storage_key, namespace, "kept") is None)
    keep(api.create(rt, namespace, _deployment("kept", {"app": "kept"}, finalizers=["example.com/hold"]), WRITER))
    eventually(lambda: (keep(api.get(rt, namespace, "kept")).get("status") or {}).get("readyReplicas") == 1)
    first_rs = eventually(lambda: list(api.store.items(rs_rt.storage_key, namespace)))[0]
    keep(first_rs)
    api.set_scale(rt, namespace, "kept", {"spec": {"replicas": 2}}, WRITER)
    keep(api.get(rt, namespace, "kept"))
    changed = _deployment("kept", {"app": "kept"})
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:2"  # a new ReplicaSet, the first down
    api.patch(rt, namespace, "kept", "merge", {"spec": changed["spec"]}, WRITER)
    eventually(lambda: (keep(api.get(rs_rt, namespace, first_rs["metadata"]["name"]))["spec"]["replicas"] == 0))
    current = keep(api.get(rt, namespace, "kept"))
    api.update(rt, namespace, "kept", {**current, "status": {"replicas": 7}}, WRITER, "status")
    keep(api.get(rt, namespace, "kept"))
    api.delete(rt, namespace, "kept", DeleteOptions())
    held = keep(api.get(rt, namespace, "kept"))
    assert held["metadata"]["deletionTimestamp"]
    api.remove_finalizer(rt, held, "example.com/hold")
    eventually(lambda: api.store.get(rt.storage_key, namespace, "kept") is None)
    assert [json.dumps(obj, sort_keys=True) for obj, _ in seen] == [text for _, text in seen]


def test_neither_a_body_written_nor_an_object_read_shares_state_with_the_store(
        sandbox: Sandbox, http: Raw, namespace: str) -> None:
    api = sandbox.api
    assert api is not None
    rt = api.type_of(("", "configmaps"))
    body = {"metadata": {"name": "mine", "labels": {"a": "1"}}, "data": {"k": "v"}}
    api.create(rt, namespace, body, WRITER)
    body["metadata"]["labels"]["a"] = "changed"  # the caller's own object, changed after the write
    body["data"]["k"] = "changed"
    path = f"/api/v1/namespaces/{namespace}/configmaps/mine"
    code, read = http("GET", path)
    assert code == 200 and read["metadata"]["labels"] == {"a": "1"} and read["data"] == {"k": "v"}
    read["data"]["k"] = "changed by the reader"
    assert http("GET", path)[1]["data"] == {"k": "v"}
    assert api.get(rt, namespace, "mine")["data"] == {"k": "v"}


def _crd(group: str, max_length: int) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": max_length}}}}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"things.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": schema}}]}}


def test_a_crd_update_brings_its_new_schema_to_validation(http: Raw, namespace: str) -> None:
    group = f"{namespace}.example.com"
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    code, crd = http("POST", crds, _crd(group, 10))
    assert code == 201, crd
    things = f"/apis/{group}/v1/namespaces/{namespace}/things"
    thing = {"apiVersion": f"{group}/v1", "kind": "Thing", "metadata": {"name": "a"}, "spec": {"name": "x" * 8}}
    try:
        code, created = eventually(lambda: (found := http("POST", things, thing))[0] != 404 and found)
        assert code == 201, created
        code, crd = http("PUT", f"{crds}/things.{group}", {**_crd(group, 5), "metadata": crd["metadata"]})
        assert code == 200, crd
        code, refused = http("POST", things, {**thing, "metadata": {"name": "b"}})
        assert code == 422 and refused["details"]["causes"][0]["field"] == "spec.name", refused
        code, crd = http("PUT", f"{crds}/things.{group}", {**_crd(group, 10), "metadata": crd["metadata"]})
        assert code == 200, crd
        assert http("POST", things, {**thing, "metadata": {"name": "b"}})[0] == 201
    finally:
        http("DELETE", f"{crds}/things.{group}")


def _addresses(http: Raw, namespace: str, service: str) -> set[str]:
    """The addresses the Service's Endpoints list, ready or not."""
    code, endpoints = http("GET", f"/api/v1/namespaces/{namespace}/endpoints/{service}")
    subsets = endpoints.get("subsets", []) if code == 200 else []
    return {a["ip"] for s in subsets for a in [*s.get("addresses", []), *s.get("notReadyAddresses", [])]}


def test_relabelled_pods_and_reselecting_services_move_between_services(http: Raw, namespace: str) -> None:
    pods, services = f"/api/v1/namespaces/{namespace}/pods", f"/api/v1/namespaces/{namespace}/services"
    at = {}  # each Pod's address
    for name, labels in (("one", {"app": "one", "tier": "web"}), ("two", {"app": "two", "tier": "web"})):
        pod = {"metadata": {"name": name, "labels": labels}, "spec": {"containers": [{"name": "c", "image": "c:1"}]}}
        code, created = http("POST", pods, pod)
        assert code == 201
        at[name] = address(created["metadata"]["uid"])  # the podIP the sandbox's kubelet reports
    selectors = {"by-app": {"app": "one"}, "by-tier": {"tier": "web"}, "by-both": {"tier": "web", "app": "two"}}
    for name, selector in selectors.items():
        assert http("POST", services, {"metadata": {"name": name}, "spec": {"selector": selector,
                                                                             "ports": [{"port": 80}]}})[0] == 201

    def picked() -> dict[str, set[str]]:
        return {service: _addresses(http, namespace, service) for service in selectors}

    def patch(path: str, body: dict[str, Any]) -> None:
        assert http("PATCH", path, body, ctype="application/merge-patch+json")[0] == 200

    eventually(lambda: picked() == {"by-app": {at["one"]}, "by-tier": {at["one"], at["two"]},
                                    "by-both": {at["two"]}})
    # "two" leaves tier=web: the Services that need it lose it, the others keep what they had.
    patch(f"{pods}/two", {"metadata": {"labels": {"tier": "batch"}}})
    eventually(lambda: picked() == {"by-app": {at["one"]}, "by-tier": {at["one"]}, "by-both": set()})
    # A Service's new selector picks what it names now, and no longer what it named before.
    patch(f"{services}/by-app", {"spec": {"selector": {"app": "two"}}})
    eventually(lambda: picked() == {"by-app": {at["two"]}, "by-tier": {at["one"]}, "by-both": set()})
    # And a Pod changed afterwards reaches the Services by their selectors of now.
    patch(f"{pods}/one", {"metadata": {"labels": {"app": "two"}}})
    eventually(lambda: picked() == {"by-app": {at["one"], at["two"]}, "by-tier": {at["one"]},
                                    "by-both": {at["one"]}})


def test_lists_by_label_follow_relabels_deletions_and_namespaces(http: Raw, namespace: str) -> None:
    """Lists by an equality selector read an index of labels: it must follow every write, in each namespace."""
    other = f"{namespace}-b"
    assert http("POST", "/api/v1/namespaces", {"metadata": {"name": other}})[0] == 201
    for where in (namespace, other):
        for i, owner in enumerate(("helm", "helm", "helm", "someone")):
            labels = {"owner": owner, "name": f"r{i % 2}"}
            assert http("POST", f"/api/v1/namespaces/{where}/configmaps", _configmap(f"c{i}", labels))[0] == 201
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    short = {namespace: "a", other: "b"}

    def names(path: str, selector: str) -> list[str]:
        code, body = http("GET", path, labelSelector=selector)
        assert code == 200, body
        return [f"{short[o['metadata']['namespace']]}/{o['metadata']['name']}" for o in body["items"]]

    assert names(base, "owner=helm,name=r0") == ["a/c0", "a/c2"]
    assert names(base, "owner in (helm),name==r1,name!=r0") == ["a/c1"]
    assert names("/api/v1/configmaps", "name=r1,owner=someone") == ["a/c3", "b/c3"]
    assert http("PATCH", f"{base}/c0", {"metadata": {"labels": {"name": "r1"}}},
                ctype="application/merge-patch+json")[0] == 200
    assert http("DELETE", f"{base}/c2")[0] == 200
    assert http("PUT", f"{base}/c3", _configmap("c3", {"owner": "helm"}))[0] == 200
    assert names(base, "owner=helm,name=r0") == []
    assert names(base, "owner=helm,name=r1") == ["a/c0", "a/c1"]
    assert names(base, "owner=helm") == ["a/c0", "a/c1", "a/c3"]
    assert names("/api/v1/configmaps", "owner=someone") == ["b/c3"]
    assert names(base, "owner=nobody") == []
