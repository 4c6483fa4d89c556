"""Journey: a project starts (one Project: its namespace, its people, its quota, its Jenkins), the team
works in it, and when it ends all of it goes in order, the Jenkins volume kept for later."""

from __future__ import annotations

import json
import uuid

import yaml

from e2e.conftest import Operator, Run, until


def test_a_project_starts_works_and_ends(operator: Operator, run: Run) -> None:
    name = f"proj-{uuid.uuid4().hex[:6]}"
    project = {"apiVersion": "helmop.dev/v1alpha1", "kind": "Project", "metadata": {"name": name},
               "spec": {"members": [{"kind": "User", "name": "alice", "role": "edit"}],
                        "quota": {"pods": "20"}, "isolation": {"enabled": True},
                        "jenkins": {"plugins": ["ansicolor:1.0.6"]}}}
    run("kubectl", "apply", "-f", "-", stdin=yaml.safe_dump(project))
    until(run, "kubectl", "wait", "--for=condition=Ready", f"project/{name}", "--timeout=5s", timeout=300)
    status = json.loads(run("kubectl", "get", "proj", name, "-o", "json").stdout)["status"]
    assert status["namespace"] == name and status["jenkinsUrl"]

    # the team works: alice deploys in the project namespace, and nowhere else
    can = run("kubectl", "auth", "can-i", "create", "deployments", "-n", name, "--as", "alice", check=False)
    assert can.stdout.strip() == "yes"
    cannot = run("kubectl", "auth", "can-i", "get", "secrets", "-n", "default", "--as", "alice", check=False)
    assert cannot.stdout.strip() == "no"
    run("kubectl", "-n", name, "create", "deployment", "work", "--image=nginx:1", "--as", "alice")

    claims = json.loads(run("kubectl", "-n", name, "get", "pvc", "-o", "json").stdout)["items"]
    volumes = [c["spec"]["volumeName"] for c in claims if c["spec"].get("volumeName")]
    run("kubectl", "delete", "project", name, "--timeout=300s", timeout=330)
    assert run("kubectl", "get", "namespace", name, check=False).returncode != 0
    for volume in volumes:  # the Jenkins data outlives the project
        kept = json.loads(run("kubectl", "get", "pv", volume, "-o", "json").stdout)
        assert kept["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
