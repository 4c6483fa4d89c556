"""The pure layers: spec parsing, values merging, version constraints, the reconcile decision."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from helmop.api.actions import Action
from helmop.api.errors import SpecError
from helmop.api.helmrelease import Remediation, RepositoryChart, default_release_name, parse_spec
from helmop.api.semver import highest
from helmop.decisions import Desired, Observed, Release, decide
from helmop.helm import storage
from helmop.helm.engine import UpgradeRequest, upgrade_args
from helmop.helm.values import digest, merge, parse_values, set_path

IN, UP = Action.INSTALL, Action.UPGRADE  # the last attempted action, as status records it
CHART = {"repository": {"url": "https://charts.example.com", "name": "web", "version": "^1.2"}}


def test_spec_defaults_follow_flux() -> None:
    spec = parse_spec({"chart": CHART}, "web", "apps")
    assert spec.release_name == "web" and spec.target_namespace == spec.storage_namespace == "apps"
    assert (spec.interval, spec.timeout, spec.max_history) == (600, 300, 5)
    assert isinstance(spec.chart, RepositoryChart) and spec.chart.version == "^1.2"
    other = parse_spec({"chart": CHART, "targetNamespace": "prod", "interval": "1m30s"}, "web", "apps")
    assert other.release_name == "prod-web" and other.interval == 90


def test_long_release_names_are_shortened_with_a_hash() -> None:
    name = default_release_name("a" * 60, "team", "ops")
    assert len(name) == 53 and name.startswith("team-" + "a" * 35) and name[40] == "-"
    assert name == default_release_name("a" * 60, "team", "ops")  # stable


@pytest.mark.parametrize("spec,fragment", [
    ({}, "spec.chart is required"),
    ({"chart": {}}, "exactly one source"),
    ({"chart": {"repository": {"url": "ftp://x", "name": "a"}}}, "http(s):// or oci://"),
    ({"chart": {"repository": {"url": "https://x"}}}, "name is required"),
    ({"chart": CHART, "interval": "soon"}, "spec.interval"),
    ({"chart": CHART, "releaseName": "Not_Valid"}, "not a valid Helm release name"),
    ({"chart": CHART, "valuesFrom": [{"kind": "Pod", "name": "x"}]}, "ConfigMap or Secret"),
    ({"chart": CHART, "storageNamespace": "elsewhere"}, "storageNamespace"),
])
def test_bad_specs_say_which_field(spec: dict, fragment: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec(spec, "web", "apps")
    assert fragment in str(err.value)


def test_values_merge_like_helm() -> None:
    base = {"image": {"repo": "x", "tag": "1"}, "list": [1, 2], "keep": True, "drop": 1}
    out = merge(base, {"image": {"tag": "2"}, "list": [3], "drop": None})
    assert out == {"image": {"repo": "x", "tag": "2"}, "list": [3], "keep": True}
    assert base["image"]["tag"] == "1"  # inputs untouched


def test_target_paths_and_yaml_errors() -> None:
    assert set_path({}, "a.b\\.c[1].d", "v") == {"a": {"b.c": [None, {"d": "v"}]}}
    assert set_path({"a": {"x": 1}}, "a.y", 2) == {"a": {"x": 1, "y": 2}}
    with pytest.raises(ValueError, match=r"values.yaml of cm is not valid YAML \(line 1"):
        parse_values("a: [b", "values.yaml of cm")
    with pytest.raises(ValueError, match="must be a YAML map"):
        parse_values("- a", "x")


def test_digest_ignores_key_order() -> None:
    assert digest({"a": 1, "b": {"c": 2}}) == digest({"b": {"c": 2}, "a": 1}) != digest({"a": 2, "b": {"c": 2}})


@pytest.mark.parametrize("constraint,expected", [
    ("^1.2", "1.3.0"), ("~1.2", "1.2.9"), (">=1.0 <2.0", "1.3.0"), ("1.2.x", "1.2.9"), ("", "2.0.0"),
    ("1.2.0", "1.2.0"), ("^0.2", "0.2.5"), ("1.0 - 1.2", "1.2.9"), ("^3", None), (">=2.1.0-0", "2.1.0-beta.1"),
    ("^1 || ^2", "2.0.0"), ("<=1.2", "1.2.9"),
])
def test_version_constraints(constraint: str, expected: str | None) -> None:
    versions = ["0.1.0", "0.2.0", "0.2.5", "1.0.0", "1.2.0", "1.2.9", "1.3.0-rc.1", "1.3.0", "2.0.0",
                "2.1.0-beta.1"]
    assert highest(versions, constraint) == expected


def test_upgrade_arguments_never_carry_values() -> None:
    req = UpgradeRequest("web", "apps", Path("/c.tgz"), {"password": "s3cret"}, 60,
                         labels={"helmop.dev/owner": "abc"}, force=True)
    for major, force in ((4, "--force-replace"), (3, "--force")):
        args = upgrade_args(req, major)
        assert "s3cret" not in " ".join(args) and args[args.index("--values") + 1] == "-"
        assert force in args and "--labels" in args


D = Desired(config_digest="d1", owner="me")
R2 = Remediation(retries=2, remediate_last_failure=True)
UNINSTALLING = Remediation(retries=1, strategy="uninstall")
TESTED = Desired("d1", "me", tests=True)
FLUX_HR = Desired("d1", "me", adopts=True)


def failed(digest: str = "d1", revision: int = 3, last_good: int = 2, tests: str = "") -> Release:
    return Release("failed", "me", digest, revision, last_good=last_good, tests=tests)


@pytest.mark.parametrize("desired,observed,action,reason", [
    (D, Observed(None), Action.INSTALL, "Installing"),
    (D, Observed(Release("deployed", "me", "d1", 3, 2)), Action.NONE, "UpToDate"),
    (D, Observed(Release("deployed", "me", "d0", 3, 2)), Action.UPGRADE, "Upgrading"),
    (D, Observed(Release("deployed", "other", "d1", 3)), Action.REFUSE, "ReleaseOwnedElsewhere"),
    (D, Observed(Release("deployed", "", "", 1)), Action.REFUSE, "ReleaseOwnedElsewhere"),
    (D, Observed(Release("pending-upgrade", "me", "d1", 2)), Action.UNLOCK, "ReleaseLocked"),
    (D, Observed(Release("uninstalled", "me", "d1", 2)), Action.INSTALL, "Installing"),
    # a failed upgrade, retries 0 (Flux's default): stalled until something changes
    (D, Observed(failed(), "d1", UP, upgrade_failures=1), Action.STALL, "RetriesExceeded"),
    # requestedAt only asks for a reconcile; resetAt counts afresh: one more try
    (D, Observed(failed(), "d1", UP, upgrade_failures=1, reset_requested=True), Action.UPGRADE, "Upgrading"),
    (D, Observed(failed("d0"), "d0", UP, upgrade_failures=3), Action.UPGRADE, "Upgrading"),  # new config
    # THE BUG: a failed first install leaves a failed record; it is an install failure, never an upgrade's
    (D, Observed(failed(revision=1, last_good=0), "d1", IN, install_failures=1), Action.STALL,
     "RetriesExceeded"),
    (Desired("d1", "me", install=R2), Observed(failed(revision=1, last_good=0), "d1", IN, install_failures=1),
     Action.UNINSTALL, "InstallRemediation"),
    (Desired("d1", "me", install=R2), Observed(None, "d1", IN, install_failures=2), Action.INSTALL,
     "Installing"),
    (Desired("d1", "me", install=R2), Observed(failed(revision=3, last_good=0), "d1", IN, install_failures=3),
     Action.UNINSTALL, "InstallRemediation"),  # the last failure is remediated too
    (Desired("d1", "me", install=R2), Observed(None, "d1", IN, install_failures=3), Action.STALL,
     "RetriesExceeded"),
    (D, Observed(failed(revision=1, last_good=0), "d0", IN, install_failures=1), Action.INSTALL,
     "Installing"),  # a fix of the values: installed at once (never deployed: not an upgrade)
    (Desired("d1", "me", install=Remediation(retries=-1)), Observed(None, "d1", IN, install_failures=99),
     Action.INSTALL, "Installing"),  # negative retries: forever
    # a failed upgrade with retries: rolled back to the last good revision, then tried again
    (Desired("d1", "me", upgrade=R2), Observed(failed(), "d1", UP, upgrade_failures=1), Action.ROLLBACK,
     "UpgradeRemediation"),
    (Desired("d1", "me", upgrade=R2), Observed(Release("deployed", "me", "d0", 4, 2), "d1", UP,
                                               upgrade_failures=1), Action.UPGRADE, "Upgrading"),
    (Desired("d1", "me", upgrade=R2), Observed(Release("deployed", "me", "d0", 4, 2), "d1", UP,
                                               upgrade_failures=3), Action.STALL, "RetriesExceeded"),
    (Desired("d1", "me", upgrade=UNINSTALLING), Observed(failed(), "d1", UP, upgrade_failures=1),
     Action.UNINSTALL, "UpgradeRemediation"),
    (Desired("d1", "me", upgrade=R2), Observed(failed(last_good=0), "d1", UP, upgrade_failures=1),
     Action.UNINSTALL, "UpgradeRemediation"),  # nothing to roll back to
    # tests
    (TESTED, Observed(Release("deployed", "me", "d1", 3, 2)), Action.TEST, "Testing"),
    (TESTED, Observed(Release("deployed", "me", "d1", 3, 2, tests="passed")), Action.NONE, "UpToDate"),
    (Desired("d1", "me", tests=True, upgrade=R2),
     Observed(Release("deployed", "me", "d1", 3, 2, tests="failed"), "d1", UP, upgrade_failures=1),
     Action.ROLLBACK, "UpgradeRemediation"),
    (Desired("d1", "me", tests=True, upgrade=Remediation(ignore_test_failures=True)),
     Observed(Release("deployed", "me", "d1", 3, 2, tests="failed"), "d1", UP), Action.NONE, "UpToDate"),
    # forceAt: one forced upgrade even when up to date
    (D, Observed(Release("deployed", "me", "d1", 3, 2), force_requested=True), Action.UPGRADE, "Upgrading"),
    (Desired("d1", "me", waiting_for=("ns/db",)), Observed(None), Action.NONE, "DependencyNotReady"),
    (Desired("d1", "me", waiting_for=("ns/db",)), Observed(Release("deployed", "me", "d0", 3, 2)), Action.NONE,
     "DependencyNotReady"),
    (Desired("d1", "me", suspended=True), Observed(None), Action.NONE, "Suspended"),
    (Desired("d1", "me", deleting=True), Observed(Release("deployed", "me", "d1", 1)), Action.UNINSTALL,
     "Uninstalling"),
    (Desired("d1", "me", deleting=True, suspended=True), Observed(Release("deployed", "me", "d1", 1)),
     Action.NONE, "Suspended"),
    (Desired("d1", "me", deleting=True), Observed(Release("deployed", "x", "d1", 1)), Action.NONE,
     "ReleaseOwnedElsewhere"),
    (Desired("d1", "me", deleting=True), Observed(None), Action.NONE, "ReleaseAbsent"),
    # a Flux HelmRelease adopts a release no helmop HelmRelease installed (Flux's, helm's), never another's
    (FLUX_HR, Observed(Release("deployed", "", "", 1, 0)), Action.UPGRADE, "Upgrading"),
    (FLUX_HR, Observed(Release("deployed", "other", "d1", 3)), Action.REFUSE, "ReleaseOwnedElsewhere"),
    (replace(FLUX_HR, deleting=True), Observed(Release("deployed", "", "", 1)), Action.UNINSTALL, "Uninstalling"),
])
def test_decisions(desired: Desired, observed: Observed, action: Action, reason: str) -> None:
    decision = decide(desired, observed)
    assert (decision.action, decision.reason) == (action, reason)


def test_rollback_goes_to_the_last_good_revision_and_force_is_passed_on() -> None:
    decision = decide(Desired("d1", "me", upgrade=R2), Observed(failed(revision=7, last_good=5), "d1", UP,
                                                                upgrade_failures=1))
    assert decision.target_revision == 5 and decision.remediation
    forced = decide(D, Observed(Release("deployed", "me", "d1", 3, 2), force_requested=True))
    assert forced.force and not forced.remediation


def test_release_records_round_trip_and_unlock() -> None:
    record = {"name": "web", "version": 2, "info": {"status": "pending-install"},
              "chart": {"metadata": {"name": "web", "version": "1.0.0", "appVersion": "2"}}}
    secret = {"metadata": {"name": "sh.helm.release.v1.web.v2", "namespace": "a",
                           "labels": {"name": "web", "owner": "helm", "status": "pending-install", "version": "2",
                                      storage.OWNER_LABEL: "me"}},
              "data": {"release": storage.encode(record)}}
    older = {"metadata": {"name": "sh.helm.release.v1.web.v1", "namespace": "a",
                          "labels": {"name": "web", "version": "1", "status": "superseded"}}, "data": {}}
    latest = storage.latest([older, secret])
    assert latest is not None and (latest.revision, latest.status, latest.owner) == (2, "pending-install", "me")
    fixed = storage.unlocked(secret, "why")
    assert storage.decode(fixed)["info"] == {"status": "failed", "description": "why"}
    assert fixed["metadata"]["labels"]["status"] == "failed" and secret["metadata"]["labels"]["status"] != "failed"
    assert storage.summary(storage.decode(secret)).chart_version == "1.0.0"


def test_a_flux_helmrelease_and_helmops_of_one_name_own_different_releases() -> None:
    ours = storage.owner_token("team", "app")
    assert ours == storage.owner_token("team", "app", "HelmRelease")  # helmop's releases keep their owner
    assert storage.owner_token("team", "app", "HelmRelease.helm.toolkit.fluxcd.io") != ours
