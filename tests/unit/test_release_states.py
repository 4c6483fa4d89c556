"""A HelmRelease's decision in its two halves: the named state of the release (classify), each state's
action, and when a turn ends. Pure: no cluster, no helm."""

from __future__ import annotations

import pytest

from helmop.api.actions import Action
from helmop.api.helmrelease import Remediation
from helmop.controllers.actions import RUNS
from helmop.decisions import Decision, Desired, Observed, Reason, Release, decide
from helmop.decisions.choice import CHOICES, Stop, ends_turn
from helmop.decisions.states import ReleaseStatus, classify

S = ReleaseStatus
D = Desired("d1", "me")
IN, UP = Action.INSTALL, Action.UPGRADE
OURS = Release("deployed", "me", "d1", 3, last_good=2, chart_name="web")
FAILED = Release("failed", "me", "d1", 3, last_good=2)


@pytest.mark.parametrize("desired,observed,status,reason", [
    (Desired("d1", "me", deleting=True, suspended=True), Observed(OURS), S.SUSPENDED, "left in place"),
    (Desired("d1", "me", suspended=True), Observed(None), S.SUSPENDED, "suspended"),
    (Desired("d1", "me", deleting=True), Observed(None), S.ABSENT, "no release to uninstall"),
    (Desired("d1", "me", deleting=True), Observed(Release("deployed", "x", "d1", 1)), S.UNMANAGED, "left in place"),
    (Desired("d1", "me", deleting=True), Observed(OURS), S.DELETING, "being deleted"),
    (D, Observed(None), S.ABSENT, "release not found"),
    (D, Observed(Release("uninstalled", "me", "d1", 2)), S.ABSENT, "release not found"),
    (D, Observed(Release("deployed", "x", "d1", 1)), S.UNMANAGED, "will not take it over"),
    (D, Observed(Release("deployed", "", "d1", 1)), S.UNMANAGED, "will not take it over"),
    (Desired("d1", "me", adopts=True), Observed(Release("deployed", "", "d1", 1)), S.IN_SYNC, "revision 1"),
    (D, Observed(Release("pending-install", "me", "d1", 1)), S.LOCKED, "stuck in pending-install"),
    (Desired("d1", "me", waiting_for=("ns/db",)), Observed(OURS), S.WAITING, "waiting for ns/db"),
    (Desired("d1", "me", upgrade=Remediation(retry=True)), Observed(FAILED, "d1", UP, upgrade_failures=2),
     S.RETRYING, "upgrade failed (2x)"),
    (Desired("d1", "me", upgrade=Remediation(retries=2)), Observed(FAILED, "d1", UP, upgrade_failures=1),
     S.FAILED, "upgrade failed (1x)"),
    (Desired("d1", "me", tests=True, install=Remediation(retries=1)),
     Observed(Release("deployed", "me", "d1", 1, tests="failed"), "d1", IN, install_failures=1), S.FAILED,
     "install failed (1x)"),
    (D, Observed(FAILED, "d1", UP, upgrade_failures=1), S.EXHAUSTED, "upgrade failed 1 time(s)"),
    (D, Observed(None, "d1", IN, install_failures=1), S.EXHAUSTED, "install failed 1 time(s)"),
    (D, Observed(FAILED, "d0", UP, upgrade_failures=1), S.OUT_OF_SYNC, "release is failed"),  # another config
    (Desired("d1", "me", chart_name="api"), Observed(OURS), S.CHART_RENAMED, "the chart is now api"),
    (Desired("d1", "me", chart_name="api", reinstall_on_rename=False), Observed(OURS), S.IN_SYNC, "revision 3"),
    (D, Observed(Release("failed", "me", "d1", 1)), S.NEVER_DEPLOYED, "release is failed and was never deployed"),
    (D, Observed(OURS, force_requested=True), S.FORCED, "forced upgrade"),
    (D, Observed(Release("deployed", "me", "d0", 3, 2)), S.OUT_OF_SYNC, "configuration changed"),
    (Desired("d1", "me", drift_mode="warn"), Observed(OURS, drift=("Deployment/web: /spec",)), S.DRIFTED,
     "drift: Deployment/web: /spec"),
    (Desired("d1", "me", drift_mode="disabled"), Observed(OURS, drift=("Deployment/web: /spec",)), S.IN_SYNC,
     "revision 3"),
    (Desired("d1", "me", tests=True), Observed(OURS), S.UNTESTED, "revision 3 has not been tested"),
    (Desired("d1", "me", tests=True), Observed(Release("deployed", "me", "d1", 3, tests="passed")), S.IN_SYNC,
     "deployed at revision 3"),
])
def test_classify_names_the_state_of_the_release(desired: Desired, observed: Observed, status: ReleaseStatus,
                                                 reason: str) -> None:
    state = classify(desired, observed)
    assert state.status is status and reason in state.reason


def test_every_state_has_an_action() -> None:
    assert set(CHOICES) == set(ReleaseStatus)


@pytest.mark.parametrize("decision,stop", [
    (Decision(Action.NONE, Reason.UP_TO_DATE, ""), Stop.SETTLED),
    (Decision(Action.NONE, Reason.SUSPENDED, ""), Stop.SETTLED),
    (Decision(Action.NONE, Reason.DRIFT_DETECTED, ""), Stop.SETTLED),
    (Decision(Action.REFUSE, Reason.OWNED_ELSEWHERE, ""), Stop.REFUSED),
    (Decision(Action.STALL, Reason.RETRIES_EXCEEDED, ""), Stop.STALLED),
    (Decision(Action.NONE, Reason.DEPENDENCY_NOT_READY, ""), Stop.WAITING),
    (Decision(Action.NONE, Reason.RETRYING, ""), Stop.RETRY_LATER),
    (Decision(Action.UNLOCK, Reason.LOCKED, ""), None),
])
def test_a_turn_ends_with_a_decision_that_runs_nothing(decision: Decision, stop: Stop | None) -> None:
    assert ends_turn(decision) is stop


def test_every_action_either_runs_or_ends_the_turn() -> None:
    for action in Action:
        assert (ends_turn(Decision(action, Reason.UPGRADING, "")) is None) == (action in RUNS), action


def test_a_retry_waits_for_its_interval() -> None:
    desired = Desired("d1", "me", upgrade=Remediation(retry=True, retry_interval=90))
    decision = decide(desired, Observed(FAILED, "d1", UP, upgrade_failures=1, retry_in=30))
    assert (decision.action, decision.message) == (Action.NONE, "upgrade failed (1x); retrying after 1m30s")
    assert ends_turn(decision) is Stop.RETRY_LATER
