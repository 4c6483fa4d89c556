"""A Project's parts and its environments' names: pure functions of its spec."""

from __future__ import annotations

import pytest

from helmop.api.errors import SpecError
from helmop.api.projects import Environments, parse_project
from helmop.decisions.projects import environment_namespace, environment_spec, parts, wants_environment

SYNC = {"url": "https://git.example.com/shop", "ref": {"branch": "main"}}


def test_parts_carry_the_project_and_confine_the_sync() -> None:
    spec = parse_project({"members": [{"kind": "ServiceAccount", "name": "ci/robot", "role": "view"}],
                          "sync": SYNC, "jenkins": {}}, "shop")
    made = {(p.obj["kind"], p.obj["metadata"]["name"]): p for p in parts("shop", "uid-1", spec)}
    assert all(p.obj["metadata"]["labels"]["helmop.dev/project"] == "shop" for p in made.values())
    assert all(p.obj["metadata"]["ownerReferences"][0]["uid"] == "uid-1" for p in made.values())
    sync = made[("ConfigSync", "project")].obj["spec"]
    assert (sync["serviceAccountName"], sync["targetNamespace"]) == ("deployer", "shop")
    binding = next(p.obj for (kind, _), p in made.items()
                   if kind == "RoleBinding" and p.obj["roleRef"]["name"] == "view")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "robot", "namespace": "ci"}]
    assert made[("Jenkins", "jenkins")].obj["spec"]["project"] == "shop"


@pytest.mark.parametrize("branch,expected", [
    ("feature/login", "shop-feature-login"),
    ("feature/Login", None),  # capitals: a hash keeps it apart from feature/login
    ("feature/" + "x" * 80, None),
])
def test_environment_names_are_dns_labels(branch: str, expected: str | None) -> None:
    name = environment_namespace(Environments(), "shop", branch)
    assert len(name) <= 63 and name == name.lower() and name.strip("-") == name
    if expected:
        assert name == expected
    else:
        assert name.startswith("shop-feature-") and name != environment_namespace(Environments(), "shop",
                                                                                   "feature/login")


def test_branches_and_the_environment_spec() -> None:
    spec = parse_project({"sync": SYNC, "jenkins": {}, "quota": {"pods": "50"},
                          "environments": {"branches": {"include": ["feature/*"], "exclude": ["feature/wip-*"]},
                                           "ttl": "72h", "template": {"quota": {"pods": "5"}}}}, "shop")
    assert spec.environments is not None and spec.environments.ttl == 72 * 3600
    assert wants_environment(spec.environments, "feature/x") and not wants_environment(spec.environments, "main")
    assert not wants_environment(spec.environments, "feature/wip-1")
    env = environment_spec(spec, "feature/x", "shop-feature-x")
    assert env.sync is not None and env.sync.ref == {"branch": "feature/x"}
    assert (env.namespace, env.quota, env.jenkins, env.environments) == ("shop-feature-x", {"pods": "5"}, None, None)


@pytest.mark.parametrize("spec,reason,fragment", [
    ({"members": [{"kind": "User", "name": "a", "role": "owner"}]}, "UnknownRole", "admin, edit, view"),
    ({"quota": {"pods": "lots"}}, "InvalidQuantity", "spec.quota.pods"),
    ({"namespace": "Not_A_Label"}, "InvalidSpec", "not a valid namespace name"),
    ({"environments": {"branches": {}}}, "InvalidSpec", "needs spec.sync"),
    ({"sync": SYNC, "environments": {"namePattern": "{project}"}}, "InvalidSpec", "{branch}"),
])
def test_bad_specs_name_the_field(spec: dict[str, object], reason: str, fragment: str) -> None:
    with pytest.raises(SpecError, match=fragment.replace("{", r"\{").replace("}", r"\}")) as err:
        parse_project(spec, "shop")
    assert err.value.reason == reason
