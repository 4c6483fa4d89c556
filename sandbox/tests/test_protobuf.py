"""Protobuf bodies both ways, from the wire table derived from upstream's descriptors.

kubectl's ``create`` verbs send protobuf; typed clients (helm) ask for protobuf replies first. Every
reply read as protobuf must decode to exactly what the JSON reply says.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from helmop_sandbox import protobuf, wire
from helmop_sandbox.testing import Sandbox

from tests.tools import Run

CREATE = [
    ("deployment web --image=nginx:1 --replicas=2", "deploy/web", "spec.replicas", 2),
    ("job once --image=busybox:1 -- echo hi", "job/once", "spec.template.spec.containers.0.command", ["echo", "hi"]),
    ("cronjob tick --image=busybox:1 --schedule=*/5_*_*_*_*", "cronjob/tick", "spec.schedule", "*/5 * * * *"),
    ("role reader --verb=get --resource=pods", "role/reader", "rules.0.verbs", ["get"]),
    ("clusterrole {ns}-reader --verb=get --resource=pods", "clusterrole/{ns}-reader", "rules.0.resources", ["pods"]),
    ("service clusterip inside --tcp=80:8080", "svc/inside", "spec.ports.0.targetPort", 8080),
    ("service nodeport outside --tcp=80:8080", "svc/outside", "spec.type", "NodePort"),
    ("ingress web --rule=foo.example/bar=web:8080", "ingress/web",
     "spec.rules.0.http.paths.0.backend.service.port.number", 8080),
    ("pdb web --selector=app=web --min-available=1", "pdb/web", "spec.minAvailable", 1),
    ("quota pods --hard=pods=10", "quota/pods", "spec.hard.pods", "10"),
    ("priorityclass {ns}-high --value=1000", "priorityclass/{ns}-high", "value", 1000),
]

CONTRAPTIONS = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "contraptions.protobuf.test"},
           "spec": {"group": "protobuf.test", "scope": "Namespaced",
                    "names": {"plural": "contraptions", "singular": "contraption", "kind": "Contraption"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


def _at(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = obj[int(part)] if isinstance(obj, list) else obj[part]
    return obj


@pytest.mark.parametrize(("command", "name", "path", "expected"), CREATE, ids=[c[0].split()[0] for c in CREATE])
def test_kubectl_create_verbs(run: Run, namespace: str, command: str, name: str, path: str,
                              expected: Any) -> None:
    args = [a.replace("_", " ") for a in command.format(ns=namespace).split()]
    run("kubectl", "-n", namespace, "create", *args)
    obj = json.loads(run("kubectl", "-n", namespace, "get", name.format(ns=namespace), "-o", "json").stdout)
    assert _at(obj, path) == expected


def test_job_from_cronjob_and_autoscale(run: Run, namespace: str) -> None:
    run("kubectl", "-n", namespace, "create", "cronjob", "tick", "--image=busybox:1", "--schedule=0 0 * * *",
        "--", "date")
    run("kubectl", "-n", namespace, "create", "job", "now", "--from=cronjob/tick")
    job = json.loads(run("kubectl", "-n", namespace, "get", "job", "now", "-o", "json").stdout)
    assert job["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"] == "manual"
    assert job["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
    run("kubectl", "-n", namespace, "create", "deployment", "web", "--image=nginx:1")
    run("kubectl", "-n", namespace, "autoscale", "deployment", "web", "--max=5", "--cpu=80%")
    hpa = json.loads(run("kubectl", "-n", namespace, "get", "hpa", "web", "-o", "json").stdout)
    assert hpa["spec"]["maxReplicas"] == 5 and hpa["spec"]["scaleTargetRef"]["name"] == "web"


def test_protobuf_replies_decode_to_the_json_replies(run: Run, sandbox: Sandbox, namespace: str) -> None:
    run("kubectl", "-n", namespace, "create", "deployment", "web", "--image=nginx:1", "--port=80")
    run("kubectl", "-n", namespace, "create", "ingress", "web", "--rule=foo.example/bar=web:8080")
    run("kubectl", "-n", namespace, "create", "secret", "generic", "s", "--from-literal=k=\u00e9t\u00e9")
    # the Deployment's status is written after it is created: read both forms once it no longer changes
    run("kubectl", "-n", namespace, "rollout", "status", "deployment/web", "--timeout=60s")
    session = requests.Session()
    session.trust_env = False
    session.verify = str(sandbox.ca_file)
    session.headers["Authorization"] = f"Bearer {sandbox.token}"
    typed = "application/vnd.kubernetes.protobuf, */*"
    for path in (f"/apis/apps/v1/namespaces/{namespace}/deployments/web",
                 f"/apis/networking.k8s.io/v1/namespaces/{namespace}/ingresses/web",
                 f"/api/v1/namespaces/{namespace}/secrets/s",
                 f"/apis/apps/v1/namespaces/{namespace}/deployments",
                 f"/api/v1/namespaces/{namespace}"):
        as_json = session.get(sandbox.url + path).json()
        reply = session.get(sandbox.url + path, headers={"Accept": typed})
        assert reply.headers["Content-Type"] == protobuf.MEDIA_TYPE, path
        assert protobuf.decode(reply.content) == as_json, path
    # CustomResourceDefinitions are built in; the custom resources they define have no protobuf form.
    reply = session.get(sandbox.url + "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                        headers={"Accept": typed})
    assert reply.headers["Content-Type"] == protobuf.MEDIA_TYPE
    assert protobuf.decode(reply.content)["kind"] == "CustomResourceDefinitionList"
    run("kubectl", "apply", "-f", "-", stdin=json.dumps(CONTRAPTIONS))
    run("kubectl", "wait", "--for=condition=Established", "crd/contraptions.protobuf.test", "--timeout=10s")
    reply = session.get(sandbox.url + f"/apis/protobuf.test/v1/namespaces/{namespace}/contraptions",
                        headers={"Accept": typed})
    assert reply.headers["Content-Type"].startswith("application/json"), reply.text
    session.close()


def test_the_table_comes_from_the_descriptors_in_helm3() -> None:
    """Field numbers are upstream's (spot checks against generated.proto), embedded structs inlined."""
    table = json.loads(wire.TABLE.read_text())["messages"]
    fields = {name: {e[1]: e for e in entries} for name, entries in table.items()}
    assert fields["k8s.io.api.core.v1.Secret"]["data"][:3] == [2, "data", "map:string:bytes"]
    assert fields["k8s.io.api.apps.v1.DeploymentSpec"]["progressDeadlineSeconds"][0] == 9
    assert fields["k8s.io.api.core.v1.PersistentVolumeClaimSpec"]["storageClassName"][4] is True  # *string
    assert fields["k8s.io.api.core.v1.PersistentVolumeClaimSpec"]["volumeName"][4] is False
    inlined = sorted(f"{m.rsplit('.', 1)[1]}.{e[1]}" for m, es in table.items() for e in es if e[5])
    assert {"Volume.volumeSource", "Probe.handler", "IngressRule.ingressRuleValue",
            "RuleWithOperations.rule"} <= set(inlined)
    assert len(table) > 1000


def test_round_trip_of_crds_with_every_schema_construct() -> None:
    """JSONSchemaProps spells fields its own way ($ref, x-kubernetes-*) and has either-or fields (helmop's
    own CRDs, from the repository, use most of them)."""
    crds = sorted((Path(__file__).resolve().parents[2] / "crds").glob("*.yaml"))
    assert crds
    for crd in (yaml.safe_load(path.read_text()) for path in crds):
        assert protobuf.decode(protobuf.encode(crd)) == crd, crd["metadata"]["name"]
