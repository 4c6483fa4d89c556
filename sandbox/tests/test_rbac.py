"""RBAC in the sandbox: ServiceAccount tokens from the TokenRequest API, rules that allow and deny."""

from __future__ import annotations

import json
import time

import yaml
from helmop_sandbox import Sandbox

from tests.tools import Run

ROLE = """
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: cm-reader}
rules:
- {apiGroups: [""], resources: [configmaps], verbs: [get, list]}
- {apiGroups: [""], resources: [secrets], verbs: [get], resourceNames: [visible]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: cm-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: cm-reader}
subjects: [{kind: ServiceAccount, name: robot, namespace: NS}]
"""


def test_service_account_rights(run: Run, namespace: str) -> None:
    run("kubectl", "-n", namespace, "create", "serviceaccount", "robot")
    run("kubectl", "-n", namespace, "apply", "-f", "-", stdin=ROLE.replace("NS", namespace))
    run("kubectl", "-n", namespace, "create", "configmap", "c", "--from-literal=a=b")
    run("kubectl", "-n", namespace, "create", "secret", "generic", "visible", "--from-literal=a=b")
    run("kubectl", "-n", namespace, "create", "secret", "generic", "hidden", "--from-literal=a=b")
    token = run("kubectl", "-n", namespace, "create", "token", "robot").stdout.strip()
    assert token

    def as_robot(*args: str) -> tuple[int, str]:
        done = run("kubectl", "--token", token, "-n", namespace, *args, check=False)
        return done.returncode, done.stderr

    assert as_robot("get", "configmap", "c")[0] == 0
    assert as_robot("get", "secret", "visible")[0] == 0
    code, err = as_robot("get", "secret", "hidden")
    assert code != 0 and "forbidden" in err and "system:serviceaccount:" + namespace + ":robot" in err
    code, err = as_robot("delete", "configmap", "c")
    assert code != 0 and 'cannot delete resource "configmaps"' in err
    code, err = as_robot("get", "configmaps", "-n", "default")
    assert code != 0 and "forbidden" in err
    assert run("kubectl", "--token", "not-a-token", "get", "ns", check=False).returncode != 0
    # The admin may act as the robot (impersonation), and then has only its rights.
    robot = f"system:serviceaccount:{namespace}:robot"
    assert run("kubectl", "-n", namespace, "--as", robot, "get", "cm", "c").returncode == 0
    denied = run("kubectl", "-n", namespace, "--as", robot, "delete", "cm", "c", check=False)
    assert denied.returncode != 0 and "forbidden" in denied.stderr
    assert yaml.safe_load(run("kubectl", "-n", namespace, "get", "cm", "c", "-o", "yaml").stdout)["data"] == {"a": "b"}


TEAM_ADMIN = """
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: team-admin}
rules:
- {apiGroups: [""], resources: [configmaps], verbs: [get, list, create]}
- {apiGroups: [rbac.authorization.k8s.io], resources: [roles, rolebindings], verbs: [get, list, create, update, patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: team-admin}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: team-admin}
subjects: [{kind: ServiceAccount, name: lead, namespace: NS}]
"""


