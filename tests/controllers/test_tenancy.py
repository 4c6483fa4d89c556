"""Tenant isolation with the operator as it runs by default (its own, broad rights): a ConfigSync with
no ServiceAccount writes only namespaced objects into its own namespace, never takes over or prunes
what is not its own, and secret values are masked in every form a chart can echo them. (Locked
down: test_lockdown.py.) Every attack here worked before this was built. Driven by turns
(:mod:`tests.controllers.turns`: the operator's dispatcher and services with its test settings, no kopf, no
scheduler); the metrics are the services' own, served by the operator's metrics app."""

from __future__ import annotations

import base64
import json
import logging
import uuid
from typing import Any

import pytest
import requests
import yaml
from helmop_sandbox import Sandbox

from helmop.infra.serving import serve
from tests.chartrepo import ChartRepo
from tests.conftest import _runner
from tests.controllers.conftest import condition, get
from tests.controllers.tenants import CLUSTER_ADMIN_GRAB, stalled, sync
from tests.controllers.turns import Turns
from tests.gitserver import Repo
from tests.tools import Run


@pytest.fixture(scope="module")
def kube(turns_sandbox: Sandbox) -> Run:
    """kubectl and helm as the tests' user (conftest's ``ns`` makes its namespaces with it)."""
    return _runner(turns_sandbox)


def resync(turns: Turns, ns: str, name: str) -> dict[str, Any]:
    """A turn of the source, then of the ConfigSync ``name`` (what `helmop reconcile --with-source` asks for); the
    ConfigSync after it."""
    turns.turn("GitRepository", ns, "config")
    return turns.turn("ConfigSync", ns, name)


# --- the default operator: a ConfigSync with no ServiceAccount stays in its namespace ----------------


def test_no_escalation_through_cluster_scoped_objects(turns: Turns, kube: Run, ns: str, repo: Repo) -> None:
    repo.commit({"apps/grab.yaml": CLUSTER_ADMIN_GRAB.replace("NS", ns),
                 "apps/note.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: note}\ndata: {a: b}\n"})
    sync(kube, ns, repo)
    message = stalled(turns, kube, ns, "ConfigSync/apps", "ClusterScopedObject")
    assert "apps/grab.yaml:1: ClusterRoleBinding/grab-" in message and "nothing applied" in message
    assert kube("kubectl", "get", "clusterrolebinding", f"grab-{ns}", check=False).returncode != 0
    assert not get(kube, ns, "cm", "note")  # nothing at all was applied


