"""RBAC rule matching (the sandbox's authorizer) on the paths the integration tests touch least."""

from __future__ import annotations

from helmop_sandbox.rbac import Attributes, rule_allows


def test_non_resource_urls_exact_and_prefix() -> None:
    rule = {"nonResourceURLs": ["/healthz", "/metrics/*"], "verbs": ["get"]}
    assert rule_allows(rule, Attributes("get", path="/healthz"))
    assert rule_allows(rule, Attributes("get", path="/metrics/cadvisor"))
    assert not rule_allows(rule, Attributes("post", path="/healthz"))
    assert not rule_allows(rule, Attributes("get", path="/livez"))
    assert not rule_allows(rule, Attributes("get", "", "pods", path=""))  # a resource request


def test_subresources_names_and_wildcards() -> None:
    status = {"apiGroups": ["helmop.dev"], "resources": ["helmreleases/status"], "verbs": ["patch"]}
    assert rule_allows(status, Attributes("patch", "helmop.dev", "helmreleases", "status", "ns", "x"))
    assert not rule_allows(status, Attributes("patch", "helmop.dev", "helmreleases", "", "ns", "x"))
    named = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["one"]}
    assert rule_allows(named, Attributes("get", "", "secrets", "", "ns", "one"))
    assert not rule_allows(named, Attributes("get", "", "secrets", "", "ns", "two"))
    assert not rule_allows(named, Attributes("list", "", "secrets", "", "ns", ""))
    anything = {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}
    assert rule_allows(anything, Attributes("delete", "apps", "deployments", "", "ns", "x"))
    every_status = {"apiGroups": ["apps"], "resources": ["*/status"], "verbs": ["get"]}
    assert rule_allows(every_status, Attributes("get", "apps", "deployments", "status", "ns", "x"))
