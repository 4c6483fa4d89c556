"""kubectl 1.35 against the sandbox: apply (client- and server-side), get, wait, delete, CRDs."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import yaml

from tests.tools import Run

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web, tier: front}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
        ports: [{containerPort: 80}]
        env: [{name: A, value: "1"}, {name: B, value: "x"}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, labels: {tier: back}}
data: {k: v}
"""

CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.kubectl.test}
spec:
  group: kubectl.test
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget, shortNames: [gd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Ready, type: string, jsonPath: '.status.conditions[?(@.type=="Ready")].status'}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {type: integer, minimum: 1, maximum: 10}
              color: {type: string, enum: [red, blue], default: red}
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
"""


def _get(run: Run, ns: str, *what: str) -> dict:
    return json.loads(run("kubectl", "-n", ns, "get", *what, "-o", "json", "--show-managed-fields").stdout)


def test_client_side_apply_create_update_and_get(run: Run, namespace: str) -> None:
    run("kubectl", "-n", namespace, "apply", "-f", "-", stdin=DEPLOYMENT)
    run("kubectl", "-n", namespace, "wait", "--for=condition=Available", "deploy/web", "--timeout=20s")
    changed = DEPLOYMENT.replace('value: "1"', 'value: "2"').replace(", {name: B, value: \"x\"}", "")
    done = run("kubectl", "-n", namespace, "apply", "-f", "-", stdin=changed)
    assert "deployment.apps/web configured" in done.stdout and "configmap/settings unchanged" in done.stdout
    # the strategic merge patch built from the server's OpenAPI v3, as against kube-apiserver (no warning, no fallback)
    assert "strategic merge patch" not in done.stderr, done.stderr
    deploy = _get(run, namespace, "deploy", "web")
    assert deploy["spec"]["template"]["spec"]["containers"][0]["env"] == [{"name": "A", "value": "2"}]
    assert deploy["metadata"]["generation"] == 2
    as_yaml = yaml.safe_load(run("kubectl", "-n", namespace, "get", "deploy", "web", "-o", "yaml").stdout)
    assert as_yaml["metadata"]["uid"] == deploy["metadata"]["uid"]
    table = run("kubectl", "-n", namespace, "get", "deploy").stdout
    assert table.split()[:4] == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE"]


def test_label_selectors_in_get(run: Run, namespace: str) -> None:
    run("kubectl", "-n", namespace, "apply", "-f", "-", stdin=DEPLOYMENT)
    names = run("kubectl", "-n", namespace, "get", "deploy,cm", "-l", "tier in (front,back)", "-o", "name").stdout
    assert set(names.split()) == {"deployment.apps/web", "configmap/settings"}
    names = run("kubectl", "-n", namespace, "get", "deploy,cm", "-l", "tier!=front,tier", "-o", "name").stdout
    assert names.split() == ["configmap/settings"]


def test_get_prints_every_chunk_of_a_long_list(run: Run, namespace: str) -> None:
    """kubectl asks for 500 rows at a time (here 2) and follows each Table's ``continue``, as for a JSON list."""
    run("kubectl", "-n", namespace, "apply", "-f", "-", stdin="---\n".join(
        f"{{apiVersion: v1, kind: ConfigMap, metadata: {{name: c{i}}}}}\n" for i in range(5)))
    for output in ([], ["-o", "name"]):
        printed = run("kubectl", "-n", namespace, "get", "cm", "--chunk-size=2", "--no-headers", *output).stdout
        names = {line.split()[0].rpartition("/")[2] for line in printed.splitlines()}
        assert {f"c{i}" for i in range(5)} <= names, printed  # (and kube-root-ca.crt)


