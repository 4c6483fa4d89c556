"""Tenant set-ups and checks shared by the tenancy, lockdown and security tests."""

from __future__ import annotations

import shlex
import uuid
from typing import Any

import yaml

from tests.controllers.conftest import condition, get
from tests.controllers.turns import Turns, ready
from tests.docs import block
from tests.gitserver import Repo
from tests.tools import Run

CLUSTER_ADMIN_GRAB = """apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: grab-NS}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: ServiceAccount, name: default, namespace: NS}]
"""


def sync(kube: Run, ns: str, repo: Repo, name: str = "apps", **spec: Any) -> None:
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump_all([
        {"apiVersion": "helmop.dev/v1alpha1", "kind": "GitRepository", "metadata": {"name": "config"},
         "spec": {"url": repo.url, "interval": "1h", "ref": {"branch": "main"}}},
        {"apiVersion": "helmop.dev/v1alpha1", "kind": "ConfigSync", "metadata": {"name": name},
         "spec": {"sourceRef": {"name": "config"}, "path": "apps", "interval": "1h", **spec}}]))


def stalled(turns: Turns, kube: Run, ns: str, target: str, reason: str) -> str:
    """The message of ``target`` ("<kind key>/<name>") once turns have settled it: refused for good (Stalled), with
    ``reason`` in Ready and a Warning Event of it (posted by the turn that wrote the status)."""
    obj = turns.settle(ns, target)
    assert ready(obj).get("reason") == reason, ready(obj)
    assert condition(obj, "Stalled").get("status") == "True"
    name = target.rpartition("/")[2]
    events = [e for e in get(kube, ns, "events")["items"] if e["involvedObject"]["name"] == name]
    assert any(e["reason"] == reason and e["type"] == "Warning" for e in events), events
    return str(ready(obj)["message"])


def tenant(kube: Run) -> str:
    """A team namespace set up exactly as the multi-tenancy guide says."""
    loop = block("guides/multi-tenancy.md", "two-teams")
    assert loop.startswith("for team in alpha beta; do\n") and loop.rstrip().endswith("done")
    loop = loop[:loop.index("done")].replace("\\\n", " ")
    ns = f"team-{uuid.uuid4().hex[:5]}"
    for line in loop.splitlines()[1:]:
        args = shlex.split(line.replace("$team", ns))
        assert args[0] == "kubectl", line
        kube(*args)
    return ns
