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
from support import Raw

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


def _apply_policy(run: Run, name: str, namespace: str, spec: dict[str, Any], actions: list[str]) -> None:
    """A ValidatingAdmissionPolicy on ConfigMaps, bound for ``namespace`` only."""
    rules = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
              "resources": ["configmaps"]}]
    policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": name}, "spec": {"failurePolicy": "Fail",
                                                   "matchConstraints": {"resourceRules": rules}, **spec}}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": name},
               "spec": {"policyName": name, "validationActions": actions, "matchResources": {"namespaceSelector": {
                   "matchLabels": {"kubernetes.io/metadata.name": namespace}}}}}
    run("kubectl", "apply", "-f", "-", stdin=json.dumps(policy))
    run("kubectl", "apply", "-f", "-", stdin=json.dumps(binding))


APPROVERS = """
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: cm-writer}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [create, get, update, patch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: team-writes}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: cm-writer}
subjects: [{kind: Group, name: team}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: approver}
rules: [{apiGroups: [helmop.dev], resources: [helmreleases], verbs: [approve]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-approves}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: approver}
subjects: [{kind: User, name: alice}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: approvers-approve}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: approver}
subjects: [{kind: Group, name: approvers}]
"""


def test_policy_asks_the_authorizer_what_the_requesting_user_may_do(run: Run, http: Raw, namespace: str) -> None:
    """helmop's approval policy: only a user RBAC allows the custom verb ``approve`` on the HelmRelease of
    the same name may set the approval annotation (a check in a variable, read by the validation)."""
    name = f"{namespace}-approval"
    approval = ("authorizer.group('helmop.dev').resource('helmreleases').namespace(object.metadata.namespace)"
                ".name(object.metadata.name).check('approve')")
    run("kubectl", "-n", namespace, "apply", "-f", "-", stdin=APPROVERS)
    approving = "has(object.metadata.annotations) && 'helmop.dev/approved' in object.metadata.annotations"
    _apply_policy(run, name, namespace, {
        "matchConditions": [{"name": "approving", "expression": approving}],
        "variables": [{"name": "approval", "expression": approval}],
        "validations": [{"expression": "variables.approval.allowed()", "reason": "Forbidden", "messageExpression":
                         "request.userInfo.username + ' may not approve ' + object.metadata.name"}]}, ["Deny"])
    try:
        def as_user(user: str, *args: str, groups: tuple[str, ...] = ("team",), stdin: str | None = None) -> Any:
            impersonation = [f"--as-group={group}" for group in groups]
            return run("kubectl", "-n", namespace, f"--as={user}", *impersonation, *args, check=False, stdin=stdin)

        assert as_user("bob", "create", "configmap", "plain").returncode == 0  # not approving: not checked
        denied = as_user("bob", "annotate", "configmap", "plain", "helmop.dev/approved=yes")
        assert denied.returncode != 0 and "bob may not approve plain" in denied.stderr, denied.stderr
        approved = {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "direct", "annotations": {"helmop.dev/approved": "yes"}}}
        reply = http.session.post(f"{http.base}/api/v1/namespaces/{namespace}/configmaps", json=approved,
                                  headers={"Impersonate-User": "bob", "Impersonate-Group": "team"})
        assert reply.status_code == 403 and reply.json()["reason"] == "Forbidden", reply.text
        assert reply.json()["message"] == (f"ValidatingAdmissionPolicy '{name}' with binding '{name}' denied "
                                           "request: bob may not approve direct")
        # alice through a RoleBinding to her user, carol through one to a group she is in
        assert as_user("alice", "annotate", "configmap", "plain", "helmop.dev/approved=yes").returncode == 0
        created = as_user("carol", "create", "-f", "-", groups=("team", "approvers"), stdin=json.dumps(approved))
        assert created.returncode == 0, created.stderr
        annotations = json.loads(run("kubectl", "-n", namespace, "get", "configmap", "plain", "-o", "json").stdout)[
            "metadata"]["annotations"]
        assert annotations == {"helmop.dev/approved": "yes"}
    finally:
        run("kubectl", "delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", name)