def test_server_side_apply_owns_fields_and_reports_conflicts(run: Run, namespace: str) -> None:
    run("kubectl", "-n", namespace, "apply", "--server-side", "-f", "-", stdin=DEPLOYMENT)
    deploy = _get(run, namespace, "deploy", "web")
    managers = {(m["manager"], m["operation"]) for m in deploy["metadata"]["managedFields"]}
    assert ("kubectl", "Apply") in managers
    run("kubectl", "-n", namespace, "scale", "deploy/web", "--replicas=4")
    changed = DEPLOYMENT.replace("replicas: 2", "replicas: 3")
    failed = run("kubectl", "-n", namespace, "apply", "--server-side", "-f", "-", stdin=changed, check=False)
    assert failed.returncode != 0 and "conflict" in failed.stderr and ".spec.replicas" in failed.stderr
    run("kubectl", "-n", namespace, "apply", "--server-side", "--force-conflicts", "-f", "-", stdin=changed)
    assert _get(run, namespace, "deploy", "web")["spec"]["replicas"] == 3
    # A field dropped from the applied configuration is removed from the object.
    without_b = changed.replace(", {name: B, value: \"x\"}", "")
    run("kubectl", "-n", namespace, "apply", "--server-side", "-f", "-", stdin=without_b)
    env = _get(run, namespace, "deploy", "web")["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env == [{"name": "A", "value": "1"}]


def test_crd_then_custom_resource_by_short_name(run: Run, namespace: str) -> None:
    run("kubectl", "apply", "-f", "-", stdin=CRD)
    run("kubectl", "wait", "--for=condition=Established", "crd/gadgets.kubectl.test", "--timeout=10s")
    gadget = "apiVersion: kubectl.test/v1\nkind: Gadget\nmetadata: {name: g1}\nspec: {size: 3}\n"
    run("kubectl", "-n", namespace, "apply", "-f", "-", stdin=gadget)
    obj = _get(run, namespace, "gd", "g1")
    assert obj["spec"] == {"size": 3, "color": "red"}  # schema default applied
    run("kubectl", "-n", namespace, "patch", "gd", "g1", "--subresource=status", "--type=merge",
        "-p", '{"status":{"conditions":[{"type":"Ready","status":"True"}]}}')
    table = run("kubectl", "-n", namespace, "get", "gd").stdout.splitlines()
    assert table[0].split() == ["NAME", "SIZE", "READY", "AGE"]
    assert table[1].split()[:3] == ["g1", "3", "True"]
    run("kubectl", "-n", namespace, "wait", "--for=condition=Ready", "gadget/g1", "--timeout=10s")
    bad = gadget.replace("size: 3", "size: 30")
    failed = run("kubectl", "-n", namespace, "apply", "-f", "-", stdin=bad.replace("g1", "g2"), check=False)
    assert failed.returncode != 0 and "spec.size" in failed.stderr and "less than or equal to 10" in failed.stderr
    unknown = gadget.replace("size: 3", "size: 3, bogus: 1").replace("g1", "g3")
    failed = run("kubectl", "-n", namespace, "apply", "-f", "-", stdin=unknown, check=False)
    assert failed.returncode != 0 and 'unknown field "spec.bogus"' in failed.stderr


def test_builtin_schema_is_enforced(run: Run, namespace: str) -> None:
    bad = DEPLOYMENT.replace("replicas: 2", "replicas: two")
    failed = run("kubectl", "-n", namespace, "apply", "-f", "-", stdin=bad, check=False)
    assert failed.returncode != 0 and "spec.replicas" in failed.stderr
    unknown = DEPLOYMENT.replace("replicas: 2", "replicas: 2\n  replicaz: 3")
    failed = run("kubectl", "-n", namespace, "apply", "-f", "-", stdin=unknown, check=False)
    assert failed.returncode != 0 and 'unknown field "spec.replicaz"' in failed.stderr


def test_delete_waits_for_nothing_and_removes(run: Run, namespace: str) -> None:
    run("kubectl", "-n", namespace, "apply", "-f", "-", stdin=DEPLOYMENT)
    run("kubectl", "-n", namespace, "wait", "--for=condition=Available", "deploy/web", "--timeout=20s")
    assert run("kubectl", "-n", namespace, "get", "rs", "-o", "name").stdout.strip()
    run("kubectl", "-n", namespace, "delete", "deploy", "web", "--wait=true", "--timeout=20s")
    missing = run("kubectl", "-n", namespace, "get", "deploy", "web", check=False)
    assert missing.returncode != 0 and "NotFound" in missing.stderr
    # The ReplicaSet it owned is garbage-collected.
    run("kubectl", "-n", namespace, "wait", "--for=delete", "rs", "--all", "--timeout=10s")
    assert run("kubectl", "-n", namespace, "get", "rs", "-o", "name").stdout.strip() == ""


def test_size_limits_as_the_api_server_has_them(run: Run, namespace: str, tmp_path: object) -> None:
    """Secrets and ConfigMaps hold at most 1 MiB of data; a request body at most 3 MiB."""
    from pathlib import Path

    big = Path(str(tmp_path)) / "big.txt"
    big.write_text("x" * ((1 << 20) + 10))
    done = run("kubectl", "-n", namespace, "create", "configmap", "big", f"--from-file={big}", check=False)
    assert done.returncode != 0 and "Too long: may not be more than 1048576 bytes" in done.stderr
    done = run("kubectl", "-n", namespace, "create", "secret", "generic", "big", f"--from-file={big}", check=False)
    assert done.returncode != 0 and "Too long" in done.stderr
    fits = Path(str(tmp_path)) / "fits.txt"
    fits.write_text("x" * ((1 << 20) - 100))
    run("kubectl", "-n", namespace, "create", "configmap", "fits", f"--from-file={fits}")
    huge = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "huge"},
            "data": {f"k{i}": "y" * (1 << 20) for i in range(4)}}
    done = run("kubectl", "-n", namespace, "create", "-f", "-", stdin=json.dumps(huge), check=False)
    assert done.returncode != 0 and "Request entity too large" in done.stderr


