"""The pure guards against hostile input, case by case: YAML budgets, decompression caps, archive and tree
entry names, file:// roots, chart dependencies, API paths, webhook names, cache keys and the environment
helm and git get. (tests/security attacks a running operator with the same classes.)"""

from __future__ import annotations

import base64
import gzip
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from helmop.api import bounded, yamlc
from helmop.api.kinds import is_namespace_name, is_object_name
from helmop.api.process import minimal_env
from helmop.helm import chartdeps, storage
from helmop.helm.engine import HELM_GOGC, helm_env
from helmop.helm.errors import HelmError
from helmop.infra.kube import KubeError, _check_path
from helmop.sources.decryption.keys import KeyInvalid, Keys
from helmop.sources.decryption.repository import Decryptor
from helmop.sources.errors import SourceError
from helmop.sources.git import GitAuth, check_url, write_tree
from helmop.sources.repositories import Credentials, _check_archive
from tests.chartrepo import tar_gz
from tests.sops import Sops, age_identity


def billion_laughs(levels: int = 9) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("text,problem", [
    (billion_laughs(), "excessive aliasing"),
    ("a: &a [*a]\n", "contains itself"),
    ("a: " + "[" * 12000 + "]" * 12000, "nested too deeply"),
    ("x: [" + ",".join(["[" * 100 + "]" * 100] * 2000) + "]", "nested too deeply"),
    ("- " * 10001 + "x", "nested too deeply"),
])
def test_yaml_bombs_are_refused_before_they_are_built(text: str, problem: str) -> None:
    with pytest.raises(yaml.YAMLError, match=problem):
        yamlc.load_all(text)


def test_ordinary_yaml_and_json_read_as_kubernetes_does() -> None:
    merged = "base: &b {x: 1, z: 2}\nmine: {<<: *b, z: 3}\nlist: [*b, *b]\n"
    assert yamlc.load(merged) == {"base": {"x": 1, "z": 2}, "mine": {"x": 1, "z": 3},
                                  "list": [{"x": 1, "z": 2}, {"x": 1, "z": 2}]}
    many = "\n".join(f"k{i}: &k{i} v{i}\nr{i}: *k{i}" for i in range(3000))  # aliases, but not a bomb
    assert yamlc.load(many)["r2999"] == "v2999"
    doc = {"a": [1, {"b": None, "c": "d"}], "e": "2024-01-01", "f": 1.5}
    assert yamlc.load(json.dumps(doc)) == doc == yamlc.load(yaml.safe_dump(doc))
    with pytest.raises(yaml.YAMLError):
        yamlc.load_all("a: [1, 2")
    nodes = yamlc.documents("a: 1\n---\nb: [2]\n")
    assert [(node.start_mark.line, data) for node, data in nodes] == [(0, {"a": 1}), (2, {"b": [2]})]


def test_decompression_is_capped_by_size_and_ratio() -> None:
    small = gzip.compress(b"x" * 1000)
    assert bounded.gunzip(small, max_size=1 << 20, max_ratio=10, what="t") == b"x" * 1000
    bomb = gzip.compress(bytes(64 << 20))
    with pytest.raises(bounded.Bomb, match="decompression bomb"):
        bounded.gunzip(bomb, max_size=1 << 30, max_ratio=100, what="t")  # the ratio stops it
    with pytest.raises(bounded.Bomb, match="more than 16 MiB"):
        bounded.gunzip(bomb, max_size=16 << 20, max_ratio=1 << 20, what="t")  # the size stops it


def forged(raw: bytes) -> dict[str, Any]:
    return {"metadata": {"name": "sh.helm.release.v1.x.v1"},
            "data": {"release": base64.b64encode(base64.b64encode(raw)).decode()}}


@pytest.mark.parametrize("raw,problem", [
    (gzip.compress(b"[" + b"0," * (20 << 20) + b"0]", mtime=0), "decompression bomb"),
    (gzip.compress(json.dumps(list(range(1_200_000))).encode(), 1, mtime=0), "JSON values"),
    (b"not json", "readable"),
    (gzip.compress(b"[1, 2]", mtime=0), "not a JSON object"),
], ids=["bomb", "values", "not-json", "not-an-object"])  # ids that are the same on every worker
def test_release_records_are_bounded(raw: bytes, problem: str) -> None:
    with pytest.raises(HelmError, match=problem) as err:
        storage.decode(forged(raw))
    assert err.value.reason == "ReleaseRecordInvalid"


