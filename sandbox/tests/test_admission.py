"""ValidatingAdmissionPolicies and admission webhooks (AdmissionReview v1) as kubectl users meet them."""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from helmop_sandbox.tls import make_serving_cert

from tests.tools import Run


class Webhook:
    """An HTTPS admission webhook on loopback: records the reviews, answers with ``decide(request)``."""

    def __init__(self, tmp: Path) -> None:
        self.reviews: list[dict[str, Any]] = []
        self.decide: Any = lambda req: {"allowed": True}
        cert = make_serving_cert()
        self.ca_bundle = base64.b64encode(cert.ca_pem).decode()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                hook.reviews.append(review)
                answer = {"uid": review["request"]["uid"], **hook.decide(review["request"])}
                body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                   "response": answer}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        (tmp / "hook.crt").write_bytes(cert.cert_pem + cert.ca_pem)
        (tmp / "hook.key").write_bytes(cert.key_pem)
        context.load_cert_chain(tmp / "hook.crt", tmp / "hook.key")
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}/admit"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def config(self, kind: str, name: str, **hook: Any) -> str:
        webhook = {"name": f"{name}.hooks.test", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                   "clientConfig": {"url": self.url, "caBundle": self.ca_bundle},
                   "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
                              "resources": ["configmaps"]}], **hook}
        return json.dumps({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
                           "metadata": {"name": name}, "webhooks": [webhook]})


@pytest.fixture
def webhook(tmp_path: Path) -> Iterator[Webhook]:
    hook = Webhook(tmp_path)
    yield hook
    hook.server.shutdown()


def _cm(run: Run, namespace: str, name: str, *labels: str, check: bool = False) -> Any:
    args = ["kubectl", "-n", namespace, "create", "configmap", name]
    done = run(*args, check=check)
    if done.returncode == 0 and labels:
        run("kubectl", "-n", namespace, "label", "configmap", name, *labels)
    return done


def test_validating_admission_policy(run: Run, namespace: str) -> None:
    policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": f"{namespace}-replicas"},
              "spec": {"failurePolicy": "Fail",
                       "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                                                               "operations": ["CREATE", "UPDATE"],
                                                               "resources": ["deployments"]}]},
                       "variables": [{"name": "limit", "expression": "5"}],
                       "validations": [{"expression": "object.spec.replicas <= variables.limit",
                                        "messageExpression": "'at most ' + string(variables.limit) + ' replicas'"}]}}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": f"{namespace}-replicas"},
               "spec": {"policyName": f"{namespace}-replicas", "validationActions": ["Deny"],
                        "matchResources": {"namespaceSelector": {"matchLabels": {
                            "kubernetes.io/metadata.name": namespace}}}}}
    run("kubectl", "apply", "-f", "-", stdin=json.dumps(policy))
    run("kubectl", "apply", "-f", "-", stdin=json.dumps(binding))
    try:
        denied = run("kubectl", "-n", namespace, "create", "deployment", "big", "--image=x:1", "--replicas=6",
                     check=False)
        assert denied.returncode != 0
        assert (f"ValidatingAdmissionPolicy '{namespace}-replicas' with binding '{namespace}-replicas' denied "
                "request: at most 5 replicas") in denied.stderr
        run("kubectl", "-n", namespace, "create", "deployment", "small", "--image=x:1", "--replicas=2")
        run("kubectl", "-n", "default", "create", "deployment", f"{namespace}-elsewhere", "--image=x:1",
            "--replicas=9")  # the binding selects only this namespace
        binding["spec"]["validationActions"] = ["Warn"]
        run("kubectl", "apply", "-f", "-", stdin=json.dumps(binding))
        warned = run("kubectl", "-n", namespace, "patch", "deployment", "small", "-p", '{"spec": {"replicas": 7}}')
        assert "Warning: Validation failed for ValidatingAdmissionPolicy" in warned.stderr
    finally:
        run("kubectl", "delete", "validatingadmissionpolicybinding,validatingadmissionpolicy",
            f"{namespace}-replicas")
        run("kubectl", "-n", "default", "delete", "deployment", f"{namespace}-elsewhere")