def test_a_finished_pod_shows_completed(run: Run, namespace: str) -> None:
    import time

    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "once"},
           "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1"}]}}
    run("kubectl", "-n", namespace, "create", "-f", "-", stdin=json.dumps(pod))
    deadline = time.monotonic() + 10
    while json.loads(run("kubectl", "-n", namespace, "get", "pod", "once", "-o", "json").stdout)["status"].get(
            "phase") != "Succeeded":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    line = run("kubectl", "-n", namespace, "get", "pod", "once", "--no-headers").stdout.split()
    assert line[:3] == ["once", "0/1", "Completed"], line


def test_applying_an_empty_map_others_fill_is_no_conflict(run: Run, namespace: str) -> None:
    """As kube-apiserver: `data: {}` merges into the live map, so another manager's keys are no conflict; the
    applier's own keys go, the other manager's stay."""
    def apply(manager: str, data: dict[str, str]) -> subprocess.CompletedProcess[str]:
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}, "data": data}
        return run("kubectl", "-n", namespace, "apply", "--server-side", f"--field-manager={manager}", "-f", "-",
                   stdin=json.dumps(cm), check=False)

    assert apply("b", {"k1": "from-b"}).returncode == 0
    done = apply("a", {})
    assert done.returncode == 0, done.stderr
    cm = _get(run, namespace, "configmap", "shared")
    assert cm["data"] == {"k1": "from-b"}
    assert {e["manager"] for e in cm["metadata"]["managedFields"]} == {"a", "b"}
    clash = apply("a", {"k1": "from-a"})
    assert clash.returncode != 0 and 'conflict with "b"' in clash.stderr
    assert apply("a", {"k2": "from-a"}).returncode == 0
    assert _get(run, namespace, "configmap", "shared")["data"] == {"k1": "from-b", "k2": "from-a"}
    assert apply("a", {}).returncode == 0
    assert _get(run, namespace, "configmap", "shared")["data"] == {"k1": "from-b"}


