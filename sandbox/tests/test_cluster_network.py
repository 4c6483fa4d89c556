"""The sandbox's pretend cluster network, as kubectl meets it: webhooks named by a Service are answered for the
workloads the sandbox reports Ready (and fail as kube-apiserver's do when nothing Ready is selected),
EndpointSlices list what Services select, and `cluster_network=False` makes every Service unreachable."""

from __future__ import annotations

import argparse
import json
import logging
from typing import Any

import pytest
from helmop_sandbox import Sandbox
from helmop_sandbox.__main__ import add_arguments
from support import runner

from tests.tools import Run, eventually

NOT_RUN = "Warning: the sandbox did not run"


def _workload(name: str, *, failing: bool = False, replicas: int = 1) -> str:
    """A Deployment (never Ready when ``failing``) and its Service: port 443 to the container's port "https"."""
    annotations = {"sandbox.helmop.dev/simulate": "fail"} if failing else {}
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "annotations": annotations},
              "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                       "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
                           {"name": "hook", "image": "hook:1", "ports": [{"name": "https", "containerPort": 8443}]}]}}}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "labels": {"team": "a"}},
               "spec": {"selector": {"app": name}, "ports": [{"port": 443, "targetPort": "https"}]}}
    return f"{json.dumps(deploy)}\n---\n{json.dumps(service)}"


def _serve(run: Run, namespace: str, name: str, **kwargs: Any) -> None:
    run("kubectl", "-n", namespace, "apply", "-f", "-", stdin=_workload(name, **kwargs))
    if not kwargs.get("failing"):
        run("kubectl", "-n", namespace, "rollout", "status", f"deploy/{name}", "--timeout=15s")


def _hooks(kind: str, name: str, namespace: str, service: str, **hook: Any) -> str:
    """A webhook configuration for ConfigMaps of ``namespace`` only, served by ``service`` there."""
    webhook = {"name": f"{name}.hooks.test", "sideEffects": "None", "admissionReviewVersions": ["v1"],
               "clientConfig": {"service": {"name": service, "namespace": namespace, "path": "/admit"}},
               "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
               "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                          "resources": ["configmaps"]}], **hook}
    return json.dumps({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name},
                       "webhooks": [webhook]})


def _slices(run: Run, namespace: str, service: str) -> list[dict[str, Any]]:
    found = run("kubectl", "-n", namespace, "get", "endpointslices", "-l", f"kubernetes.io/service-name={service}",
                "-o", "json").stdout
    return list(json.loads(found)["items"])


def test_a_webhook_served_by_a_ready_deployment_admits_with_a_warning(
        run: Run, namespace: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="helmop_sandbox.network")
    _serve(run, namespace, "hook")
    name = f"{namespace}-ready"
    run("kubectl", "apply", "-f", "-", stdin=_hooks("ValidatingWebhookConfiguration", name, namespace, "hook",
                                                   failurePolicy="Fail"))
    try:
        done = run("kubectl", "-n", namespace, "create", "configmap", "admitted")
        said = (f'{NOT_RUN} admission webhook "{name}.hooks.test" (service {namespace}/hook selects Deployment '
                "hook, which the sandbox reports Ready): allowed without changes")
        assert said in done.stderr
        assert any(said.removeprefix("Warning: ") in r.getMessage() for r in caplog.records)  # the audit line
    finally:
        run("kubectl", "delete", "validatingwebhookconfiguration", name)


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
def test_a_webhook_whose_service_selects_nothing_ready_fails_per_failure_policy(
        run: Run, namespace: str, policy: str) -> None:
    _serve(run, namespace, "stuck", failing=True)  # selected, never Ready: its endpoints are not ready
    name = f"{namespace}-stuck"
    run("kubectl", "apply", "-f", "-", stdin=_hooks("ValidatingWebhookConfiguration", name, namespace, "stuck",
                                                   failurePolicy=policy))
    try:
        done = run("kubectl", "-n", namespace, "create", "configmap", "refused", check=False)
        if policy == "Ignore":
            assert done.returncode == 0 and "Warning" not in done.stderr, done.stderr
            return
        assert done.returncode != 0
        assert (f'Internal error occurred: failed calling webhook "{name}.hooks.test": failed to call webhook: '
                f'Post "https://stuck.{namespace}.svc:443/admit?timeout=10s": no endpoints available for service '
                '"stuck"') in done.stderr
    finally:
        run("kubectl", "delete", "validatingwebhookconfiguration", name)


