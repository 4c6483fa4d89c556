"""kopf 1.45 and the official kubernetes Python client against the sandbox."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from helmop_sandbox import Sandbox
from kopf.testing import KopfRunner
from kubernetes import client, watch

from tests.tools import Run, eventually

T = TypeVar("T")

CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: things.clients.test}
spec:
  group: clients.test
  scope: Namespaced
  names: {plural: things, singular: thing, kind: Thing}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {size: {type: integer}}}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
"""

OPERATOR = '''
import kopf

@kopf.on.login()
def login(**kwargs):
    # kopf's own kubeconfig reader: it reads $KUBECONFIG now, not when `kubernetes` was imported.
    return kopf.login_with_kubeconfig(**kwargs)

@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_):
    settings.persistence.finalizer = "clients.test/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="clients.test")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix="clients.test")

@kopf.on.create("clients.test", "v1", "things")
def on_create(spec, patch, **_):
    patch.status["createdWith"] = spec["size"]

@kopf.on.update("clients.test", "v1", "things")
def on_update(spec, patch, **_):
    patch.status["updatedTo"] = spec["size"]

@kopf.on.delete("clients.test", "v1", "things")
def on_delete(name, **_):
    print(f"cleaned up {name}", flush=True)
'''


@pytest.fixture(scope="module")
def things(run: Run) -> None:
    run("kubectl", "apply", "-f", "-", stdin=CRD)
    run("kubectl", "wait", "--for=condition=Established", "crd/things.clients.test", "--timeout=10s")


def _settles(check: Callable[[], T]) -> T:
    """Until ``check`` holds: a client's request may fail (or the object lack a field) until it does."""
    return eventually(check, timeout=15, interval=0.1, ignoring=(AssertionError, KeyError, client.ApiException))


def test_kopf_operator_with_finalizer(things: None, sandbox: Sandbox, k8s: client.ApiClient, namespace: str,
                                      tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(sandbox.kubeconfig))
    script = tmp_path / "operator.py"
    script.write_text(OPERATOR)
    api = client.CustomObjectsApi(k8s)
    gvr = ("clients.test", "v1", namespace, "things")
    with KopfRunner(["run", "--standalone", f"--namespace={namespace}", str(script)], timeout=60) as runner:
        api.create_namespaced_custom_object(*gvr, {"apiVersion": "clients.test/v1", "kind": "Thing",
                                                   "metadata": {"name": "t1"}, "spec": {"size": 1}})
        obj = _settles(lambda: (o := api.get_namespaced_custom_object(*gvr, "t1"))["status"]["createdWith"] == 1
                          and o)
        assert obj["metadata"]["finalizers"] == ["clients.test/finalizer"]
        api.patch_namespaced_custom_object(*gvr, "t1", {"spec": {"size": 2}})
        assert _settles(lambda: api.get_namespaced_custom_object(*gvr, "t1")["status"].get("updatedTo") == 2)
        api.delete_namespaced_custom_object(*gvr, "t1")
        # The finalizer holds the object until kopf's delete handler ran; then it is gone.
        def gone() -> bool:
            try:
                api.get_namespaced_custom_object(*gvr, "t1")
            except client.ApiException as exc:
                return exc.status == 404
            return False

        assert _settles(gone)
    assert runner.exit_code == 0, runner.output
    assert "cleaned up t1" in runner.output


def test_delete_waits_for_finalizer(things: None, k8s: client.ApiClient, namespace: str) -> None:
    api = client.CustomObjectsApi(k8s)
    gvr = ("clients.test", "v1", namespace, "things")
    api.create_namespaced_custom_object(*gvr, {"apiVersion": "clients.test/v1", "kind": "Thing",
                                               "metadata": {"name": "held", "finalizers": ["x.test/hold"]}})
    api.delete_namespaced_custom_object(*gvr, "held")
    held = api.get_namespaced_custom_object(*gvr, "held")
    assert held["metadata"]["deletionTimestamp"]
    api.patch_namespaced_custom_object(*gvr, "held", {"metadata": {"finalizers": None}})
    with pytest.raises(client.ApiException) as missing:
        api.get_namespaced_custom_object(*gvr, "held")
    assert missing.value.status == 404


