"""An ArtifactGenerator's composition (helmop.sources.generator), pure: copies of paths and globs as Flux's docs
describe them, excludes, the Merge and Extract strategies, pathPattern's captures, and every refusal by reason."""

from __future__ import annotations

import pytest
import yaml

from helmop.api.errors import SpecError
from helmop.api.generators import parse_artifact_generator
from helmop.sources import generator, tarballs
from helmop.sources.errors import SourceError
from helmop.sources.git import Limits

GIT = {"deploy/a.yaml": b"a: 1\n", "deploy/b.yaml": b"b: 2\n", "deploy/sub/c.yaml": b"c: 3\n",
       "charts/app/Chart.yaml": b"name: app\n", "charts/app/values.yaml": b"replicas: 1\nimage: {tag: v1}\n",
       "README.md": b"r", "bundle.tgz": tarballs.pack({"x/inside.yaml": b"i: 1\n"})}
OCI = {"values.yaml": b"image: {tag: v2}\nextra: true\n", "apps/one/app.yaml": b"one",
       "apps/two/app.yaml": b"two", "apps/two/notes.txt": b"n"}
TREES = {"git": GIT, "oci": OCI}


def generator_spec(*copies: dict[str, object], **extra: object) -> object:
    return parse_artifact_generator({
        "sources": [{"alias": "git", "kind": "GitRepository", "name": "repo"},
                    {"alias": "oci", "kind": "OCIRepository", "name": "config"}],
        "artifacts": [{"name": "out", "copy": list(copies)}], **extra})


def files(*copies: dict[str, object]) -> dict[str, bytes]:
    spec = generator_spec(*copies)
    return generator.compose(spec.artifacts[0], TREES).files  # type: ignore[attr-defined]


def test_paths_copy_files_into_folders_and_folders_as_folders() -> None:
    assert files({"from": "@git/deploy/a.yaml", "to": "@artifact/x/"}) == {"x/a.yaml": b"a: 1\n"}
    assert files({"from": "@git/deploy/a.yaml", "to": "@artifact/renamed.yaml"}) == {"renamed.yaml": b"a: 1\n"}
    assert sorted(files({"from": "@git/deploy", "to": "@artifact/x/"})) == [
        "x/deploy/a.yaml", "x/deploy/b.yaml", "x/deploy/sub/c.yaml"]
    assert sorted(files({"from": "@oci/", "to": "@artifact/"})) == sorted(OCI)  # a source's root: its contents


def test_globs_as_the_docs_show_them() -> None:
    assert sorted(files({"from": "@git/deploy/*.yaml", "to": "@artifact/x/"})) == ["x/a.yaml", "x/b.yaml"]
    assert sorted(files({"from": "@git/deploy/**", "to": "@artifact/all/"})) == [
        "all/a.yaml", "all/b.yaml", "all/sub/c.yaml"]
    assert sorted(files({"from": "@oci/apps/*", "to": "@artifact/"})) == [  # matched folders come whole
        "one/app.yaml", "two/app.yaml", "two/notes.txt"]
    assert sorted(files({"from": "@oci/apps/*", "to": "@artifact/", "exclude": ["*.txt"]})) == [
        "one/app.yaml", "two/app.yaml"]
    assert sorted(files({"from": "@git/deploy/**", "to": "@artifact/", "exclude": ["sub/**"]})) == [
        "a.yaml", "b.yaml"]


def test_merge_deep_merges_yaml_and_extract_unpacks_archives() -> None:
    merged = files({"from": "@git/charts/app/values.yaml", "to": "@artifact/values.yaml"},
                   {"from": "@oci/values.yaml", "to": "@artifact/values.yaml", "strategy": "Merge"})
    assert yaml.safe_load(merged["values.yaml"]) == {"replicas": 1, "image": {"tag": "v2"}, "extra": True}
    overwritten = files({"from": "@git/charts/app/values.yaml", "to": "@artifact/values.yaml"},
                        {"from": "@oci/values.yaml", "to": "@artifact/values.yaml"})
    assert yaml.safe_load(overwritten["values.yaml"]) == {"image": {"tag": "v2"}, "extra": True}
    assert files({"from": "@git/bundle.tgz", "to": "@artifact/unpacked/", "strategy": "Extract"}) == {
        "unpacked/x/inside.yaml": b"i: 1\n"}
    assert files({"from": "@git/*", "to": "@artifact/", "strategy": "Extract"}) == {"x/inside.yaml": b"i: 1\n"}


