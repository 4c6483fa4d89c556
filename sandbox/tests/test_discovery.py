"""Discovery and OpenAPI: what clients read before anything else."""

from __future__ import annotations

import gzip
import json
from importlib import resources
from typing import Any

import pytest
from support import Raw

SKIPPED_GROUPS = {"gateway.networking.k8s.io", "metrics.k8s.io", "authentication.k8s.io", "authorization.k8s.io"}


def _real_discovery() -> list[dict[str, Any]]:
    """A dump of discovery from a real cluster, shipped with kmock (MIT)."""
    raw = resources.files("kmock").joinpath("_internal/resources.json.gz").read_bytes()
    return json.loads(gzip.decompress(raw))


def test_builtin_resources_match_a_real_server(http: Raw) -> None:
    compared = 0
    for real in _real_discovery():
        gv = real["groupVersion"]
        if gv.split("/")[0] in SKIPPED_GROUPS:
            continue
        path = f"/apis/{gv}" if "/" in gv else f"/api/{gv}"
        code, ours = http("GET", path)
        assert code == 200, gv
        served = {r["name"]: r for r in ours["resources"]}
        for resource in real["resources"]:
            if "watch" not in resource["verbs"] and "/" not in resource["name"]:
                continue  # virtual kinds (reviews, bindings) are not served
            main = resource["name"].split("/")[0]
            if main not in served:
                continue  # a subresource of a virtual kind, or one the sandbox does not serve
            if "/" in resource["name"] and resource["name"].split("/")[1] not in ("status", "scale"):
                continue
            mine = served.get(resource["name"])
            assert mine is not None, f"{gv} {resource['name']} missing"
            for key in ("namespaced", "kind"):
                assert mine[key] == resource[key], (gv, resource["name"], key)
            for key in ("shortNames", "categories"):
                assert sorted(mine.get(key, [])) == sorted(resource.get(key, [])), (gv, resource["name"], key)
            if "/" not in resource["name"]:
                assert set(mine["verbs"]) == set(resource["verbs"]), (gv, resource["name"])
            compared += 1
    assert compared > 60


def test_api_group_list_and_version(http: Raw) -> None:
    _, groups = http("GET", "/apis")
    names = {g["name"]: g for g in groups["groups"]}
    assert {"apps", "batch", "apiextensions.k8s.io", "rbac.authorization.k8s.io"} <= set(names)
    assert names["autoscaling"]["preferredVersion"]["version"] == "v2"
    _code, version = http("GET", "/version")
    assert version["major"] == "1" and version["minor"] == "35"


def test_openapi_v3_declares_server_side_field_validation(http: Raw) -> None:
    code, root = http("GET", "/openapi/v3")
    url = root["paths"]["apis/apps/v1"]["serverRelativeURL"]
    assert "?hash=" in url
    _code, doc = http("GET", url.split("?")[0])
    patch = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "apps", "version": "v1", "kind": "Deployment"}
    assert "fieldValidation" in {p["name"] for p in patch["parameters"]}
    schema = doc["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"]
    assert schema["properties"]["spec"]["$ref"] == "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"
    # OpenAPI 3.0 has no type lists: everything was normalised.
    assert '"type": [' not in json.dumps(doc)


def test_crds_appear_in_discovery_and_openapi_at_once(http: Raw) -> None:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "probes.disco.test"},
           "spec": {"group": "disco.test", "scope": "Cluster",
                    "names": {"plural": "probes", "kind": "Probe", "shortNames": ["pb"], "categories": ["all"]},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "subresources": {"status": {}},
                                  "schema": {"openAPIV3Schema": {"type": "object"}}}]}}
    code, _ = http("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    assert code == 201
    code, listing = http("GET", "/apis/disco.test/v1")
    assert {r["name"]: r.get("shortNames") for r in listing["resources"]} == {"probes": ["pb"], "probes/status": None}
    code, root = http("GET", "/openapi/v3")
    assert "apis/disco.test/v1" in root["paths"]
    http("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/probes.disco.test")
    for _ in range(100):
        if http("GET", "/apis/disco.test/v1")[0] == 404:
            break
        import time

        time.sleep(0.05)
    assert http("GET", "/apis/disco.test/v1")[0] == 404


def test_crd_groups_are_listed_in_kube_apiservers_order(http: Raw) -> None:
    """After every built-in group, by the name of their APIServices ("<version>.<group>"), not by creation: so
    kubectl resolves a short name two CRDs share to the group a real cluster resolves it to."""
    made = []
    for group, version in (("zeta.order.test", "v1"), ("alpha.order.test", "v2"), ("alpha-two.order.test", "v1beta1")):
        name = f"things.{group}"
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": name},
               "spec": {"group": group, "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
                        "versions": [{"name": version, "served": True, "storage": True,
                                      "schema": {"openAPIV3Schema": {"type": "object"}}}]}}
        assert http("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)[0] == 201
        made.append(name)
    _, groups = http("GET", "/apis")
    names = [g["name"] for g in groups["groups"]]
    assert [n for n in names if n.endswith(".order.test")] == ["zeta.order.test", "alpha-two.order.test",
                                                               "alpha.order.test"]  # v1.z < v1beta1.a < v2.a
    assert names.index("rbac.authorization.k8s.io") < names.index("zeta.order.test")
    for name in made:
        http("DELETE", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")


@pytest.mark.parametrize("bad,message", [
    ({"metadata": {"name": "wrong.disco.test"}}, "spec.names.plural"),
    ({"spec": {"versions": []}}, "exactly one version"),
])
def test_invalid_crds_are_rejected(http: Raw, bad: dict[str, Any], message: str) -> None:
    crd: dict[str, Any] = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                           "metadata": {"name": "bad.disco.test"},
                           "spec": {"group": "disco.test", "scope": "Namespaced",
                                    "names": {"plural": "bad", "kind": "Bad"},
                                    "versions": [{"name": "v1", "served": True, "storage": True}]}}
    for key, value in bad.items():
        crd[key] = {**crd[key], **value}
    code, err = http("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    assert code == 422 and message in err["message"]
