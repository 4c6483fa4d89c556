"""helmop's post-renderer: common metadata, strategic-merge and JSON6902 patches, target selection."""

from __future__ import annotations

import pytest
import yaml

from helmop.api.errors import SpecError
from helmop.api.helmrelease import parse_spec
from helmop.helm.postrender import render

DEPLOY = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"app": "web"}},
          "spec": {"replicas": 1, "template": {"spec": {"containers": [
              {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}]},
              {"name": "sidecar", "image": "side:1"}]}}}}
CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "b"}}


def test_strategic_merge_json6902_and_targets() -> None:
    config = {"labels": {"team": "x"}, "patches": [
        {"target": {"kind": "Deployment", "group": "apps"}, "patch": yaml.safe_dump({"spec": {"template": {"spec": {
            "containers": [{"name": "app", "image": "app:2", "env": [{"name": "B", "value": "2"}]},
                           {"name": "sidecar", "$patch": "delete"}]}}}})},
        # (a bare y would be the boolean true, as in kubectl patch files)
        {"target": {"labelSelector": "app=web"}, "patch": "- {op: add, path: /metadata/annotations, value: {x: 'y'}}"},
        {"target": {"name": "nope"}, "patch": "{data: {never: applied}}"}]}
    deploy, cm = list(yaml.safe_load_all(render(yaml.safe_dump_all([DEPLOY, CM]), config)))
    containers = deploy["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["app"] and containers[0]["image"] == "app:2"
    assert containers[0]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert deploy["metadata"]["annotations"] == {"x": "y"} and deploy["metadata"]["labels"]["team"] == "x"
    assert cm == {**CM, "metadata": {"name": "cfg", "labels": {"team": "x"}}}


def test_bad_patches_are_refused_at_parse_time() -> None:
    base = {"chart": {"repository": {"url": "https://c.example.com", "name": "web"}}}
    with pytest.raises(SpecError) as bad:
        parse_spec({**base, "postRenderers": [{"kustomize": {"patches": [{"patch": "just text"}]}}]}, "w", "ns")
    assert bad.value.reason == "InvalidPostRenderer" and "patches[0]" in str(bad.value)


def test_a_strategic_merge_patch_without_a_target_patches_the_object_it_names() -> None:
    """As kustomize: by its own kind, name (and group and namespace where given), never every object."""
    other = {**CM, "metadata": {"name": "other"}}
    patch = {"patch": yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"},
                                      "data": {"a": "patched"}})}
    cm, untouched, deploy = yaml.safe_load_all(render(yaml.safe_dump_all([CM, other, DEPLOY]), {"patches": [patch]}))
    assert cm["data"] == {"a": "patched"} and untouched == other and deploy == DEPLOY
    elsewhere = {"patch": yaml.safe_dump({"kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "x"},
                                          "data": {"a": "patched"}})}
    assert yaml.safe_load(render(yaml.safe_dump(CM), {"patches": [elsewhere]})) == CM


def test_patches_without_a_target_must_say_what_they_patch() -> None:
    base = {"chart": {"repository": {"url": "https://c.example.com", "name": "web"}}}
    for patch, said in (("- {op: add, path: /a, value: 1}", "target is required for a JSON6902 patch"),
                        ("{data: {a: b}}", "names the object it patches: kind and metadata.name")):
        with pytest.raises(SpecError, match=said):
            parse_spec({**base, "postRenderers": [{"kustomize": {"patches": [{"patch": patch}]}}]}, "w", "ns")