def test_a_mutating_webhook_served_by_a_ready_deployment_changes_nothing(run: Run, namespace: str) -> None:
    _serve(run, namespace, "mutator")
    name = f"{namespace}-mutate"
    run("kubectl", "apply", "-f", "-", stdin=_hooks("MutatingWebhookConfiguration", name, namespace, "mutator"))
    missing = f"{namespace}-missing"
    run("kubectl", "apply", "-f", "-", stdin=_hooks("MutatingWebhookConfiguration", missing, namespace, "gone",
                                                   objectSelector={"matchLabels": {"to": "gone"}}))
    try:
        done = run("kubectl", "-n", namespace, "create", "configmap", "plain", "--from-literal=a=1")
        assert f'{NOT_RUN} admission webhook "{name}.hooks.test"' in done.stderr
        cm = json.loads(run("kubectl", "-n", namespace, "get", "configmap", "plain", "-o", "json").stdout)
        assert cm["data"] == {"a": "1"} and "labels" not in cm["metadata"]
        labelled = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "l", "labels": {"to": "gone"}}}
        refused = run("kubectl", "-n", namespace, "create", "-f", "-", stdin=json.dumps(labelled), check=False)
        assert refused.returncode != 0 and f'failed calling webhook "{missing}.hooks.test"' in refused.stderr
        assert 'service "gone" not found' in refused.stderr
    finally:
        run("kubectl", "delete", "mutatingwebhookconfiguration", name, missing)


def _crd(group: str, namespace: str, *, beta_schema: dict[str, Any] | None = None) -> str:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "size": {"type": "integer"}}}}}
    versions = [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}},
                {"name": "v1beta1", "served": True, "storage": False,
                 "schema": {"openAPIV3Schema": beta_schema or schema}}]
    webhook = {"conversionReviewVersions": ["v1"],
               "clientConfig": {"service": {"name": "converter", "namespace": namespace, "path": "/convert"}}}
    return json.dumps({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                       "metadata": {"name": f"widgets.{group}"},
                       "spec": {"group": group, "scope": "Namespaced", "versions": versions,
                                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                                "conversion": {"strategy": "Webhook", "webhook": webhook}}})


def test_a_conversion_webhook_served_by_a_ready_deployment(run: Run, namespace: str) -> None:
    group = f"{namespace}.conversion.test"
    kubectl = ("kubectl", "-n", namespace)
    run("kubectl", "apply", "-f", "-", stdin=_crd(group, namespace))
    try:
        widget = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 3}}
        stored = eventually(lambda: run(*kubectl, "apply", "-f", "-", stdin=json.dumps(widget), check=False)
                            .returncode == 0)  # the storage version needs no conversion
        assert stored
        beta = run(*kubectl, "get", f"widgets.v1beta1.{group}", "w", "-o", "json", check=False)
        assert beta.returncode != 0
        assert (f'Error from server: conversion webhook for {group}/v1, Kind=Widget failed: Post '
                f'"https://converter.{namespace}.svc:443/convert?timeout=30s": service "converter" not found'
                ) in beta.stderr
        _serve(run, namespace, "converter")
        beta = run(*kubectl, "get", f"widgets.v1beta1.{group}", "w", "-o", "json")
        assert json.loads(beta.stdout)["spec"] == {"size": 3}
        assert f"{NOT_RUN} the conversion webhook of widgets.{group} (service {namespace}/converter selects " \
               "Deployment converter, which the sandbox reports Ready): objects served as stored" in beta.stderr
        widget["apiVersion"] = f"{group}/v1beta1"
        assert NOT_RUN in run(*kubectl, "apply", "-f", "-", stdin=json.dumps(widget)).stderr
        other = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "count": {"type": "integer"}}}}}
        run("kubectl", "apply", "-f", "-", stdin=_crd(group, namespace, beta_schema=other))
        differing = eventually(lambda: (done := run(*kubectl, "get", f"widgets.v1beta1.{group}", "w", check=False))
                               .returncode != 0 and done)
        assert "serves objects as stored only between versions whose schemas agree" in differing.stderr
    finally:
        run("kubectl", "delete", "crd", f"widgets.{group}")