def test_validating_webhook_selectors_and_denials(run: Run, namespace: str, webhook: Webhook) -> None:
    webhook.decide = lambda req: {"allowed": False, "status": {"code": 403, "message": "no, says the hook"}} \
        if req["name"].startswith("bad") else {"allowed": True, "warnings": ["looked at it"]}
    name = f"{namespace}-check"
    run("kubectl", "apply", "-f", "-", stdin=webhook.config(
        "ValidatingWebhookConfiguration", name, failurePolicy="Fail",
        namespaceSelector={"matchLabels": {"kubernetes.io/metadata.name": namespace}}))
    try:
        denied = _cm(run, namespace, "bad-one")
        assert denied.returncode != 0
        assert f'admission webhook "{name}.hooks.test" denied the request: no, says the hook' in denied.stderr
        good = _cm(run, namespace, "good")
        assert good.returncode == 0 and "Warning: looked at it" in good.stderr
        request = webhook.reviews[-1]["request"]
        assert webhook.reviews[-1]["apiVersion"] == "admission.k8s.io/v1"
        assert (request["operation"], request["namespace"], request["object"]["metadata"]["name"]) == (
            "CREATE", namespace, "good")
        assert request["userInfo"]["username"] == "sandbox-admin" and request["oldObject"] is None
        seen = len(webhook.reviews)
        _cm(run, "default", f"{namespace}-bad", check=True)  # another namespace: not sent to the hook
        assert len(webhook.reviews) == seen
    finally:
        run("kubectl", "delete", "validatingwebhookconfiguration", name)


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
def test_failure_policy_for_a_dead_or_slow_webhook(run: Run, namespace: str, webhook: Webhook, policy: str) -> None:
    name = f"{namespace}-dead"
    config = json.loads(webhook.config("ValidatingWebhookConfiguration", name, failurePolicy=policy,
                                       objectSelector={"matchLabels": {"guarded": "yes"}}))
    config["webhooks"][0]["clientConfig"]["url"] = "https://127.0.0.1:9/admit"  # nothing listens
    slow = json.loads(webhook.config("ValidatingWebhookConfiguration", f"{name}-slow", failurePolicy=policy,
                                     timeoutSeconds=1, objectSelector={"matchLabels": {"slow": "yes"}}))
    webhook.decide = lambda req: (time.sleep(3), {"allowed": True})[1]
    run("kubectl", "apply", "-f", "-", stdin=json.dumps(config))
    run("kubectl", "apply", "-f", "-", stdin=json.dumps(slow))
    try:
        guarded = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "g", "labels": {"guarded": "yes"}}}
        done = run("kubectl", "-n", namespace, "create", "-f", "-", stdin=json.dumps(guarded), check=False)
        assert (done.returncode == 0) == (policy == "Ignore"), done.stderr
        if policy == "Fail":
            assert f'failed calling webhook "{name}.hooks.test"' in done.stderr
        _cm(run, namespace, "unguarded", check=True)  # the object selector leaves it out
        started = time.monotonic()
        slow_cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s", "labels": {"slow": "yes"}}}
        done = run("kubectl", "-n", namespace, "create", "-f", "-", stdin=json.dumps(slow_cm), check=False)
        assert time.monotonic() - started < 2.8  # timeoutSeconds: 1
        assert (done.returncode == 0) == (policy == "Ignore"), done.stderr
    finally:
        run("kubectl", "delete", "validatingwebhookconfiguration", name, f"{name}-slow")


def test_mutating_webhook_patches_the_object(run: Run, namespace: str, webhook: Webhook) -> None:
    patch = [{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}},
             {"op": "add", "path": "/data", "value": {"added": "by-hook"}}]
    webhook.decide = lambda req: {"allowed": True, "patchType": "JSONPatch",
                                  "patch": base64.b64encode(json.dumps(patch).encode()).decode()}
    name = f"{namespace}-mutate"
    run("kubectl", "apply", "-f", "-", stdin=webhook.config(
        "MutatingWebhookConfiguration", name,
        namespaceSelector={"matchLabels": {"kubernetes.io/metadata.name": namespace}}))
    try:
        _cm(run, namespace, "plain", check=True)
        cm = json.loads(run("kubectl", "-n", namespace, "get", "configmap", "plain", "-o", "json").stdout)
        assert cm["metadata"]["labels"] == {"mutated": "yes"} and cm["data"] == {"added": "by-hook"}
    finally:
        run("kubectl", "delete", "mutatingwebhookconfiguration", name)
