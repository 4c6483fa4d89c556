"""Drift as differences between a server-side-apply dry run and the live object (pure)."""

from __future__ import annotations

from helmop.api.selectors import parse_selector
from helmop.decisions.drift import differences, excluded, ignored_paths, owned_by_others


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
    rules = ((("/spec/replicas",), parse_selector({"kind": "Deploy.*", "group": "apps", "labelSelector": "tier=web",
                                                  "annotationSelector": "team notin (ops)"}, "t")),
             (("/metadata/labels",), parse_selector(None, "t")))
    web = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a", "labels": {"tier": "web"}}}
    db = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "b", "labels": {"tier": "db"}}}
    ops = {**web, "metadata": {**web["metadata"], "annotations": {"team": "ops"}}}
    beta = {**web, "apiVersion": "apps.example/v1"}  # group is matched whole, not as a prefix
    assert ignored_paths(rules, web) == ("/spec/replicas", "/metadata/labels")
    assert ignored_paths(rules, db) == ignored_paths(rules, ops) == ignored_paths(rules, beta) == ("/metadata/labels",)


def test_objects_opt_out_of_drift_detection_by_label_or_annotation() -> None:
    assert excluded({"metadata": {"annotations": {"helm.toolkit.fluxcd.io/driftDetection": "Disabled"}}})
    assert excluded({"metadata": {"labels": {"helm.toolkit.fluxcd.io/driftDetection": "disabled"}}})
    assert not excluded({"metadata": {"labels": {"helm.toolkit.fluxcd.io/driftDetection": "enabled"}}})
