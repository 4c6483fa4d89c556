"""Post-build variable substitution with Flux's rules, and the ConfigSync fields that ask for a build."""

from __future__ import annotations

import pytest

from helmop.api.errors import SpecError
from helmop.api.k8syaml import _dumped
from helmop.api.sources import parse_config_sync
from helmop.api.substitution import SubstitutionError, substitute, substituted, with_metadata

VARS = {"env": "prod", "region": "eu-central-1", "empty": "", "image": "registry.example.com/app"}


@pytest.mark.parametrize(("text", "expected"), [
    ("env: ${env}", "env: prod"),
    ("a: ${missing}", "a: "),  # unset: "" (not strict)
    ("a: ${missing:=dev}", "a: dev"),
    ("a: ${empty:=dev}", "a: dev"),  # := also when empty
    ("a: ${empty=dev}", "a: "),  # = only when unset
    ("a: ${missing=dev}", "a: dev"),
    ("a: ${empty:-x} ${missing-y}", "a: x y"),
    ("a: ${region:3}", "a: central-1"),
    ("a: ${region:0:2}", "a: eu"),
    ("a: ${region:-1}", "a: eu-central-1"),  # (":-" is a default, as in bash)
    ("a: ${region/-/_}", "a: eu_central-1"),
    ("a: ${region//-/_}", "a: eu_central_1"),
    ("script: echo $${HOME} $HOME ${env}", "script: echo ${HOME} $HOME prod"),  # escaped, $var untouched
])
def test_flux_variable_rules(text: str, expected: str) -> None:
    assert substitute(text, VARS) == expected


def test_strict_mode_fails_on_an_unset_variable_without_a_default() -> None:
    assert substitute("a: ${missing:=x}", VARS, strict=True) == "a: x"
    with pytest.raises(SubstitutionError, match="'missing' is not set"):
        substitute("a: ${missing}", VARS, strict=True)


def test_errors_never_quote_a_value() -> None:
    secret = {"token": "s3cr3t-value"}
    with pytest.raises(SubstitutionError) as bad:
        substitute("a: ${token^^}", secret)
    assert "s3cr3t" not in str(bad.value)
    # a value that breaks the YAML: the line is said, not the value
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "${token}"}}
    with pytest.raises(SubstitutionError) as broken:
        substituted(obj, {"token": "x\n  y: [s3cr3t-value"})
    assert "ConfigMap/c" in str(broken.value) and "s3cr3t" not in str(broken.value)


def test_objects_opt_out_and_common_metadata_wins() -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "${env}"},
           "metadata": {"name": "c", "labels": {"kustomize.toolkit.fluxcd.io/substitute": "disabled", "team": "a"}}}
    assert substituted(obj, VARS) is obj
    stamped = with_metadata(obj, {"team": "b", "env": "prod"}, {"note": "x"})
    assert stamped["metadata"]["labels"]["team"] == "b" and stamped["metadata"]["annotations"] == {"note": "x"}
    kept = substituted({**obj, "metadata": {"name": "c"}}, VARS)
    assert kept["data"] == {"a": "prod"}


def test_the_build_fields_are_parsed_and_checked() -> None:
    spec = parse_config_sync({"sourceRef": {"name": "config"}, "path": "apps/staging", "namePrefix": "stg-",
                              "targetNamespace": "staging", "components": ["../../components/tls"],
                              "images": [{"name": "web", "newTag": "2.0"}],
                              "patches": [{"patch": "- {op: add, path: /a, value: 1}",
                                           "target": {"kind": "Deployment"}}],
                              "postBuild": {"substitute": {"env": "stg"}, "substituteStrategy": "Always",
                                            "substituteFrom": [{"kind": "Secret", "name": "vars", "optional": True}]}})
    assert spec.build and spec.build.components == ("../../components/tls",) and spec.build.namespace == "staging"
    assert spec.post_build.always and spec.post_build.substitute_from[0].optional
    assert not parse_config_sync({"sourceRef": {"name": "config"}}).build
    for bad, said in (({"postBuild": {"substitute": {"1x": "a"}}}, "invalid variable name"),
                      ({"components": ["https://example.com/c"]}, "not a relative path"),
                      ({"components": ["/etc"]}, "not a relative path"),
                      ({"images": [{"name": "web"}]}, "newName, newTag or digest"),
                      ({"patches": [{"patch": "x", "target": {"kinds": "D"}}]}, "unknown field"),
                      ({"postBuild": {"substituteFrom": [{"kind": "Pod", "name": "x"}]}}, "ConfigMap or Secret")):
        with pytest.raises(SpecError, match=said):
            parse_config_sync({"sourceRef": {"name": "config"}, **bad})


def test_an_object_substituted_again_takes_the_new_values_and_large_objects_are_not_kept() -> None:
    small = {"kind": "ConfigMap", "metadata": {"name": "a-${N}"}, "data": {"n": "n-${N}"}}
    assert substituted(small, {"N": "1"}) == {"kind": "ConfigMap", "metadata": {"name": "a-1"}, "data": {"n": "n-1"}}
    assert substituted(small, {"N": "2"}) == {"kind": "ConfigMap", "metadata": {"name": "a-2"}, "data": {"n": "n-2"}}
    assert small["data"] == {"n": "n-${N}"}
    asked = _dumped.cache_info()
    large = {"kind": "ConfigMap", "data": {"big": "x" * (20 << 10), "n": "${N}x"}}
    assert substituted(large, {"N": "3"})["data"]["n"] == "3x"
    after = _dumped.cache_info()
    assert (after.hits, after.misses) == (asked.hits, asked.misses)  # not looked for among the kept texts
