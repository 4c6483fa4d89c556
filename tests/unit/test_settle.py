"""How each kind's status changes, as pure functions: the rules the controllers used to apply to dicts in
several places, now one module per kind."""

from __future__ import annotations

from dataclasses import replace

from helmop.api.actions import Action
from helmop.api.helmrelease import Remediation
from helmop.api.status.app import AppStatus
from helmop.api.status.helmrelease import HelmReleaseStatus, Inventory, InventoryEntry, ReadinessCheck, Snapshot
from helmop.api.status.project import ProjectStatus
from helmop.api.status.sources import GitRepositoryStatus
from helmop.decisions import Decision, Desired, Reason
from helmop.decisions.settle import app, helmrelease, outcome, progressing, project, sources
from helmop.decisions.settle.helmrelease import ActionResult

DESIRED = Desired(config_digest="d1", owner="o", generation=3, digest="sha256:d1", chart_version="1.0.0",
                  chart="web@1.0.0", release="shop/web", release_name="web")
UPGRADE = Decision(Action.UPGRADE, Reason.UPGRADING, "configuration changed; upgrading")
INVENTORY = Inventory(entries=(InventoryEntry(id="shop_web_apps_Deployment", v="v1"),))


def test_a_successful_upgrade_records_the_attempt_and_clears_failures_and_old_conditions() -> None:
    before = (HelmReleaseStatus(upgrade_failures=2, last_attempted_config_digest="sha256:d1")
              .with_condition("Remediated", True, "RollbackSucceeded", "", 2)
              .with_condition("TestSuccess", True, "TestSucceeded", "", 2)
              .with_condition("Reconciling", True, "Progressing", "", 3))
    result = ActionResult(True, "UpgradeSucceeded", "ok", history=(Snapshot(revision=4),), inventory=INVENTORY,
                          readiness=ReadinessCheck(by="helmop"))
    after = helmrelease.settle(before, DESIRED, UPGRADE, result)
    assert after.is_true("Ready") and after.is_true("Released")
    assert {c.type for c in after.conditions} == {"Ready", "Released"}
    assert (after.upgrade_failures, after.last_applied_revision, after.last_attempted_release_action) == (
        0, "1.0.0", "upgrade")
    assert after.history[0].revision == 4 and after.inventory == INVENTORY and after.observed_generation == 3
    assert after.readiness_check == ReadinessCheck(by="helmop") and after.release_name == "web"


def test_failures_count_per_configuration_and_not_for_transient_errors() -> None:
    failed = ActionResult(False, "UpgradeFailed", "boom")
    once = helmrelease.settle(HelmReleaseStatus(), DESIRED, UPGRADE, failed)
    twice = helmrelease.settle(once, DESIRED, UPGRADE, failed)
    assert (once.upgrade_failures, twice.upgrade_failures) == (1, 2) and not twice.is_true("Ready")
    transient = helmrelease.settle(twice, DESIRED, UPGRADE, ActionResult(False, "UpgradeFailed", "x", transient=True))
    assert transient.upgrade_failures == 2
    changed = helmrelease.settle(twice, replace(DESIRED, digest="sha256:d2"), UPGRADE, failed)
    assert changed.upgrade_failures == 1, "a new configuration counts afresh"


def test_a_reset_counts_afresh_once_and_a_force_is_recorded() -> None:
    desired = replace(DESIRED, reset_at="r1", force_at="f1")
    status = HelmReleaseStatus(upgrade_failures=5, last_attempted_config_digest="sha256:d1")
    forced = Decision(Action.UPGRADE, Reason.UPGRADING, "forced", force=True)
    after = helmrelease.settle(status, desired, forced, ActionResult(False, "UpgradeFailed", "x"))
    assert (after.upgrade_failures, after.last_handled_reset_at, after.last_handled_force_at) == (1, "r1", "f1")
    again = helmrelease.settle(after, desired, forced, ActionResult(False, "UpgradeFailed", "x"))
    assert again.upgrade_failures == 2


def test_a_failed_test_fails_the_release_unless_ignored() -> None:
    status = HelmReleaseStatus(last_attempted_release_action="upgrade").with_condition("Ready", True, "U", "", 3)
    test = Decision(Action.TEST, Reason.TESTING, "testing")
    failed = helmrelease.settle(status, DESIRED, test, ActionResult(False, "TestFailed", "bad"))
    assert not failed.is_true("Ready") and failed.upgrade_failures == 1 and not failed.is_true("TestSuccess")
    ignoring = replace(DESIRED, upgrade=Remediation(ignore_test_failures=True))
    ignored = helmrelease.settle(status, ignoring, test, ActionResult(False, "TestFailed", "bad"))
    ready = ignored.condition("Ready")
    assert ready is not None and ready.true and ready.message.endswith("(test failures are ignored)")


def test_a_cancelled_action_says_so_on_ready_and_records_no_attempt() -> None:
    after = helmrelease.settle(HelmReleaseStatus(), DESIRED, UPGRADE,
                               ActionResult(False, "ActionCancelled", "stopped", cancelled=True))
    ready = after.condition("Ready")
    assert ready is not None and ready.reason == "ActionCancelled" and after.last_attempted_config_digest == ""