def test_request_resource_and_path_checks(run: Run, namespace: str) -> None:
    """``authorizer.requestResource`` is the object under admission (its name and namespace included), and
    ``authorizer.path`` checks a non-resource URL, both for the requesting user."""
    name = f"{namespace}-creators"
    run("kubectl", "-n", namespace, "create", "role", "creator", "--verb=create", "--resource=configmaps")
    run("kubectl", "-n", namespace, "create", "role", "x-updater", "--verb=update", "--resource=configmaps",
        "--resource-name=x")
    for group in ("makers", "outsiders"):
        run("kubectl", "-n", namespace, "create", "rolebinding", f"{group}-create", "--role=creator",
            f"--group={group}")
        run("kubectl", "-n", namespace, "create", "rolebinding", f"{group}-update-x", "--role=x-updater",
            f"--group={group}")
    run("kubectl", "create", "clusterrole", name, "--verb=get", "--non-resource-url=/healthz")
    run("kubectl", "create", "clusterrolebinding", name, f"--clusterrole={name}", "--group=makers")
    _apply_policy(run, name, namespace, {"validations": [
        {"expression": "authorizer.requestResource.check('update').allowed()", "reason": "Forbidden",
         "message": "a creator must be able to update it"},
        {"expression": "authorizer.path('/healthz').check('get').allowed()",
         "message": "a creator must see /healthz"}]},
        ["Deny"])
    try:
        def create(cm: str, group: str) -> Any:  # from a manifest: kubectl then shows the status's reason
            manifest = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": cm}})
            return run("kubectl", "-n", namespace, "--as=dave", f"--as-group={group}", "create", "-f", "-",
                       stdin=manifest, check=False)

        assert create("x", "makers").returncode == 0
        denied = create("y", "makers")  # may create it, but not update it: the Role names only x
        assert denied.returncode != 0 and "Error from server (Forbidden)" in denied.stderr
        assert "denied request: a creator must be able to update it" in denied.stderr, denied.stderr
        run("kubectl", "-n", namespace, "delete", "configmap", "x")
        unseen = create("x", "outsiders")  # update on x, but no /healthz
        # reason Invalid (the default): kubectl words a 422 so
        assert unseen.returncode != 0 and unseen.stderr.startswith("The request is invalid")
        assert "denied request: a creator must see /healthz" in unseen.stderr, unseen.stderr
        run("kubectl", "-n", namespace, "create", "configmap", "y")  # the admin (system:masters) may do anything
    finally:
        run("kubectl", "delete", "validatingadmissionpolicybinding,validatingadmissionpolicy,clusterrolebinding,"
            "clusterrole", name)


def test_service_account_authorizer_and_the_decisions_reason(run: Run, namespace: str) -> None:
    """``authorizer.serviceAccount(ns, name)`` checks as that ServiceAccount (its user and groups), not as the
    requester (here the admin, who may do anything); an allowed Decision's reason names the binding."""
    name = f"{namespace}-robot"
    robot = ("authorizer.serviceAccount(object.metadata.namespace, 'robot').group('').resource('configmaps')"
             ".namespace(object.metadata.namespace).name(object.metadata.name).check('get')")
    run("kubectl", "-n", namespace, "create", "role", "cm-reader", "--verb=get", "--resource=configmaps")
    # Warn, and fail when the robot may read it: the warning is how the test reads the Decision
    _apply_policy(run, name, namespace, {"variables": [{"name": "robot", "expression": robot}], "validations": [
        {"expression": "!variables.robot.allowed()", "messageExpression":
            "'robot may read ' + object.metadata.name + ': ' + variables.robot.reason() + "
            "(variables.robot.errored() ? ' (error: ' + variables.robot.error() + ')' : '')"}]}, ["Warn"])
    try:
        def warning(cm: str) -> str:
            stderr = run("kubectl", "-n", namespace, "create", "configmap", cm).stderr
            return stderr.partition(f"with binding '{name}': ")[2].strip()

        assert warning("a") == ""
        run("kubectl", "-n", namespace, "create", "rolebinding", "robots", "--role=cm-reader",
            f"--group=system:serviceaccounts:{namespace}")
        assert warning("b") == (f'robot may read b: RBAC: allowed by RoleBinding "robots/{namespace}" of Role '
                                f'"cm-reader" to Group "system:serviceaccounts:{namespace}"')
        run("kubectl", "-n", namespace, "delete", "rolebinding", "robots")
        run("kubectl", "-n", namespace, "create", "rolebinding", "robot", "--role=cm-reader",
            f"--serviceaccount={namespace}:robot")
        assert warning("c") == (f'robot may read c: RBAC: allowed by RoleBinding "robot/{namespace}" of Role '
                                f'"cm-reader" to ServiceAccount "robot/{namespace}"')
    finally:
        run("kubectl", "delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", name)