def test_release_manifests_keep_only_named_objects() -> None:
    manifest = "kind: ConfigMap\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n---\n- a list\n"
    assert [o["metadata"]["name"] for o in storage.manifest_objects({"manifest": manifest})] == ["ok"]
    assert storage.revision_of({"metadata": {"labels": {"version": "x"}}}) == 0


CHART_YAML = {"c/Chart.yaml": b"apiVersion: v2\nname: c\nversion: 0.1.0\n"}


@pytest.mark.parametrize("data,reason", [
    (tar_gz({**CHART_YAML, "c/../../etc/x": b"x"}), "InvalidPath"),
    (tar_gz({**CHART_YAML, "/etc/x": b"x"}), "InvalidPath"),
    (tar_gz({**CHART_YAML, "c\\..\\x": b"x"}), "InvalidPath"),
    (tar_gz(CHART_YAML, links={"c/templates/x.yaml": "/etc/passwd"}), "InvalidPath"),
    (tar_gz({**CHART_YAML, "c/big": bytes(6 << 20)}), "ChartTooLarge"),
    (tar_gz({**CHART_YAML, "d/Chart.yaml": b"x"}), "ChartInvalid"),
    (tar_gz({**CHART_YAML, **{f"c/f{i}": b"" for i in range(20_001)}}), "ChartTooLarge"),
    (b"\x1f\x8b not really", "ChartInvalid"),
])
def test_chart_archives_are_checked_entry_by_entry(data: bytes, reason: str) -> None:
    with pytest.raises(SourceError) as err:
        _check_archive(data, "chart c 0.1.0")
    assert err.value.reason == reason


def test_a_good_archive_passes() -> None:
    _check_archive(tar_gz({**CHART_YAML, "c/templates/cm.yaml": b"kind: ConfigMap\n"}), "chart c")


@pytest.mark.parametrize("name", ["..", ".", "a\\b", "a\x00b", "a\nb", ""])
def test_tree_materialisation_refuses_unsafe_names(tmp_path: Path, name: str) -> None:
    with pytest.raises(SourceError) as err:
        write_tree({f"dir/{name}": b"x"} if name else {"dir/": b"x"}, tmp_path)
    assert err.value.reason == "InvalidPath"
    assert list(tmp_path.rglob("*")) in ([], [tmp_path / "dir"])


def test_tree_materialisation_follows_no_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "templates").symlink_to(outside)  # were one there, nothing would be written through it
    with pytest.raises(SourceError, match="InvalidPath"):
        write_tree({"templates/x.yaml": b"x"}, dest)
    assert not list(outside.iterdir())
    with pytest.raises(SourceError, match="InvalidPath"):  # a name the file system cannot hold
        write_tree({"a" * 300: b"x"}, dest)
    write_tree({"Chart.yaml": b"a", "templates2/x.yaml": b"b"}, dest)
    assert (dest / "templates2" / "x.yaml").read_bytes() == b"b"


def test_file_urls_only_under_allowed_roots_and_never_the_cache(tmp_path: Path) -> None:
    allowed, cache = tmp_path / "allowed", tmp_path / "allowed" / "cache"
    cache.mkdir(parents=True)
    (allowed / "repo.git").mkdir()
    (allowed / "link").symlink_to(tmp_path)
    check_url(f"file://{allowed}/repo.git", file_roots=(allowed,), forbidden=cache)
    for url, roots in ((f"file://{allowed}/repo.git", ()), (f"file://{cache}/git/x", (allowed,)),
                       (f"file://{allowed}/link/other", (allowed,)), (f"file://{allowed}/../x", (allowed,)),
                       ("file:///etc", (allowed,))):
        with pytest.raises(SourceError) as err:
            check_url(url, file_roots=roots, forbidden=cache)
        assert err.value.reason == "InvalidURL", url


@pytest.mark.parametrize("repository,outside", [
    ("file://./sub", False), ("file://sub/../sub2", False), ("https://charts.example.com", False), ("", False),
    ("file:///etc", True), ("file://../x", True), ("file://sub/../../x", True), ("file://..", True),
])
def test_chart_dependencies_inside_the_chart(repository: str, outside: bool) -> None:
    meta = {"dependencies": [{"name": "d", "repository": repository}]}
    assert bool(chartdeps.outside_the_chart(meta)) is outside
    assert bool(chartdeps.outside_the_chart({}, meta)) is outside  # Chart.lock counts too
    assert chartdeps.outside_the_chart("not a map", [1, 2]) == []


