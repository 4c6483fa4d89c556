"""Drift as differences between a server-side-apply dry run and the live object (pure)."""

from __future__ import annotations

from helmop.reconcile.drift import differences, ignored_paths, owned_by_others


def test_differences_ignore_bookkeeping_rules_and_foreign_appliers() -> None:
    wanted = {"metadata": {"name": "web", "resourceVersion": "1", "labels": {"a": "b"}},
              "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "x:1"}]}}},
              "status": {"ready": 1}}
    live = {"metadata": {"name": "web", "resourceVersion": "7", "labels": {"a": "b"}},
            "spec": {"replicas": 9, "template": {"spec": {"containers": [{"name": "c", "image": "x:2"}]}}},
            "status": {"ready": 0}}
    assert differences(wanted, live) == ["/spec/replicas", "/spec/template/spec/containers/0/image"]
    assert differences(wanted, live, ignore=("/spec/template",)) == ["/spec/replicas"]
    managed = [{"manager": "hpa", "operation": "Apply", "fieldsV1": {"f:spec": {"f:replicas": {}}}},
               {"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {"f:template": {}}}},
               {"manager": "helm", "operation": "Apply", "fieldsV1": {"f:metadata": {"f:labels": {}}}}]
    assert owned_by_others(managed, ("helm", "helmop-drift")) == {"/spec/replicas"}
    assert differences(wanted, live, foreign={"/spec/replicas"}) == ["/spec/template/spec/containers/0/image"]


def test_ignore_rules_select_their_targets() -> None:
    rules = ((("/spec/replicas",), {"kind": "Deployment", "labelSelector": "tier=web"}),)
    web = {"kind": "Deployment", "metadata": {"name": "a", "labels": {"tier": "web"}}}
    db = {"kind": "Deployment", "metadata": {"name": "b", "labels": {"tier": "db"}}}
    assert ignored_paths(rules, web) == ("/spec/replicas",) and ignored_paths(rules, db) == ()
