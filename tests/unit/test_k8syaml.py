"""helmop reads YAML as Kubernetes does: each case goes through helmop's loader and through kubectl (Go's
sigs.k8s.io/yaml, as helm and the API server read it), and both must give the same JSON, or both refuse."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from helmop.api import yamlc
from tests.tools import Run

SCALARS = ["=", "yes", "y", "Y", "n", "N", "on", "Off", "NO", "true", "TRUE", "tRUE", "~", "null", "", "2024-01-02",
           "2001-12-14t21:59:43.10-05:00", "2002-12-14", "12:30:45", "1:20", "0777", "0o17", "0x1F", "0b101", "09",
           "012.5", "1e3", "-1.5E-2", ".5", "1_000", "+12", "-0", "1.0", "12345678901234567890",
           "123456789012345678901234567890", "-9223372036854775808", "!!binary aGVsbG8=", "'0777'", "!!str 12",
           ".inf", "-.Inf", ".nan", "1.2.3", "0x", "--", "+", ".", "0.", "1e", "!!int 0x10", "!!float 1"]
DOCUMENTS = ["a: 1\na: 2\n", "y: 1\n", "1: a\n", "true: x\nnull: y\n", "? [a]\n: b\n",
             "base: &b {x: 1, y: 2}\nmine: {<<: *b, y: 3}\nlist: [*b, *b]\n",
             "m:\n  <<: [{a: 1}, {a: 2, b: 2}]\n  c: 3\n", "s: |\n  line\n  next\n", "f: >-\n  folded\n  text\n",
             "q: \"\\u00e9\\t\"\n", "k: [1, [2, [3]]]\n", "e: {}\n", "x: !!binary |\n  aGVs\n  bG8=\n"]


def _kubectl(run: Run, data: str) -> tuple[bool, Any]:
    """(parsed, the `data` kubectl made of it) for a ConfigMap whose data block is ``data``."""
    doc = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n" + "".join(f"  {line}\n" for line in
                                                                                data.splitlines())
    done = run("kubectl", "create", "--dry-run=client", "--validate=false", "-o", "json", "-f", "-", stdin=doc,
               check=False)
    return (done.returncode == 0, json.loads(done.stdout).get("data") if done.returncode == 0 else done.stderr)


def _helmop(data: str) -> tuple[bool, Any]:
    try:
        return True, yamlc.load("data:\n" + "".join(f"  {line}\n" for line in data.splitlines()))["data"]
    except yaml.YAMLError as exc:
        return False, str(exc)


def _same(ours: Any, theirs: Any) -> bool:
    """JSON equality; numbers past 2**53 compare as the float64 kubectl's own decoding makes of them."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        return ours.keys() == theirs.keys() and all(_same(ours[k], theirs[k]) for k in ours)
    if isinstance(ours, list) and isinstance(theirs, list):
        return len(ours) == len(theirs) and all(map(_same, ours, theirs))
    if isinstance(ours, int | float) and isinstance(theirs, int | float) and not isinstance(ours, bool):
        return float(ours) == float(theirs) and type(theirs) is not bool
    return type(ours) is type(theirs) and bool(ours == theirs)


@pytest.mark.parametrize("data", [f"v: {s}" for s in SCALARS] + DOCUMENTS)
def test_helmop_reads_yaml_as_kubectl_does(run: Run, data: str) -> None:
    (theirs_ok, theirs), (ours_ok, ours) = _kubectl(run, data), _helmop(data)
    assert ours_ok == theirs_ok, (data, ours, theirs)
    if ours_ok:
        assert _same(ours, theirs), (data, ours, theirs)
        assert json.loads(json.dumps(ours)) == ours  # plain JSON data: no dates, bytes or tuples


@pytest.mark.parametrize("text", ["a: 1\n", '{"a": [1, 2.5, "x", null, true]}', "- 1\n- y\n"])
def test_json_and_yaml_read_the_same(text: str) -> None:
    assert yamlc.load(text) == yamlc.load_all(text)[0]