def test_endpointslices_appear_and_go_with_the_workload(run: Run, namespace: str) -> None:
    kubectl = ("kubectl", "-n", namespace)
    _serve(run, namespace, "web", replicas=2)
    slices = eventually(lambda: (found := _slices(run, namespace, "web")) and found[0]["endpoints"] and found)
    assert len(slices) == 1
    web = slices[0]
    assert web["metadata"]["name"].startswith("web-") and web["addressType"] == "IPv4"
    assert web["metadata"]["labels"] == {"team": "a", "kubernetes.io/service-name": "web",
                                         "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}
    assert web["metadata"]["ownerReferences"][0]["kind"] == "Service"
    assert web["ports"] == [{"name": "", "protocol": "TCP", "port": 8443}]  # the named targetPort, looked up
    assert [e["conditions"] for e in web["endpoints"]] == [{"ready": True, "serving": True, "terminating": False}] * 2
    endpoints = json.loads(run(*kubectl, "get", "endpoints", "web", "-o", "json").stdout)
    assert sorted(a["ip"] for a in endpoints["subsets"][0]["addresses"]) == \
        sorted(e["addresses"][0] for e in web["endpoints"])
    table = run(*kubectl, "get", "endpointslices").stdout.split()
    assert table[:5] == ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"] and "8443" in table
    run(*kubectl, "delete", "deployment", "web")
    placeholder = eventually(lambda: (found := _slices(run, namespace, "web")) and not found[0]["endpoints"] and found)
    assert placeholder[0]["endpoints"] is None and placeholder[0]["ports"] is None
    assert "subsets" not in json.loads(run(*kubectl, "get", "endpoints", "web", "-o", "json").stdout)
    solo_pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "solo", "labels": {"app": "web"}},
                "spec": {"containers": [{"name": "hook", "image": "hook:1",
                                         "ports": [{"name": "https", "containerPort": 9443}]}]}}
    run(*kubectl, "create", "-f", "-", stdin=json.dumps(solo_pod))
    solo = eventually(lambda: (found := _slices(run, namespace, "web")) and found[0]["endpoints"] and found[0])
    pod = json.loads(run(*kubectl, "get", "pod", "solo", "-o", "json").stdout)
    assert solo["endpoints"][0]["targetRef"] == {"kind": "Pod", "namespace": namespace, "name": "solo",
                                                 "uid": pod["metadata"]["uid"]}
    assert solo["endpoints"][0]["addresses"] == [pod["status"]["podIP"]] and solo["ports"][0]["port"] == 9443
    run(*kubectl, "delete", "service", "web")
    eventually(lambda: not _slices(run, namespace, "web"))


def test_without_a_cluster_network_no_service_answers() -> None:
    """``cluster_network=False`` (``--no-cluster-network``): the sandbox's answer before it pretended one."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args(["--no-cluster-network"]).cluster_network is False
    assert parser.parse_args([]).cluster_network is True
    with Sandbox(ready_delay=0.05, cluster_network=False) as strict:
        run = runner(strict)
        _serve(run, "default", "hook")
        run("kubectl", "apply", "-f", "-", stdin=_hooks("ValidatingWebhookConfiguration", "strict", "default",
                                                       "hook", failurePolicy="Fail"))
        done = run("kubectl", "create", "configmap", "refused", check=False)
        assert done.returncode != 0
        assert ('failed calling webhook "strict.hooks.test": failed to call webhook: Post '
                '"https://hook.default.svc:443/admit?timeout=10s": the sandbox has no cluster network: services '
                "are not reachable") in done.stderr