def test_managed_fields_a_request_sets_replace_those_stored(run: Run, namespace: str) -> None:
    """As kube-apiserver: a patch that sets metadata.managedFields (as Flux hands kubectl's fields to itself) is
    taken as written; the next apply by their new owner removes what it no longer sets."""
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owned"}, "data": {"a": "1"}}
    run("kubectl", "-n", namespace, "apply", "--server-side", "--field-manager=sync", "-f", "-", stdin=json.dumps(cm))
    run("kubectl", "-n", namespace, "label", "configmap", "owned", "extra=by-hand")
    live = _get(run, namespace, "configmap", "owned")
    fields: dict = {}
    for entry in live["metadata"]["managedFields"]:
        fields = {**fields, "f:data": entry["fieldsV1"].get("f:data", fields.get("f:data")),
                  "f:metadata": entry["fieldsV1"].get("f:metadata", fields.get("f:metadata"))}
    merged = [{"manager": "sync", "operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV1",
               "fieldsV1": {k: v for k, v in fields.items() if v}}]
    run("kubectl", "-n", namespace, "patch", "configmap", "owned", "--type=json", "-p",
        json.dumps([{"op": "replace", "path": "/metadata/managedFields", "value": merged}]))
    assert [e["manager"] for e in _get(run, namespace, "configmap", "owned")["metadata"]["managedFields"]] == ["sync"]
    run("kubectl", "-n", namespace, "apply", "--server-side", "--field-manager=sync", "-f", "-", stdin=json.dumps(cm))
    assert "extra" not in (_get(run, namespace, "configmap", "owned")["metadata"].get("labels") or {})


RULES_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: pools.rules.test}
spec:
  group: rules.test
  scope: Namespaced
  names: {plural: pools, singular: pool, kind: Pool}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - rule: self.min <= self.max
              message: min must not exceed max
            - rule: self.max <= oldSelf.max * 2
              messageExpression: "'max may at most double, to ' + string(oldSelf.max * 2)"
              reason: FieldValueForbidden
              fieldPath: .max
            properties:
              min: {type: integer}
              max: {type: integer}
              mode:
                type: string
                x-kubernetes-validations:
                - {rule: self == oldSelf, message: mode is immutable}