@pytest.mark.parametrize("path", ["/api/v1/namespaces/a/secrets/../../x", "/api/v1/namespaces/a/secrets/.",
                                  "/api/v1/namespaces/a/secrets/x?watch=1", "/api/v1/namespaces/a/secrets/x%2F..",
                                  "/api/v1/namespaces/a//secrets"])
def test_api_paths_with_dot_segments_are_refused(path: str) -> None:
    with pytest.raises(KubeError):
        _check_path(path)
    _check_path("/apis/helmop.dev/v1alpha1/namespaces/team-a/gitrepositories/config")


def test_webhook_names() -> None:
    assert is_namespace_name("team-a") and is_object_name("config.v2")
    for bad in ("..", "../team-b", "Team", "a/b", "a%2Fb", "", "-a", "a" * 64):
        assert not is_namespace_name(bad)
    for bad in ("..", "a/b", ".", "A", "a..b", "", "a" * 254):
        assert not is_object_name(bad)


def test_cache_keys_follow_the_credentials() -> None:
    assert Credentials().key() == GitAuth().key() == "anonymous"
    a = Credentials("u", "p", scope="team-a/creds")
    assert a.key() != Credentials("u", "p", scope="team-b/creds").key() != Credentials("u", "q",
                                                                                         scope="team-a/creds").key()
    assert GitAuth(password="x", scope="a/s").key() != GitAuth(password="y", scope="a/s").key()
    assert GitAuth(scope="a/empty").key() != "anonymous"  # a Secret, even an empty one, is not anonymous


def test_helm_and_git_get_a_minimal_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "canary")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    monkeypatch.setenv("HELM_DRIVER", "secret")
    for var in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):  # other tests' operators set them
        monkeypatch.delenv(var, raising=False)
    env = minimal_env(str(tmp_path))
    assert "AWS_SECRET_ACCESS_KEY" not in env and env["HOME"] == str(tmp_path) and env["HTTPS_PROXY"]
    helm = helm_env(tmp_path, HELM_PLUGINS="/plugins")
    assert "AWS_SECRET_ACCESS_KEY" not in helm and helm["HELM_DRIVER"] == "secret"
    assert helm["HELM_CACHE_HOME"].startswith(str(tmp_path)) and helm["HOME"] != os.environ.get("HOME")
    # Go's collector: helmop's default for a short-lived helm, unless the operator's environment says otherwise
    monkeypatch.delenv("GOGC", raising=False)
    assert helm_env(tmp_path)["GOGC"] == HELM_GOGC and "GOGC" not in minimal_env(str(tmp_path))
    monkeypatch.setenv("GOGC", "50")
    assert helm_env(tmp_path)["GOGC"] == "50"


def test_sops_files_whose_keys_name_paths_write_nothing_but_themselves() -> None:
    """An encrypted document's keys, and a secretGenerator entry's key, are names in data: nothing is written
    or read by them; the decrypted tree holds the very files it held."""
    identity, recipient = age_identity()
    keys = Keys.of_entries({"k.agekey": identity.encode()}, "Secret t/k")
    tree = {"app/kustomization.yaml": b"resources: [s.yaml]\nsecretGenerator:\n"
                                      b"- {name: g, files: [../../../../etc/passwd=token.enc]}\n",
            "app/s.yaml": Sops(age=[recipient]).yaml({"../../etc/passwd": "owned", "/abs": {"k": "v"}}).encode(),
            "app/token.enc": Sops(age=[recipient]).binary(b"tok-ok").encode()}
    out = Decryptor(keys).tree(tree, ["app"])
    assert set(out) == set(tree)
    assert yaml.safe_load(out["app/s.yaml"]) == {"../../etc/passwd": "owned", "/abs": {"k": "v"}}
    assert out["app/token.enc"] == b"tok-ok"


def test_a_key_entry_of_100_mb_is_refused_by_its_size() -> None:
    with pytest.raises(KeyInvalid, match="larger than 256 KiB"):
        Keys.of_entries({"huge.agekey": b"A" * (100 << 20)}, "Secret t/k")