def test_a_remediation_marks_remediated_and_drift_correction_clears_drifted() -> None:
    rollback = Decision(Action.ROLLBACK, Reason.UPGRADE_REMEDIATION, "rolling back", remediation=True)
    rolled = helmrelease.settle(HelmReleaseStatus(), DESIRED, rollback, ActionResult(True, "RollbackSucceeded", "ok"))
    assert rolled.is_true("Remediated") and not rolled.is_true("Ready")
    correct = Decision(Action.CORRECT, Reason.DRIFT_DETECTED, "drift", drifted=("Deployment/web: /spec",))
    drifted = HelmReleaseStatus().with_condition("Drifted", True, "DriftDetected", "", 3)
    corrected = helmrelease.settle(drifted, DESIRED, correct, ActionResult(True, "DriftCorrected", "ok"))
    condition = corrected.condition("Drifted")
    assert condition is not None and not condition.true and condition.reason == "DriftCorrected"


def test_up_to_date_fills_in_what_the_status_lacks_and_nothing_more() -> None:
    up = Decision(Action.NONE, Reason.UP_TO_DATE, "release is deployed at revision 1")
    first = helmrelease.terminal(HelmReleaseStatus(), DESIRED, up, lambda: (Snapshot(revision=1),), INVENTORY)
    assert first is not None and first.is_true("Ready") and first.inventory == INVENTORY
    ready = first.condition("Ready")
    assert ready is not None and ready.message == ("Release shop/web is deployed with chart web@1.0.0 "
                                                   "(release is deployed at revision 1)")
    def unread() -> tuple[Snapshot, ...]:
        raise AssertionError("the history is read only when the status lacks it")

    assert helmrelease.terminal(first, DESIRED, up, unread, None) == first


def test_a_stall_keeps_the_reason_of_the_last_failure_on_ready() -> None:
    stall = Decision(Action.STALL, Reason.RETRIES_EXCEEDED, "no retries left")
    failed = HelmReleaseStatus().with_condition("Ready", False, "UpgradeFailed", "boom", 3)
    after = helmrelease.terminal(failed, DESIRED, stall, tuple, None)
    assert after is not None
    ready, stalled = after.condition("Ready"), after.condition("Stalled")
    assert ready is not None and ready.reason == "UpgradeFailed"
    assert stalled is not None and stalled.reason == "RetriesExceeded"
    assert helmrelease.terminal(failed, DESIRED, Decision(Action.NONE, Reason.SUSPENDED, ""), tuple, None) is None


def test_an_outcome_clears_reconciling_and_sets_or_clears_stalled() -> None:
    busy = progressing(GitRepositoryStatus(), 2, "fetching")
    assert busy.is_true("Reconciling") and not busy.is_true("Ready")
    stalled = outcome(busy, 2, False, "InvalidSpec", "bad", stalled=True)
    assert stalled.is_true("Stalled") and stalled.condition("Reconciling") is None
    assert outcome(stalled, 3, True, "Succeeded", "ok").condition("Stalled") is None


def test_a_git_artifact_keeps_its_time_until_its_revision_or_content_changes() -> None:
    first = sources.fetched(GitRepositoryStatus(), 1, "main@sha1:a", "sha256:1", "t1")
    same = sources.fetched(first, 1, "main@sha1:a", "sha256:1", "t2")
    moved = sources.fetched(same, 1, "main@sha1:b", "sha256:2", "t3")
    reshaped = sources.fetched(moved, 1, "main@sha1:b", "sha256:3", "t4", observed_ignore="/docs")
    assert first.artifact is not None and same.artifact == first.artifact and same.last_fetched_at == "t2"
    assert moved.artifact is not None and moved.artifact.last_update_time == "t3" and moved.is_true("Ready")
    assert reshaped.artifact is not None and reshaped.artifact.last_update_time == "t4"
    assert reshaped.observed_ignore == "/docs" and reshaped.artifact.digest == "sha256:3"


def test_a_project_teardown_step_waits_and_is_reported_once() -> None:
    waiting = project.waiting(ProjectStatus(), "SyncReady", "ConfigSync x", now=100.0)
    later = project.waiting(project.reported(waiting), "SyncReady", "still", now=200.0)
    assert later.teardown is not None and (later.teardown.since, later.teardown.reported) == (100.0, True)
    done = project.step_done(later, "SyncReady")
    next_step = project.waiting(done, "JenkinsReady", "Jenkins", now=300.0)
    assert next_step.teardown is not None and (next_step.teardown.since, next_step.teardown.reported) == (300.0, False)
    assert next_step.teardown.done == ("SyncReady",)
    kept = project.retained(project.retained(done, ["pv-b"]), ["pv-a", "pv-b"]).teardown
    assert kept is not None and kept.retained == ("pv-a", "pv-b")


def test_an_app_mirrors_its_helmrelease_for_its_own_generation() -> None:
    hr = {"metadata": {"name": "ci-jenkins", "generation": 4}}
    hr_status = HelmReleaseStatus(observed_generation=4, last_applied_revision="5.0.0", last_handled_reconcile_at="r",
                                  history=(Snapshot(revision=7),)).with_condition("Ready", True, "UpToDate", "ok", 4)
    mirrored = app.mirrored(AppStatus(), 2, "ci", hr, hr_status, {"url": "http://ci", "adminSecret": "ci-admin"})
    ready = mirrored.condition("Ready")
    assert ready is not None and ready.true and ready.observed_generation == 2
    assert (mirrored.revision, mirrored.chart_version, mirrored.url, mirrored.last_handled_reconcile_at) == (
        7, "5.0.0", "http://ci", "r")
    behind = app.mirrored(AppStatus(), 2, "ci", {"metadata": {"generation": 5}}, hr_status, {})
    ready = behind.condition("Ready")
    assert ready is not None and not ready.true and ready.reason == "Progressing"