def test_python_client_list_watch_patch_resume(things: None, k8s: client.ApiClient, namespace: str) -> None:
    api = client.CustomObjectsApi(k8s)
    gvr = ("clients.test", "v1", namespace, "things")
    for i in range(3):
        api.create_namespaced_custom_object(*gvr, {"apiVersion": "clients.test/v1", "kind": "Thing",
                                                   "metadata": {"name": f"w{i}", "labels": {"n": str(i)}},
                                                   "spec": {"size": i}})
    listed = api.list_namespaced_custom_object(*gvr)
    assert [o["metadata"]["name"] for o in listed["items"]] == ["w0", "w1", "w2"]
    rv = listed["metadata"]["resourceVersion"]

    # made before the watch starts: resuming from the list's resourceVersion brings them all the same
    api.patch_namespaced_custom_object(*gvr, "w1", {"spec": {"size": 10}})
    api.delete_namespaced_custom_object(*gvr, "w2")
    seen = []
    w = watch.Watch()
    for event in w.stream(api.list_namespaced_custom_object, *gvr, resource_version=rv, timeout_seconds=5):
        meta = event["object"]["metadata"]
        seen.append((event["type"], meta["name"], meta["resourceVersion"]))
        if len(seen) == 2:
            w.stop()
    assert [s[:2] for s in seen] == [("MODIFIED", "w1"), ("DELETED", "w2")]
    # Resuming from the first event's resourceVersion replays only what came after it.
    resumed = []
    w = watch.Watch()
    for event in w.stream(api.list_namespaced_custom_object, *gvr, resource_version=seen[0][2], timeout_seconds=2):
        resumed.append((event["type"], event["object"]["metadata"]["name"]))
        w.stop()
    assert resumed == [("DELETED", "w2")]
    selected = api.list_namespaced_custom_object(*gvr, label_selector="n in (0,1)")
    assert [o["metadata"]["name"] for o in selected["items"]] == ["w0", "w1"]


CLIENT_SCRIPT = '''
import json, sys, threading, time
import kubernetes
from kubernetes import client, config, watch

api = config.new_client_from_config(config_file=sys.argv[1])
core, ns = client.CoreV1Api(api), sys.argv[2]
seen = []

def watching():
    for event in watch.Watch().stream(core.list_namespaced_config_map, ns, timeout_seconds=5):
        if event["object"].metadata.name != "kube-root-ca.crt":  # every namespace has it
            seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == 2:
            return

thread = threading.Thread(target=watching)
thread.start()
time.sleep(0.5)
core.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="watched")))
core.delete_namespaced_config_map("watched", ns)
thread.join(10)
service = core.create_namespaced_service(ns, client.V1Service(
    metadata=client.V1ObjectMeta(name="web"), spec=client.V1ServiceSpec(ports=[client.V1ServicePort(port=80)])))
deleted = core.delete_namespaced_service("web", ns)
pod = core.create_namespaced_pod(ns, client.V1Pod(metadata=client.V1ObjectMeta(name="p"), spec=client.V1PodSpec(
    containers=[client.V1Container(name="c", image="busybox:1")])))
gone_pod = core.delete_namespaced_pod("p", ns)
print(json.dumps({"version": kubernetes.__version__, "events": seen,
                  "service_ip": service.spec.cluster_ip, "status": service.status.to_dict(),
                  "deleted": [type(deleted).__name__, deleted.metadata.name,
                              type(gone_pod).__name__, gone_pod.metadata.name]}))
'''


@pytest.mark.parametrize("major", ["36", "37"])
def test_python_client_watch_and_delete(sandbox: Sandbox, namespace: str, major: str) -> None:
    """Watches (36.x sends watch=True) and deletes answering the object (37.x parses it as one)."""
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ)
    if major == "36":
        older = Path(__file__).parents[2] / ".tools" / "python-client-36"
        if not older.exists():
            pytest.fail(f"{older} is missing: run scripts/setup (the test command does)")
        env["PYTHONPATH"] = os.pathsep.join([str(older), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", CLIENT_SCRIPT, str(sandbox.kubeconfig), namespace], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["version"].startswith(major + ".")
    assert result["events"] == [["ADDED", "watched"], ["DELETED", "watched"]]
    assert result["service_ip"] and result["status"] == {"conditions": None, "load_balancer": {"ingress": None}}
    assert result["deleted"] == ["V1Service", "web", "V1Pod", "p"]
