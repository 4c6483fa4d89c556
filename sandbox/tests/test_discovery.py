"""Discovery and OpenAPI: what clients read before anything else."""

from __future__ import annotations

import gzip
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from support import Raw

from tests.tools import Run

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


AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
CLIENT_GO_ACCEPT = f"{AGGREGATED},application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList," \
                   "application/json"


def _aggregated(http: Raw, path: str) -> tuple[str, dict[str, Any]]:
    r = http.session.get(http.base + path, headers={"Accept": CLIENT_GO_ACCEPT})
    assert r.status_code == 200
    return r.headers["Content-Type"], r.json()


def test_aggregated_discovery_says_what_every_group_version_says(http: Raw) -> None:
    """kube-apiserver answers client-go's Accept with one apidiscovery.k8s.io/v2 list per root: the same
    resources as the per-group-version documents, which the client then never fetches."""
    ctype, apis = _aggregated(http, "/apis")
    assert ctype == AGGREGATED and apis["kind"] == "APIGroupDiscoveryList"
    _, core = _aggregated(http, "/api")
    assert [item["metadata"] for item in core["items"]] == [{}]
    _, legacy = http("GET", "/apis")
    assert [item["metadata"]["name"] for item in apis["items"]] == [g["name"] for g in legacy["groups"]]
    compared = 0
    for item in core["items"] + apis["items"]:
        group = item["metadata"].get("name", "")
        legacy_versions = [g for g in legacy["groups"] if g["name"] == group]
        if legacy_versions:
            assert [v["version"] for v in item["versions"]] == [v["version"] for v in legacy_versions[0]["versions"]]
        for version in item["versions"]:
            assert version["freshness"] == "Current"
            _, listing = http("GET", f"/apis/{group}/{version['version']}" if group else f"/api/{version['version']}")
            flattened = {}
            for r in version["resources"]:
                kind = r["responseKind"]
                flattened[r["resource"]] = (r["scope"] == "Namespaced", kind["kind"], sorted(r["verbs"]),
                                            r.get("shortNames"))
                for sub in r.get("subresources", []):
                    flattened[f"{r['resource']}/{sub['subresource']}"] = (
                        r["scope"] == "Namespaced", sub["responseKind"]["kind"], sorted(sub["verbs"]), None)
            assert flattened == {e["name"]: (e["namespaced"], e["kind"], sorted(e["verbs"]), e.get("shortNames"))
                                 for e in listing["resources"]}
            compared += len(flattened)
    assert compared > 80
    deployments = next(r for item in apis["items"] if item["metadata"]["name"] == "apps"
                       for r in item["versions"][0]["resources"] if r["resource"] == "deployments")
    assert deployments["responseKind"] == {"group": "", "version": "", "kind": "Deployment"}
    assert {s["subresource"]: s["responseKind"] for s in deployments["subresources"]}["scale"] == \
        {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    assert deployments["singularResource"] == "deployment" and deployments["categories"] == ["all"]


def test_clients_discover_everything_in_two_requests(run: Run, tmp_path: Path) -> None:
    """kubectl (client-go) reads /api and /apis and nothing per group version, as against kube-apiserver; the
    plain Accept still gets the legacy documents (covered above)."""
    done = run("kubectl", "api-resources", "-v=6", "--cache-dir", str(tmp_path))  # an empty discovery cache
    assert "deployments" in done.stdout and "statefulsets" in done.stdout
    fetched = re.findall(r'verb="GET" url="https://[^/]+/([^"?]*)', done.stderr)
    assert sorted(fetched) == ["api", "apis"], fetched


def test_openapi_v3_declares_server_side_field_validation(http: Raw) -> None:
    code, root = http("GET", "/openapi/v3")
    url = root["paths"]["apis/apps/v1"]["serverRelativeURL"]
    assert "?hash=" in url
    _code, doc = http("GET", url.split("?")[0])
    patch = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "apps", "version": "v1", "kind": "Deployment"}
    assert "fieldValidation" in {p["name"] for p in patch["parameters"]}
    assert "application/strategic-merge-patch+json" in patch["requestBody"]["content"]  # kubectl apply builds one
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

    def aggregated_groups() -> set[str]:  # the aggregated document is kept between requests: it must follow
        return {item["metadata"].get("name") for item in _aggregated(http, "/apis")[1]["items"]}

    assert "disco.test" not in aggregated_groups()
    code, _ = http("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    assert code == 201
    assert "disco.test" in aggregated_groups()
    code, listing = http("GET", "/apis/disco.test/v1")
    assert {r["name"]: r.get("shortNames") for r in listing["resources"]} == {"probes": ["pb"], "probes/status": None}
    code, root = http("GET", "/openapi/v3")
    assert "apis/disco.test/v1" in root["paths"]
    _code, doc = http("GET", "/openapi/v3/apis/disco.test/v1")
    patch = doc["paths"]["/apis/disco.test/v1/probes/{name}"]["patch"]["requestBody"]["content"]
    assert "application/merge-patch+json" in patch and "application/strategic-merge-patch+json" not in patch
    http("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/probes.disco.test")
    for _ in range(100):
        if http("GET", "/apis/disco.test/v1")[0] == 404:
            break
        import time

        time.sleep(0.05)
    assert http("GET", "/apis/disco.test/v1")[0] == 404
    assert "disco.test" not in aggregated_groups()


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