def test_no_reaching_into_other_namespaces(turns: Turns, kube: Run, ns: str, repo: Repo,
                                          chart_repo: ChartRepo) -> None:
    base = f"base-{uuid.uuid4().hex[:5]}"
    kube("kubectl", "create", "namespace", base)
    web = {"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease", "metadata": {"name": "web", "namespace": base},
           "spec": {"suspend": True, "chart": {"repository": {"url": chart_repo.url, "name": "demo"}},
                    "values": {"replicaCount": 2}}}
    kube("kubectl", "apply", "-f", "-", stdin=yaml.safe_dump(web))
    web["spec"]["values"] = {"replicaCount": 7}
    planted = {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": f"planted-{ns}", "namespace": "kube-system"}}
    repo.commit({"apps/web.yaml": yaml.safe_dump(web), "apps/planted.yaml": yaml.safe_dump(planted)})
    sync(kube, ns, repo)
    message = stalled(turns, kube, ns, "ConfigSync/apps", "ObjectOutsideNamespace")
    assert f"HelmRelease/{base}/web is in namespace '{base}'" in message and "kube-system" in message
    assert get(kube, base, "hr", "web")["spec"]["values"] == {"replicaCount": 2}
    assert "helmop.dev/configsync" not in (get(kube, base, "hr", "web")["metadata"].get("labels") or {})
    assert not get(kube, "kube-system", "cm", f"planted-{ns}")
    # Deleting the ConfigSync deletes nothing that is not its own: its clean-up turn lets it go.
    kube("kubectl", "-n", ns, "delete", "csync", "apps", "--wait=false")
    assert not turns.turn("ConfigSync", ns, "apps")
    assert get(kube, base, "hr", "web")


def test_no_takeover_and_no_pruning_of_foreign_objects(turns: Turns, kube: Run, ns: str, repo: Repo) -> None:
    kube("kubectl", "-n", ns, "create", "configmap", "taken", "--from-literal=owner=someone")
    repo.commit({"apps/taken.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: taken}\ndata: {owner: git}\n",
                 "apps/mine.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: mine}\ndata: {a: b}\n"})
    sync(kube, ns, repo)
    message = stalled(turns, kube, ns, "ConfigSync/apps", "ObjectOwnedElsewhere")
    assert "apps/taken.yaml:1: ConfigMap/" in message and "helmop.dev/adopt" in message
    assert get(kube, ns, "cm", "taken")["data"] == {"owner": "someone"} and not get(kube, ns, "cm", "mine")

    # The owner agrees to hand it over: adopted, applied.
    kube("kubectl", "-n", ns, "annotate", "cm", "taken", "helmop.dev/adopt=true")
    assert condition(resync(turns, ns, "apps")).get("status") == "True"
    assert get(kube, ns, "cm", "taken")["data"] == {"owner": "git"} and get(kube, ns, "cm", "mine")

    # A second ConfigSync claiming the same object is refused.
    sync(kube, ns, repo, name="rival")
    assert "managed by another ConfigSync" in stalled(turns, kube, ns, "ConfigSync/rival", "ObjectOwnedElsewhere")
    kube("kubectl", "-n", ns, "delete", "csync", "rival", "--wait=false")
    assert not turns.turn("ConfigSync", ns, "rival")  # its clean-up turn let it go
    assert get(kube, ns, "cm", "taken")  # the rival deleted nothing

    # `mine` is replaced by someone else's object carrying copied marks; when git drops it, it stays.
    marks = get(kube, ns, "cm", "mine")["metadata"]
    kube("kubectl", "-n", ns, "delete", "cm", "mine")
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump(
        {"apiVersion": "v1", "kind": "ConfigMap", "data": {"owner": "impostor"},
         "metadata": {"name": "mine", "labels": marks["labels"], "annotations": marks["annotations"]}}))
    repo.commit({"apps/mine.yaml": None})
    synced = resync(turns, ns, "apps")
    assert all(i["name"] != "mine" for i in synced["status"]["inventory"]), synced["status"]
    assert get(kube, ns, "cm", "mine")["data"] == {"owner": "impostor"}


def test_secret_values_are_masked_in_every_form(turns: Turns, kube: Run, ns: str, chart_repo: ChartRepo,
                                                caplog: pytest.LogCaptureFixture) -> None:
    secret = "S3cr3tValueXYZ42"
    chart = f"leaky-{ns}"
    chart_repo.publish(chart, "0.1.0", templates={"leak.yaml": (
        '{{ fail (printf "upper=%s b64=%s b64url=%s trunc=%s quoted=%s" (upper .Values.password) '
        '(b64enc .Values.password) (.Values.password | b64enc | replace "=" "") (trunc 10 .Values.password) '
        '(toJson .Values.password)) }}')})
    kube("kubectl", "-n", ns, "create", "secret", "generic", "db", f"--from-literal=password={secret}")
    kube("kubectl", "-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump(
        {"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease", "metadata": {"name": "leaky"},
         "spec": {"interval": "1h", "chart": {"repository": {"url": chart_repo.url, "name": chart}},
                  "valuesFrom": [{"kind": "Secret", "name": "db", "valuesKey": "password",
                                  "targetPath": "password"}]}}))
    with caplog.at_level(logging.DEBUG):  # the turns' thread logs to the same handlers
        obj = turns.settle(ns, "HelmRelease/leaky")
    assert condition(obj).get("reason") == "RenderFailed", condition(obj)
    events = json.dumps([e for e in get(kube, ns, "events")["items"] if e["involvedObject"]["name"] == "leaky"])
    served = turns.run(serve(turns.services.metrics.app(lambda: ""), "127.0.0.1", 0))  # the operator's /metrics
    try:
        metrics = requests.get(f"http://127.0.0.1:{served.port}/metrics", timeout=10).text
    finally:
        turns.run(served.stop())
    logs = caplog.text
    assert "upper=***" in condition(obj)["message"]
    forms = [secret, secret.upper(), secret.lower(), base64.b64encode(secret.encode()).decode(),
             base64.b64encode(secret.encode()).decode().rstrip("="), secret[:10], json.dumps(secret)]
    for where, text in (("status", json.dumps(obj["status"])), ("events", events), ("logs", logs),
                        ("metrics", metrics)):
        for form in forms:
            assert form not in text, (where, form)