@pytest.mark.parametrize(("copy", "said"), [
    ({"from": "@git/nowhere.yaml", "to": "@artifact/"}, "does not exist"),
    ({"from": "@git/*.json", "to": "@artifact/"}, "no files match"),
    ({"from": "@git/deploy/*.yaml", "to": "@artifact/", "exclude": ["*.yaml"]}, "were excluded"),
    ({"from": "@git/README.md", "to": "@artifact/", "strategy": "Extract"}, "not a .tar.gz"),
    ({"from": "@git/deploy", "to": "@artifact/", "strategy": "Extract"}, "is a folder"),
    ({"from": "@git/README.md", "to": "@artifact/x.yaml", "strategy": "Merge"}, ""),  # no earlier file: a copy
])
def test_copies_that_cannot_be_done_are_refused_by_reason(copy: dict[str, object], said: str) -> None:
    if not said:
        assert files(copy) == {"x.yaml": b"r"}
        return
    with pytest.raises(SourceError, match=said) as refused:
        files(copy)
    assert refused.value.reason == "BuildFailed"


def test_a_composed_artifact_is_bounded() -> None:
    spec = generator_spec({"from": "@git/", "to": "@artifact/"})
    with pytest.raises(SourceError) as large:
        generator.compose(spec.artifacts[0], TREES, Limits(max_total=10))  # type: ignore[attr-defined]
    assert large.value.reason == "TreeTooLarge"


def test_path_pattern_makes_one_artifact_per_matching_folder() -> None:
    spec = parse_artifact_generator({
        "sources": [{"alias": "oci", "kind": "OCIRepository", "name": "config"}],
        "pathPattern": "@oci/apps/{app}",
        "artifacts": [{"name": "{app}-config", "copy": [{"from": "@oci/apps/{app}/**", "to": "@artifact/"}]}]})
    planned = generator.plan(spec, {"oci": {**OCI, "apps/Three/app.yaml": b"3"}})
    assert sorted((p.template.name, p.labels) for p in planned) == [
        ("one-config", (("app", "one"),)), ("three-config", (("app", "three"),)), ("two-config", (("app", "two"),))]
    three = next(p for p in planned if p.template.name == "three-config")
    assert generator.compose(three.template, {"oci": {**OCI, "apps/Three/app.yaml": b"3"}}).files == {
        "app.yaml": b"3"}  # the copy's path keeps the folder's own case


def test_specs_generators_cannot_follow_are_refused() -> None:
    base = {"sources": [{"alias": "git", "kind": "GitRepository", "name": "repo"}],
            "artifacts": [{"name": "out", "copy": [{"from": "@git/", "to": "@artifact/"}]}]}
    for change, said in (({"sources": [{"alias": "git", "kind": "HelmChart", "name": "c"}]}, "HelmChart"),
                         ({"sources": [{"alias": "g", "kind": "GitRepository", "name": "a"},
                                       {"alias": "g", "kind": "GitRepository", "name": "b"}]}, "duplicate"),
                         ({"artifacts": [{"name": "out", "copy": [{"from": "@other/", "to": "@artifact/"}]}]},
                          "alias 'other' not found"),
                         ({"artifacts": [{"name": "out", "copy": [{"from": "@git/../x", "to": "@artifact/"}]}]},
                          "relative path inside"),
                         ({"artifacts": [{"name": "Not_A_Name", "copy": [{"from": "@git/", "to": "@artifact/"}]}]},
                          "object's name")):
        with pytest.raises(SpecError, match=said):
            parse_artifact_generator({**base, **change})