"""


def test_crd_validation_rules_with_cel(run: Run, namespace: str) -> None:
    run("kubectl", "apply", "-f", "-", stdin=RULES_CRD)
    run("kubectl", "wait", "--for=condition=Established", "crd/pools.rules.test", "--timeout=10s")

    def pool(**spec: object) -> str:
        return json.dumps({"apiVersion": "rules.test/v1", "kind": "Pool", "metadata": {"name": "p"}, "spec": spec})

    bad = run("kubectl", "-n", namespace, "create", "-f", "-", stdin=pool(min=5, max=1, mode="a"), check=False)
    assert bad.returncode != 0
    assert 'The Pool "p" is invalid: spec: Invalid value: "object": min must not exceed max' in bad.stderr
    run("kubectl", "-n", namespace, "create", "-f", "-", stdin=pool(min=1, max=4, mode="a"))  # no oldSelf yet
    grow = run("kubectl", "-n", namespace, "apply", "-f", "-", stdin=pool(min=1, max=9, mode="a"), check=False)
    assert "spec.max: Forbidden: max may at most double, to 8" in grow.stderr
    mode = run("kubectl", "-n", namespace, "apply", "-f", "-", stdin=pool(min=1, max=8, mode="b"), check=False)
    assert 'spec.mode: Invalid value: "string": mode is immutable' in mode.stderr
    run("kubectl", "-n", namespace, "apply", "-f", "-", stdin=pool(min=1, max=8, mode="a"))
    broken = RULES_CRD.replace("self.min <= self.max", "self.min <=").replace("pools.rules", "broken.rules") \
        .replace("plural: pools", "plural: broken")
    refused = run("kubectl", "apply", "-f", "-", stdin=broken, check=False)
    assert refused.returncode != 0 and "compilation failed" in refused.stderr


def test_a_deprecated_version_warns_on_every_request_in_it(run: Run, namespace: str) -> None:
    """kube-apiserver's custom resource handler: a request in a version marked ``deprecated`` gets its
    ``deprecationWarning``, or "<group>/<version> <Kind> is deprecated; use <group>/<newest> <Kind>" without one;
    the object is stored once (strategy None: only the apiVersion differs) and managedFields say what was used."""
    group = f"{namespace}.deprecation.test"
    schema = {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
        "type": "object", "properties": {"size": {"type": "integer"}}}}}}
    said = f"{group}/v1beta1 Widget is deprecated (removed in 2.0): use {group}/v1"
    versions = [{"name": "v1", "served": True, "storage": True, "schema": schema},
                {"name": "v1beta1", "served": True, "storage": False, "schema": schema, "deprecated": True,
                 "deprecationWarning": said},
                {"name": "v1alpha1", "served": True, "storage": False, "schema": schema, "deprecated": True}]
    run("kubectl", "apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {"group": group, "scope": "Namespaced", "versions": versions,
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"}}}))
    kubectl = ("kubectl", "-n", namespace)
    try:
        widget = {"apiVersion": f"{group}/v1beta1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 3}}
        applied = run(*kubectl, "apply", "--server-side", "-f", "-", stdin=json.dumps(widget))
        assert f"Warning: {said}" in applied.stderr
        read = run(*kubectl, "get", f"widgets.v1beta1.{group}", "w", "-o", "json")
        assert f"Warning: {said}" in read.stderr and json.loads(read.stdout)["apiVersion"] == f"{group}/v1beta1"
        alpha = run(*kubectl, "get", f"widgets.v1alpha1.{group}", "w")
        assert f"Warning: {group}/v1alpha1 Widget is deprecated; use {group}/v1 Widget" in alpha.stderr
        current = run(*kubectl, "get", f"widgets.v1.{group}", "w", "-o", "json", "--show-managed-fields")
        assert "Warning" not in current.stderr
        stored = json.loads(current.stdout)
        assert stored["apiVersion"] == f"{group}/v1" and stored["spec"] == {"size": 3}
        assert [e["apiVersion"] for e in stored["metadata"]["managedFields"]] == [f"{group}/v1beta1"]
    finally:
        run("kubectl", "delete", "crd", f"widgets.{group}")


def test_an_update_entry_is_kept_per_api_version(run: Run, namespace: str) -> None:
    """As kube-apiserver (BuildManagerIdentifier leaves the apiVersion out of an applier's identity only): a
    manager's writes in two versions keep two Update entries, each owning what it wrote last; its Apply entry is
    one whatever the version."""
    group = f"{namespace}.versions.test"
    schema = {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
        "type": "object", "properties": {"size": {"type": "integer"}, "old": {"type": "string"}}}}}}
    run("kubectl", "apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {"group": group, "scope": "Namespaced", "conversion": {"strategy": "None"},
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema},
                              {"name": "v1beta1", "served": True, "storage": False, "schema": schema}]}}))
    kubectl = ("kubectl", "-n", namespace)

    def write(version: str, name: str, *flags: str, **spec: Any) -> list[tuple[str, str, str, list[str]]]:
        widget = {"apiVersion": f"{group}/{version}", "kind": "Widget", "metadata": {"name": name}, "spec": spec}
        run(*kubectl, "apply", *flags, "-f", "-", stdin=json.dumps(widget))
        live = _get(run, namespace, f"widgets.v1.{group}", name, "--show-managed-fields")
        return [(e["manager"], e["operation"], e["apiVersion"], sorted(e["fieldsV1"].get("f:spec", {})))
                for e in live["metadata"]["managedFields"]]

    try:
        write("v1beta1", "client", size=3, old="x")
        # kubectl's three-way patch removes the field it applied before; what it did not change stays v1beta1's
        assert write("v1", "client", size=3) == [
            ("kubectl-client-side-apply", "Update", f"{group}/v1beta1", ["f:size"]),
            ("kubectl-client-side-apply", "Update", f"{group}/v1", [])]
        write("v1beta1", "server", "--server-side", size=3, old="x")
        assert write("v1", "server", "--server-side", size=4) == [("kubectl", "Apply", f"{group}/v1", ["f:size"])]
    finally:
        run("kubectl", "delete", "crd", f"widgets.{group}")
