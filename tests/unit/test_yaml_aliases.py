"""A YAML alias is a value of its own, as Go's YAML decodes it: changing what one alias yielded changes
nothing else. Each reader of YAML in helmop is asserted on its own (values and valuesFrom, release
manifests, ConfigSync files in and out of the worker process, the post-renderer's input and output, a chart's
metadata from git); a chart with aliases through the operator: tests/controllers/test_lifecycle.py."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from helmop.api import yamlc
from helmop.api.manifests import parse
from helmop.helm.inputs import _chart_metadata
from helmop.helm.postrender import render
from helmop.helm.storage import manifest_objects
from helmop.helm.values import parse_values
from helmop.infra.worker import Worker

ALIASED = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: cfg
  labels: &labels {app: x}
  annotations: *labels
data:
  base: &base {a: "1"}
  merged:
    <<: *base
    b: "2"
"""


def _independent(obj: dict[str, Any]) -> None:
    meta = obj["metadata"]
    assert meta["labels"] == meta["annotations"] == {"app": "x"}
    meta["labels"]["added"] = "by helm"
    assert meta["annotations"] == {"app": "x"}, "the alias shared its anchor's value"


def test_load_load_all_and_documents_give_each_alias_its_own_value() -> None:
    _independent(yamlc.load(ALIASED))
    _independent(yamlc.load_all(ALIASED + "---\n" + ALIASED)[1])
    (_, data), = yamlc.documents(ALIASED)
    _independent(data)


def test_nested_and_listed_aliases_are_copied_at_every_depth() -> None:
    doc = yamlc.load("a: &a {inner: &i [1, {x: 1}]}\nb: *a\nc: [*i, *i]\n")
    doc["b"]["inner"][1]["x"] = 2
    doc["c"][0].append(3)
    assert doc["a"] == {"inner": [1, {"x": 1}]} and doc["c"][1] == [1, {"x": 1}]


def test_merge_keys_yield_their_own_values() -> None:
    doc = yamlc.load("base: &base {nested: {x: 1}}\nmine:\n  <<: *base\n  y: 2\n")
    doc["mine"]["nested"]["x"] = 99
    assert doc["base"] == {"nested": {"x": 1}}


def test_deeply_nested_shared_values_are_copied_without_recursion() -> None:
    depth = 900  # libyaml's own limit is 1000 levels; unsharing is iterative
    text = "a: &a " + "[" * depth + "]" * depth + "\nb: *a\n"
    doc = yamlc.load(text)
    assert doc["a"] == doc["b"] and doc["a"] is not doc["b"]


def test_values_and_values_from_read_aliases_as_copies() -> None:
    values = parse_values("common: &c {tag: v1}\nweb: {image: *c}\napi: {image: *c}\n", "values")
    values["web"]["image"]["tag"] = "v2"
    assert values["api"]["image"] == {"tag": "v1"} and values["common"] == {"tag": "v1"}


def test_release_manifest_objects_do_not_share_maps() -> None:
    (obj,) = manifest_objects({"manifest": ALIASED})
    _independent(obj)


def test_config_sync_files_read_aliases_as_copies() -> None:
    (manifest,), errors = parse({"app/cm.yaml": ALIASED.encode()})
    assert not errors
    _independent(manifest.obj)


async def test_the_yaml_worker_reads_aliases_as_copies() -> None:
    worker = Worker(timeout=10)
    try:
        ((_, data),) = await worker.documents(ALIASED)
    finally:
        await worker.close()
    _independent(data)


@pytest.mark.parametrize("patch", [{}, {"labels": {"team": "t"}}])
def test_post_renderer_reads_and_writes_aliases_as_copies(patch: dict[str, Any]) -> None:
    out = yaml.safe_load(render(ALIASED, patch))
    assert out["metadata"]["annotations"] == {"app": "x"}
    assert out["metadata"]["labels"] == {"app": "x", **patch.get("labels", {})}
    assert "&" not in render(ALIASED, patch), "the output names no anchor: what helm reads is plain"


def test_chart_metadata_reads_aliases_as_copies() -> None:
    chart = b"apiVersion: v2\nname: web\nversion: 1.0.0\nmaintainers: [&me {name: a}, *me]\n"
    meta, _ = _chart_metadata({"Chart.yaml": chart}, "charts/web")
    meta["maintainers"][0]["name"] = "b"
    assert meta["maintainers"][1] == {"name": "a"}
