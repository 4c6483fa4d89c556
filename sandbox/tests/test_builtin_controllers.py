"""The sandbox's built-in controllers as kubectl shows them: Events, Jobs that run Pods, CronJobs,
and the printer columns of `kubectl get` for the kinds they manage."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

from helmop_sandbox import Sandbox
from support import runner

from tests.tools import Run, eventually


def _json(run: Run, *args: str) -> Any:
    return json.loads(run("kubectl", *args, "-o", "json").stdout)


def test_deployment_events_as_kubectl_shows_them(run: Run, namespace: str) -> None:
    run("kubectl", "-n", namespace, "create", "deployment", "web", "--image=nginx:1", "--replicas=2")
    run("kubectl", "-n", namespace, "wait", "--for=condition=Available", "deploy/web", "--timeout=15s")
    events = run("kubectl", "-n", namespace, "events", "--for", "deploy/web").stdout
    assert "ScalingReplicaSet" in events and "Scaled up replica set web-" in events and "from 0 to 2" in events
    table = run("kubectl", "-n", namespace, "get", "events").stdout.splitlines()
    assert table[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert any("deployment/web" in line and "Normal" in line for line in table[1:])
    wide = run("kubectl", "-n", namespace, "get", "events", "-o", "wide").stdout.splitlines()[0]
    assert "SOURCE" in wide and "COUNT" in wide and "FIRST SEEN" in wide
    described = run("kubectl", "-n", namespace, "describe", "deploy", "web").stdout
    assert "deployment-controller" in described and "ScalingReplicaSet" in described


def test_jobs_run_pods(run: Run, namespace: str) -> None:
    run("kubectl", "-n", namespace, "create", "job", "once", "--image=busybox:1", "--", "echo", "hi")
    run("kubectl", "-n", namespace, "wait", "--for=condition=Complete", "job/once", "--timeout=15s")
    pods = _json(run, "-n", namespace, "get", "pods", "-l", "batch.kubernetes.io/job-name=once")["items"]
    assert len(pods) == 1 and pods[0]["status"]["phase"] == "Succeeded"
    assert pods[0]["metadata"]["ownerReferences"][0]["kind"] == "Job"
    assert pods[0]["spec"]["containers"][0]["command"] == ["echo", "hi"]
    line = run("kubectl", "-n", namespace, "get", "pods", "--no-headers").stdout.split()
    assert line[2] == "Completed"
    job = _json(run, "-n", namespace, "get", "job", "once")
    assert job["status"]["succeeded"] == 1 and job["status"].get("active", 0) == 0
    events = run("kubectl", "-n", namespace, "events", "--for", "job/once").stdout
    assert f"Created pod: {pods[0]['metadata']['name']}" in events and "Job completed" in events
    pod_events = run("kubectl", "-n", namespace, "events", "--for", f"pod/{pods[0]['metadata']['name']}").stdout
    assert "Successfully assigned" in pod_events and "Started container" in pod_events


def test_a_failing_job_retries_up_to_its_backoff_limit(run: Run, namespace: str) -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "flaky", "annotations": {"sandbox.helmop.dev/simulate": "fail"}},
           "spec": {"backoffLimit": 2, "template": {"spec": {"restartPolicy": "Never", "containers": [
               {"name": "c", "image": "busybox:1"}]}}}}
    run("kubectl", "-n", namespace, "create", "-f", "-", stdin=json.dumps(job))
    run("kubectl", "-n", namespace, "wait", "--for=condition=Failed", "job/flaky", "--timeout=15s")
    pods = _json(run, "-n", namespace, "get", "pods", "-l", "job-name=flaky")["items"]
    assert [p["status"]["phase"] for p in pods] == ["Failed"] * 3
    assert "BackoffLimitExceeded" in run("kubectl", "-n", namespace, "events", "--for", "job/flaky").stdout


def test_cronjobs_create_jobs_on_schedule(tmp_path: object) -> None:
    with Sandbox(ready_delay=0.05) as sandbox:
        run = runner(sandbox)
        assert sandbox.controllers is not None
        # daily, two hours from now: no real minute boundary the test may cross makes it due by itself
        due = datetime.now(UTC) + timedelta(hours=2)
        run("kubectl", "create", "cronjob", "tick", "--image=busybox:1", f"--schedule={due.minute} {due.hour} * * *",
            "--", "date")
        passes = sandbox.controllers.cronjob_passes
        eventually(lambda: sandbox.controllers.cronjob_passes >= passes + 2)  # it looked, at least once whole
        assert _json(run, "get", "jobs")["items"] == []  # nothing is due yet
        real = sandbox.controllers.clock
        sandbox.controllers.clock = lambda: real() + timedelta(hours=2, minutes=1)
        jobs = eventually(lambda: _json(run, "get", "jobs")["items"])
        assert len(jobs) == 1 and jobs[0]["metadata"]["name"].startswith("tick-")
        assert jobs[0]["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
        run("kubectl", "wait", "--for=condition=Complete", f"job/{jobs[0]['metadata']['name']}", "--timeout=15s")
        status = eventually(lambda: (s := _json(run, "get", "cronjob", "tick")["status"]).get("lastSuccessfulTime")
                        and s)
        assert "active" not in status and status["lastScheduleTime"]
        events = run("kubectl", "events", "--for", "cronjob/tick").stdout
        assert "Created job tick-" in events and "SawCompletedJob" in events
        columns = run("kubectl", "get", "cronjobs", "-o", "wide").stdout.splitlines()[0].split()
        assert columns == ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE", "AGE",
                           "CONTAINERS", "IMAGES", "SELECTOR"]
        run("kubectl", "patch", "cronjob", "tick", "-p", '{"spec": {"suspend": true}}')
        sandbox.controllers.clock = lambda: real() + timedelta(days=1, hours=2, minutes=1)  # due again
        passes = sandbox.controllers.cronjob_passes
        eventually(lambda: sandbox.controllers.cronjob_passes >= passes + 2)  # it looked since the time moved
        assert len(_json(run, "get", "jobs")["items"]) == 1  # suspended: no new Job


def test_printer_columns_of_nodes_and_daemonsets(run: Run, namespace: str) -> None:
    nodes = run("kubectl", "get", "nodes", "-o", "wide").stdout.splitlines()
    assert nodes[0].split()[:6] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP"]
    assert nodes[1].split()[1] == "Ready" and "127.0.0.1" in nodes[1] and "v1.35.0" in nodes[1]
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
          "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {
              "metadata": {"labels": {"app": "agent"}},
              "spec": {"nodeSelector": {"kubernetes.io/os": "linux"}, "containers": [{"name": "a", "image": "x:1"}]}}}}
    run("kubectl", "-n", namespace, "create", "-f", "-", stdin=json.dumps(ds))
    run("kubectl", "-n", namespace, "rollout", "status", "ds/agent", "--timeout=15s")
    lines = run("kubectl", "-n", namespace, "get", "ds").stdout.splitlines()
    assert lines[0].split() == ["NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE",
                                "SELECTOR", "AGE"]
    assert lines[1].split()[:7] == ["agent", "1", "1", "1", "1", "1", "kubernetes.io/os=linux"]


def _replicasets(run: Run, namespace: str) -> dict[str, tuple[str, int]]:
    """image -> (revision, replicas) of each ReplicaSet."""
    found = _json(run, "-n", namespace, "get", "rs")["items"]
    return {rs["spec"]["template"]["spec"]["containers"][0]["image"]: (
        rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"], rs["spec"]["replicas"]) for rs in found}


def test_rollout_history_undo_and_pause(run: Run, namespace: str) -> None:
    kubectl = ("kubectl", "-n", namespace)
    run(*kubectl, "create", "deployment", "web", "--image=nginx:1")
    run(*kubectl, "rollout", "status", "deploy/web", "--timeout=15s")
    run(*kubectl, "scale", "deploy/web", "--replicas=2")  # a new generation, not a new revision
    for image in ("nginx:2", "nginx:3"):
        run(*kubectl, "set", "image", "deploy/web", f"nginx={image}")
        run(*kubectl, "rollout", "status", "deploy/web", "--timeout=15s")
    history = run(*kubectl, "rollout", "history", "deploy/web").stdout.split()
    assert history[-6:] == ["1", "<none>", "2", "<none>", "3", "<none>"]
    assert "nginx:2" in run(*kubectl, "rollout", "history", "deploy/web", "--revision=2").stdout
    undo = run(*kubectl, "rollout", "undo", "deploy/web", "--to-revision=1")
    assert "Warning" not in undo.stderr
    run(*kubectl, "rollout", "status", "deploy/web", "--timeout=15s")
    assert _replicasets(run, namespace) == {"nginx:1": ("4", 2), "nginx:2": ("2", 0), "nginx:3": ("3", 0)}
    history = run(*kubectl, "rollout", "history", "deploy/web").stdout.split()  # revision 1 became 4
    assert history[-6:] == ["2", "<none>", "3", "<none>", "4", "<none>"] and "1" not in history
    deploy = _json(run, *kubectl[1:], "get", "deploy", "web")
    assert deploy["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "4"
    run(*kubectl, "rollout", "pause", "deploy/web")
    run(*kubectl, "set", "image", "deploy/web", "nginx=nginx:4")

    def paused_at_the_new_generation() -> dict[str, Any] | None:
        deploy = _json(run, *kubectl[1:], "get", "deploy", "web")
        if deploy["status"].get("observedGeneration") != deploy["metadata"]["generation"]:
            return None  # the controller has not looked at the new image yet
        return next((c for c in deploy["status"]["conditions"]
                     if c["type"] == "Progressing" and c["reason"] == "DeploymentPaused"), None)

    progressing = eventually(paused_at_the_new_generation)
    assert progressing["status"] == "Unknown"
    assert "nginx:4" not in _replicasets(run, namespace)  # it saw the new template, and made no ReplicaSet
    run(*kubectl, "rollout", "resume", "deploy/web")
    run(*kubectl, "rollout", "status", "deploy/web", "--timeout=15s")
    assert _replicasets(run, namespace)["nginx:4"] == ("5", 2)


def test_every_namespace_has_the_root_ca(run: Run, namespace: str, sandbox: Sandbox) -> None:
    cm = eventually(lambda: run("kubectl", "-n", namespace, "get", "configmap", "kube-root-ca.crt", "-o", "json",
                            check=False).stdout)
    assert json.loads(cm)["data"]["ca.crt"] == sandbox.ca_file.read_text()
    run("kubectl", "-n", namespace, "delete", "configmap", "kube-root-ca.crt")
    eventually(lambda: run("kubectl", "-n", namespace, "get", "configmap", "kube-root-ca.crt", check=False)
           .returncode == 0)


STATEFULSET = """apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 2
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: c, image: "postgres:16"}]}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
"""


def test_statefulsets_run_ordinal_pods_with_their_claims(run: Run, namespace: str) -> None:
    run("kubectl", "-n", namespace, "apply", "-f", "-", stdin=STATEFULSET)
    run("kubectl", "-n", namespace, "rollout", "status", "sts/db", "--timeout=15s")
    pods = eventually(lambda: (p := _json(run, "-n", namespace, "get", "pods", "-l", "app=db")["items"])
                  and len(p) == 2 and p)
    assert sorted(p["metadata"]["name"] for p in pods) == ["db-0", "db-1"]
    for pod in pods:
        name = pod["metadata"]["name"]
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "StatefulSet"
        assert {"name": "data", "persistentVolumeClaim": {"claimName": f"data-{name}"}} in pod["spec"]["volumes"]
        assert pod["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"] == name
    claims = _json(run, "-n", namespace, "get", "pvc")["items"]
    assert sorted(c["metadata"]["name"] for c in claims) == ["data-db-0", "data-db-1"]
    first = {p["metadata"]["name"]: p["metadata"]["labels"]["controller-revision-hash"] for p in pods}
    run("kubectl", "-n", namespace, "set", "image", "sts/db", "c=postgres:17")  # a new revision: pods replaced
    eventually(lambda: all(p["metadata"]["labels"]["controller-revision-hash"] != first["db-0"] and
                       p["spec"]["containers"][0]["image"] == "postgres:17"
                       for p in _json(run, "-n", namespace, "get", "pods", "-l", "app=db")["items"]))
    run("kubectl", "-n", namespace, "scale", "sts/db", "--replicas=1")
    eventually(lambda: [p["metadata"]["name"] for p in _json(run, "-n", namespace, "get", "pods", "-l", "app=db")
                    ["items"]] == ["db-0"])
    run("kubectl", "-n", namespace, "delete", "sts", "db")
    eventually(lambda: not _json(run, "-n", namespace, "get", "pods", "-l", "app=db")["items"])
    assert len(_json(run, "-n", namespace, "get", "pvc")["items"]) == 2  # claims outlive their pods, as upstream


def _claim(name: str, volume: str = "") -> str:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}}
    if volume:
        spec["volumeName"] = volume
    return json.dumps({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
                       "spec": spec})


def test_claims_get_volumes_of_the_default_class_and_give_them_back(run: Run, namespace: str) -> None:
    """kind's local-path: a volume per claim, bound both ways; deleted with the claim (Delete), or kept
    Released (Retain) and bound again to a claim that names it."""
    classes = run("kubectl", "get", "storageclass").stdout
    assert "standard (default)" in classes and "rancher.io/local-path" in classes and "Delete" in classes
    kubectl = ("kubectl", "-n", namespace)
    run(*kubectl, "apply", "-f", "-", stdin=_claim("data"))
    claim = eventually(lambda: (c := _json(run, *kubectl[1:], "get", "pvc", "data"))["status"].get("phase") == "Bound"
                   and c)
    volume = _json(run, "get", "pv", claim["spec"]["volumeName"])
    assert volume["metadata"]["name"] == f"pvc-{claim['metadata']['uid']}"
    assert (volume["spec"]["claimRef"]["name"], volume["spec"]["claimRef"]["uid"]) == ("data", claim["metadata"]["uid"])
    assert (volume["spec"]["storageClassName"], volume["spec"]["capacity"]["storage"]) == ("standard", "2Gi")
    assert volume["status"]["phase"] == "Bound" and claim["status"]["capacity"]["storage"] == "2Gi"
    run(*kubectl, "delete", "pvc", "data")
    eventually(lambda: run("kubectl", "get", "pv", volume["metadata"]["name"], check=False).returncode != 0)

    run(*kubectl, "apply", "-f", "-", stdin=_claim("kept"))
    name = eventually(lambda: _json(run, *kubectl[1:], "get", "pvc", "kept")["spec"].get("volumeName"))
    run("kubectl", "patch", "pv", name, "-p", '{"spec": {"persistentVolumeReclaimPolicy": "Retain"}}')
    run(*kubectl, "delete", "pvc", "kept")
    eventually(lambda: _json(run, "get", "pv", name)["status"].get("phase") == "Released")
    # re-attached: the claimRef cleared (as an administrator does), a new claim naming the volume
    run("kubectl", "patch", "pv", name, "--type=json", "-p", '[{"op": "remove", "path": "/spec/claimRef"}]')
    run(*kubectl, "apply", "-f", "-", stdin=_claim("again", volume=name))
    eventually(lambda: _json(run, *kubectl[1:], "get", "pvc", "again")["status"].get("phase") == "Bound")
    assert _json(run, "get", "pv", name)["spec"]["claimRef"]["name"] == "again"


def test_rollout_history_shows_the_change_cause_and_undo_brings_it_back(run: Run, namespace: str) -> None:
    """The Deployment's annotations are copied onto the ReplicaSet of its template (not the revision ones, and
    a ReplicaSet has no revisionHistoryLimit: patching one warns of nothing)."""
    kubectl = ("kubectl", "-n", namespace)
    run(*kubectl, "create", "deployment", "cause", "--image=nginx:1")
    run(*kubectl, "annotate", "deploy/cause", "kubernetes.io/change-cause=first")
    run(*kubectl, "rollout", "status", "deploy/cause", "--timeout=15s")
    run(*kubectl, "set", "image", "deploy/cause", "nginx=nginx:2")
    run(*kubectl, "annotate", "deploy/cause", "kubernetes.io/change-cause=second", "--overwrite")
    run(*kubectl, "rollout", "status", "deploy/cause", "--timeout=15s")
    eventually(lambda: "second" in run(*kubectl, "rollout", "history", "deploy/cause").stdout)
    history = run(*kubectl, "rollout", "history", "deploy/cause").stdout.split()
    assert history[-4:] == ["1", "first", "2", "second"]
    for rs in _json(run, "-n", namespace, "get", "rs")["items"]:
        patched = run(*kubectl, "patch", "rs", rs["metadata"]["name"], "--type=merge", "-p",
                      '{"metadata":{"labels":{"seen":"yes"}}}')
        assert "Warning" not in patched.stderr, patched.stderr
        assert "revisionHistoryLimit" not in rs["spec"]
    run(*kubectl, "rollout", "undo", "deploy/cause", "--to-revision=1")
    run(*kubectl, "rollout", "status", "deploy/cause", "--timeout=15s")
    deploy = _json(run, "-n", namespace, "get", "deploy", "cause")
    assert deploy["metadata"]["annotations"]["kubernetes.io/change-cause"] == "first"
    assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1"


def test_a_foreground_deletion_waits_for_a_replicaset_its_finalizer_holds(run: Run, namespace: str) -> None:
    """The Deployment stays, with deletionTimestamp and the foregroundDeletion finalizer (its status still
    observing its generation), while its ReplicaSet is held; then both go, and a watcher sees it deleted."""
    kubectl = ("kubectl", "-n", namespace)
    run(*kubectl, "create", "deployment", "held", "--image=nginx:1")
    run(*kubectl, "rollout", "status", "deploy/held", "--timeout=15s")
    rs = _json(run, "-n", namespace, "get", "rs", "-l", "app=held")["items"][0]["metadata"]["name"]
    run(*kubectl, "patch", "rs", rs, "--type=merge", "-p", '{"metadata":{"finalizers":["example.com/hold"]}}')
    run(*kubectl, "delete", "deploy", "held", "--cascade=foreground", "--wait=false")
    eventually(lambda: _json(run, "-n", namespace, "get", "rs", rs)["metadata"].get("deletionTimestamp"))
    deploy = eventually(lambda: (d := _json(run, "-n", namespace, "get", "deploy", "held"))
                        and d["status"].get("observedGeneration") == d["metadata"]["generation"] and d)
    assert deploy["metadata"]["deletionTimestamp"] and deploy["metadata"]["finalizers"] == ["foregroundDeletion"]
    with ThreadPoolExecutor(1) as pool:  # a watcher from before the finalizer goes
        watcher = pool.submit(run, *kubectl, "wait", "--for=delete", "deploy/held", "--timeout=30s")
        eventually(lambda: watcher.running())
        run(*kubectl, "patch", "rs", rs, "--type=json", "-p", '[{"op":"remove","path":"/metadata/finalizers"}]')
        assert watcher.result(40).returncode == 0
    assert run(*kubectl, "get", "deploy,rs", "-o", "name").stdout.strip() == ""