def test_auth_can_i_whoami_and_no_escalation(run: Run, namespace: str) -> None:
    run("kubectl", "-n", namespace, "create", "serviceaccount", "lead")
    run("kubectl", "-n", namespace, "apply", "-f", "-", stdin=TEAM_ADMIN.replace("NS", namespace))
    lead = f"system:serviceaccount:{namespace}:lead"
    token = run("kubectl", "-n", namespace, "create", "token", "lead").stdout.strip()

    def as_lead(*args: str) -> tuple[int, str, str]:
        done = run("kubectl", "--token", token, "-n", namespace, *args, check=False)
        return done.returncode, done.stdout.strip(), done.stderr

    # kubectl auth can-i (SelfSubjectAccessReview): answers yes/no, exit 0/1
    assert as_lead("auth", "can-i", "create", "configmaps")[:2] == (0, "yes")
    assert as_lead("auth", "can-i", "delete", "configmaps")[:2] == (1, "no")
    assert as_lead("auth", "can-i", "get", "secrets", "-n", "default")[:2] == (1, "no")
    assert run("kubectl", "auth", "can-i", "delete", "nodes").stdout.strip() == "yes"  # the admin
    # --as (impersonation, then the review as that user) and --list (SelfSubjectRulesReview)
    assert run("kubectl", "-n", namespace, "auth", "can-i", "list", "configmaps", "--as", lead).stdout.strip() == "yes"
    listed = run("kubectl", "-n", namespace, "auth", "can-i", "--list", "--as", lead).stdout
    assert "configmaps" in listed and "rolebindings.rbac.authorization.k8s.io" in listed and "secrets" not in listed
    # kubectl auth whoami (SelfSubjectReview)
    code, out, _ = as_lead("auth", "whoami", "-o", "json")
    assert code == 0 and yaml.safe_load(out)["status"]["userInfo"]["username"] == lead

    # TokenReview: who a token is, for a caller allowed to ask (the admin; not the lead)
    review = json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}})
    reviewed = json.loads(run("kubectl", "create", "--raw", "/apis/authentication.k8s.io/v1/tokenreviews",
                              "-f", "-", stdin=review).stdout)["status"]
    assert reviewed["authenticated"] and reviewed["user"]["username"] == lead
    assert f"system:serviceaccounts:{namespace}" in reviewed["user"]["groups"]
    unknown = json.loads(run("kubectl", "create", "--raw", "/apis/authentication.k8s.io/v1/tokenreviews", "-f", "-",
                             stdin=review.replace(token, "not-a-token")).stdout)["status"]
    assert not unknown.get("authenticated") and unknown["user"] == {}
    refused = run("kubectl", "--token", token, "create", "--raw", "/apis/authentication.k8s.io/v1/tokenreviews",
                  "-f", "-", stdin=review, check=False)
    assert refused.returncode != 0 and "forbidden" in refused.stderr.lower(), refused.stderr

    # Escalation: the lead may create RoleBindings, but not to rights the lead does not hold.
    code, _, err = as_lead("create", "rolebinding", "grab", "--clusterrole=cluster-admin",
                           f"--serviceaccount={namespace}:lead")
    assert code != 0 and "attempting to grant RBAC permissions not currently held" in err, err
    code, _, err = as_lead("create", "role", "wider", "--verb=get", "--resource=secrets")
    assert code != 0 and "attempting to grant RBAC permissions not currently held" in err, err
    # Within the lead's own rights both are fine.
    assert as_lead("create", "role", "reader", "--verb=get,list", "--resource=configmaps")[0] == 0
    run("kubectl", "-n", namespace, "create", "serviceaccount", "helper")
    assert as_lead("create", "rolebinding", "helper", "--role=reader", f"--serviceaccount={namespace}:helper")[0] == 0
    # Patching a role up to more than one holds is refused too (judged on the patched result).
    code, _, err = as_lead("patch", "role", "reader", "--type=json",
                           "-p", '[{"op":"add","path":"/rules/0/verbs/-","value":"delete"}]')
    assert code != 0 and "not currently held" in err
    # A subject may be granted what the granter holds through `bind` on that role.
    run("kubectl", "-n", namespace, "create", "role", "binder", "--verb=bind",
        "--resource=clusterroles.rbac.authorization.k8s.io", "--resource-name=view")
    run("kubectl", "-n", namespace, "create", "rolebinding", "binder", "--role=binder",
        f"--serviceaccount={namespace}:lead")
    run("kubectl", "apply", "-f", "-", stdin="apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n"
        "metadata: {name: view}\nrules: [{apiGroups: [''], resources: [pods], verbs: [get]}]\n")
    bound = as_lead("create", "rolebinding", "viewers", "--clusterrole=view", f"--serviceaccount={namespace}:helper")
    assert bound[0] == 0, bound


def test_admin_edit_and_view_are_aggregated_as_upstream(sandbox: Sandbox, run: Run, namespace: str) -> None:
    """The user-facing roles: a binding to edit lets a user run workloads and read Secrets in that namespace
    only; view does not read Secrets; a ClusterRole labelled aggregate-to-edit adds its rules to edit."""
    for role, user in (("edit", "erin"), ("view", "vic")):
        run("kubectl", "-n", namespace, "create", "rolebinding", f"{user}-{role}", f"--clusterrole={role}",
            f"--user={user}")

    def can(user: str, *what: str) -> bool:
        done = run("kubectl", "auth", "can-i", *what, "--as", user, check=False)
        return done.stdout.strip() == "yes"

    assert can("erin", "create", "deployments", "-n", namespace) and can("erin", "get", "secrets", "-n", namespace)
    assert not can("erin", "get", "secrets", "-n", "default") and not can("erin", "create", "rolebindings", "-n",
                                                                             namespace)
    assert can("vic", "list", "pods", "-n", namespace) and not can("vic", "get", "secrets", "-n", namespace)
    assert not can("erin", "list", "leases.coordination.k8s.io", "-n", namespace)
    run("kubectl", "apply", "-f", "-", stdin="""apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: leases-edit
  labels: {rbac.authorization.k8s.io/aggregate-to-edit: "true"}
rules:
- {apiGroups: [coordination.k8s.io], resources: [leases], verbs: [get, list, watch, create]}
""")
    deadline = time.monotonic() + 10
    while not can("erin", "list", "leases.coordination.k8s.io", "-n", namespace):
        assert time.monotonic() < deadline, "edit did not aggregate the new ClusterRole"
        time.sleep(0.1)
    assert not can("vic", "list", "leases.coordination.k8s.io", "-n", namespace)
    rules = json.loads(run("kubectl", "get", "clusterrole", "admin", "-o", "json").stdout)["rules"]
    assert {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
            "verbs": ["get", "list", "watch", "create"]} not in rules  # labelled for edit only


def test_every_resource_request_is_counted(sandbox: Sandbox, run: Run, namespace: str) -> None:
    """The audit keeps the latest requests; the count is of all of them (what the benchmarks divide)."""
    before = sandbox.requests_served
    run("kubectl", "-n", namespace, "get", "configmap", "--ignore-not-found", "nothing-here")
    run("kubectl", "-n", namespace, "create", "configmap", "counted")
    served = sandbox.requests_served - before
    counted = [(attrs.verb, attrs.resource) for _, attrs in list(sandbox.audit)[-served:]
               if attrs.namespace == namespace]
    assert counted == [("get", "configmaps"), ("create", "configmaps")], counted
