"""The tests' in-process stand-in for plain ``kubectl create`` and ``kubectl apply -f -`` (tests.kubecreate) sends
what kubectl sends, and leaves to kubectl what it cannot be sure to read as kubectl does."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from tests.kubecreate import LAST_APPLIED, applied, creation, with_last_applied
from tests.tools import Runner, tool

CREATED = [
    ("-n", "default", "create", "secret", "generic", "s1", "--from-literal=a=b", "--from-literal=c=<&>"),
    ("-n", "default", "create", "secret", "generic", "s2", "--type=kubernetes.io/dockerconfigjson",
     "--from-literal=.dockerconfigjson={}"),
    ("-n", "default", "create", "secret", "generic", "s3"),
    ("-n", "default", "create", "configmap", "m", "--from-literal=k=v"),
    ("create", "namespace", "nn"),
    ("-n", "default", "create", "serviceaccount", "sa"),
    ("-n", "default", "create", "rolebinding", "rb", "--clusterrole=edit", "--serviceaccount=default:bob",
     "--user=me", "--group=g1"),
    ("-n", "default", "create", "rolebinding", "rb2", "--role=r"),
    ("create", "clusterrolebinding", "crb", "--clusterrole=cluster-admin", "--user=me"),
]


@pytest.mark.parametrize("args", CREATED, ids=lambda a: "-".join(a[a.index("create") + 1:][:2]))
def test_a_creation_is_what_kubectl_sends(run: Runner, args: tuple[str, ...]) -> None:
    done = run("kubectl", *args, "--dry-run=client", "-o", "json")
    sent = json.loads(done.stdout)
    sent["metadata"].pop("creationTimestamp", None)
    made = creation(("kubectl", *args))
    assert made is not None and made.body == sent


@pytest.mark.parametrize("args", [
    ("-n", "default", "create", "secret", "generic", "k", "--from-file=a=b"),
    ("-n", "default", "create", "role", "r", "--verb=get", "--resource=pods"),
    ("create", "secret", "generic", "x", "-n", "default"),
    ("-n", "default", "create", "rolebinding", "rb", "--clusterrole=a", "--role=b"),
    ("-n", "default", "create", "rolebinding", "rb", "--clusterrole=a", "--as=someone"),
], ids=str)
def test_other_creations_are_kubectls(args: tuple[str, ...]) -> None:
    assert creation(("kubectl", *args)) is None


def test_an_apply_creates_as_kubectl_does_and_kubectl_merges_from_it(run: Runner) -> None:
    doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "by-kubectl", "annotations": {"z": "1"}},
           "data": {"html": "<a & b>", "text": "é✓", "n": "one"}}
    subprocess.run([tool("kubectl"), "-n", "default", "apply", "-f", "-"], env=run.env, input=json.dumps(doc),
                   check=True, capture_output=True, text=True)
    live = run.api.get("default", "configmaps", "by-kubectl")
    assert with_last_applied(doc, "default")["metadata"]["annotations"][LAST_APPLIED] == \
        live["metadata"]["annotations"][LAST_APPLIED]
    mine = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "in-process"},
            "data": {"a": "one", "b": "two"}}
    done = run("kubectl", "-n", "default", "apply", "-f", "-", stdin=yaml.safe_dump(mine))
    assert done.args[0] == "kubectl" and done.stdout == "configmap/in-process created\n"  # not a kubectl process
    del mine["data"]["b"]  # kubectl's three-way merge, from the annotation made here, removes what was applied before
    assert run("kubectl", "-n", "default", "apply", "-f", "-", stdin=yaml.safe_dump(mine)).stdout == \
        "configmap/in-process configured\n"
    assert run.api.get("default", "configmaps", "in-process")["data"] == {"a": "one"}


@pytest.mark.parametrize("value", ["y", "on", "0o17", "017", "1e3", "0x1F", "2024-01-02", ".inf", "1_000"])
def test_yaml_go_reads_otherwise_is_kubectls(value: str) -> None:
    """PyYAML writes these plain, and kubectl's YAML reads them as booleans, numbers or times: left to kubectl, which
    says what it makes of them."""
    doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"k": value}}
    assert applied(("kubectl", "apply", "-f", "-"), yaml.safe_dump(doc)) is None
    assert applied(("kubectl", "apply", "-f", "-"), json.dumps(doc)) is not None  # JSON is read alike
    doc["data"]["k"] = "60s"
    assert applied(("kubectl", "apply", "-f", "-"), yaml.safe_dump(doc)) is not None


def test_the_servers_warnings_are_printed_as_kubectl_prints_them(run: Runner) -> None:
    run("kubectl", "apply", "--server-side", "-f", "-", stdin=json.dumps({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.warned.test"},
        "spec": {"group": "warned.test", "scope": "Namespaced",
                 "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "deprecated": True,
                               "deprecationWarning": 'gadgets are "old": use widgets',
                               "schema": {"openAPIV3Schema": {"type": "object"}}}]}}))
    run("kubectl", "wait", "--for=condition=Established", "crd/gadgets.warned.test")

    def gadget(name: str) -> str:
        return json.dumps({"apiVersion": "warned.test/v1", "kind": "Gadget", "metadata": {"name": name}})

    by_kubectl = subprocess.run([tool("kubectl"), "-n", "default", "apply", "-f", "-"], env=run.env,
                                input=gadget("one"), check=True, capture_output=True, text=True)
    here = run("kubectl", "-n", "default", "apply", "-f", "-", stdin=gadget("two"))
    assert here.args[0] == "kubectl" and here.stdout == "gadget.warned.test/two created\n"
    assert here.stderr == by_kubectl.stderr == 'Warning: gadgets are "old": use widgets\n'
