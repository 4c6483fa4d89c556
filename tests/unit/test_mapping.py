"""The pure pieces shared by the operator, `helmop render` and `helmop diff`: values composition, the
app -> HelmRelease mapping, the helm request, JCasC checks and offline schema validation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from helmop.api import jenkins, validation
from helmop.api.actions import Action
from helmop.api.apps import AppKind
from helmop.api.errors import SpecError
from helmop.api.helmrelease import ValuesReference, parse_spec
from helmop.api.kinds import Kind
from helmop.helm import values
from helmop.helm.apps import release_spec
from helmop.helm.engine import template_args, uninstall_args, upgrade_args
from helmop.helm.request import uninstall_request, upgrade_request


def test_compose_types_target_paths_like_set_and_merges_in_order() -> None:
    spec = parse_spec({"chart": {"repository": {"url": "https://c.example.com", "name": "web"}},
                       "values": {"b": {"y": 2}, "list": [3]}}, "web", "shop")
    pieces = [(ValuesReference("ConfigMap", "base"), "a: 1\nb: {x: 1}\nlist: [1, 2]\n"),
              (ValuesReference("Secret", "s", target_path="flags.on"), "true"),
              (ValuesReference("Secret", "s", target_path="flags.n"), "42"),
              (ValuesReference("Secret", "s", target_path="flags.id"), "007"),
              (ValuesReference("Secret", "s", target_path="items[1].name"), "x")]
    got = values.compose(pieces, spec.values, base={"a": 0, "z": 9})
    assert got == {"a": 1, "z": 9, "b": {"x": 1, "y": 2}, "list": [3],
                   "flags": {"on": True, "n": 42, "id": "007"}, "items": [None, {"name": "x"}]}
    with pytest.raises(ValueError, match=r"ConfigMap bad key values\.yaml must be a YAML map"):
        values.compose([(ValuesReference("ConfigMap", "bad"), "- a\n")], {})


def test_the_helm_request_carries_identity_labels_and_options() -> None:
    spec = parse_spec({"chart": {"repository": {"url": "https://c.example.com", "name": "web"}},
                       "serviceAccountName": "deployer", "maxHistory": 2, "install": {"disableHooks": True},
                       "upgrade": {"force": True, "timeout": "90s"}}, "web", "shop")
    install = upgrade_request(spec, "shop", "web", chart=Path("/c.tgz"), values={}, digest="sha256:ab",
                              action=Action.INSTALL)
    upgrade = upgrade_request(spec, "shop", "web", chart=Path("/c.tgz"), values={}, digest="sha256:ab",
                              action=Action.UPGRADE)
    assert install.impersonate == "system:serviceaccount:shop:deployer" and install.disable_hooks
    assert not install.force and upgrade.force and upgrade.timeout == 90 and install.timeout == 300
    assert install.labels["helmop.dev/config-digest"] == "ab"
    assert "--kube-as-user" in upgrade_args(install, 4) and "--no-hooks" in template_args(install)


def test_uninstall_deletion_propagation() -> None:
    def args(uninstall: dict[str, Any]) -> list[str]:
        spec = parse_spec({"chart": {"repository": {"url": "https://c.example.com", "name": "web"}},
                           "uninstall": uninstall}, "web", "shop")
        return uninstall_args(uninstall_request(spec, "system:serviceaccount:shop:deployer"))

    assert not [a for a in args({}) if a.startswith("--cascade")]  # helm's default, background
    assert "--cascade=foreground" in args({"deletionPropagation": "foreground", "keepHistory": True})
    assert "--keep-history" in args({"keepHistory": True})
    with pytest.raises(SpecError, match="deletionPropagation must be one of background, foreground, orphan"):
        args({"deletionPropagation": "later"})


def test_app_kinds_map_onto_a_helmrelease_spec() -> None:
    web = AppKind(Kind("Webapp", "demo.example.com", "v1", "webapps"),
                  {"repository": {"url": "https://x", "name": "w"}}, override_values={"service": {"type": "ClusterIP"}},
                  interval="5m")
    spec = release_spec(web, "shop", {"replicaCount": 2, "service": {"type": "NodePort", "port": 80}})
    assert spec["values"] == {"replicaCount": 2, "service": {"type": "ClusterIP", "port": 80}}
    assert (spec["releaseName"], spec["interval"], spec["chart"]) == ("shop", "5m", web.chart)
    ci = release_spec(jenkins.app_kind(jenkins.DEFAULT_CHART), "ci",
                      {"project": "p", "values": {"controller": {"numExecutors": 2}}, "interval": "1h"})
    assert ci["values"]["controller"]["numExecutors"] == 2 and ci["values"]["fullnameOverride"] == "ci"
    assert ci["interval"] == "1h" and ci["chart"] == jenkins.DEFAULT_CHART


@pytest.mark.parametrize(("snippet", "fragment"), [
    ("- jenkins: {}", "must be a YAML mapping"), ("jenkins: [", "is not valid YAML (line"),
    ("", "not empty"), ("just text", "not a str")])
def test_jcasc_snippets_must_be_mappings(snippet: str, fragment: str) -> None:
    with pytest.raises(SpecError) as err:
        jenkins.jenkins_values("ci", {"project": "p", "configAsCode": {"main": snippet}})
    assert err.value.reason == "InvalidConfigAsCode" and fragment in str(err.value)


def test_validation_is_strict_and_points_at_lines() -> None:
    text = b"""apiVersion: helmop.dev/v1alpha1
kind: List
items:
- apiVersion: helmop.dev/v1alpha1
  kind: GitRepository
  metadata: {name: config, namespace: team}
  spec:
    url: https://git.example.com/x.git
    ref: {branch: main, commit: nope}
    secretref: {name: creds}
"""
    assert validation.tree({"repo.yaml": text}) == [
        "repo.yaml:9: GitRepository team/config: spec.ref.commit: 'nope' does not match '^[0-9a-f]{40}$'",
        "repo.yaml:10: GitRepository team/config: spec.secretref: unknown field"]
    values_stay_free = b"""apiVersion: helmop.dev/v1alpha1
kind: HelmRelease
metadata: {name: web}
spec:
  chart: {repository: {url: "https://x", name: web}}
  values: {anything: {goes: [1, 2]}}
"""
    assert validation.tree({"a.yml": values_stay_free, "notes.txt": b"ignored"}) == []


def test_values_from_is_capped_before_it_is_parsed() -> None:
    from helmop.helm.inputs import MAX_VALUES_BYTES, InputError, compose_values

    spec = parse_spec({"chart": {"repository": {"url": "https://x", "name": "c"}}}, "r", "ns")
    piece = (ValuesReference("ConfigMap", "big"), "a: " + "x" * (MAX_VALUES_BYTES // 4) + "\n")
    assert compose_values([piece] * 3, spec)["a"].startswith("x")
    with pytest.raises(InputError) as too_large:
        compose_values([piece] * 5, spec)
    assert too_large.value.reason == "ValuesTooLarge" and "4 MiB" in str(too_large.value)
