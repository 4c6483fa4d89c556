"""RBAC in the sandbox: ServiceAccount tokens from the TokenRequest API, rules that allow and deny."""

from __future__ import annotations

import yaml

from tests.conftest import Run

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
