"""People's requests as annotations (hostile like any input), and the pure rules of change control: what a pin, an
approval and a deployment window do to a HelmRelease's decision."""

from __future__ import annotations

import json

import pytest

from helmop.api.actions import Action
from helmop.api.changecontrol import parse_change_control
from helmop.api.errors import SpecError
from helmop.api.helmrelease import Remediation
from helmop.api.requests import APPROVE, ASKED, PIN, ROLLBACK, Asked, Request, encode, read
from helmop.api.status import Handled, Pin
from helmop.api.status.helmrelease import HelmReleaseStatus
from helmop.decisions import Desired, Observed, Reason, Release, decide
from helmop.decisions import changecontrol as rules

AT = "2026-11-29T03:00:00Z"


def test_a_request_starts_with_its_author_and_reads_back() -> None:
    request = Request(Asked.ROLLBACK, "alice@example.com", AT, "the cache leaks {x}", "3")
    text = encode(request)
    assert text.startswith('{"by":"alice@example.com",')  # what the admission policy matches
    assert read({ROLLBACK: text}, ROLLBACK) == request
    now = Request(Asked.APPROVE_NOW, "ops", AT, revision="sha256:1")
    assert '"now":true' in encode(now) and read({APPROVE: encode(now)}, APPROVE) == now
    assert json.loads(encode(Request(Asked.FORCE, "ops", AT)))["action"] == "force"


@pytest.mark.parametrize("value", [
    None, "", "not json", "[1]", '"a string"', '{"by": 1, "at": "t"}', '{"by": "a"}',  # no at
    '{"by": "a", "at": "t", "reason": ["x"]}', '{"by": "a", "at": "t", "revision": true}',
    '{"by": "a", "at": "t", "revision": {"x": 1}}', '{"by": "a", "at": "' + "t" * 5000 + '"}',
])
def test_what_is_not_a_request_is_none(value: object) -> None:
    assert read({PIN: value}, PIN) is None


def test_an_asked_request_names_a_known_action_and_long_fields_are_cut() -> None:
    assert read({ASKED: '{"by": "a", "at": "t", "action": "delete-everything"}'}, ASKED) is None
    long = read({ASKED: json.dumps({"by": "b" * 300, "at": "t", "action": "suspend", "reason": "r" * 2000})}, ASKED)
    assert long is not None and long.action is Asked.SUSPEND and len(long.by) == 256 and len(long.reason) == 1024


DIGEST = "sha256:new"


def _desired(**changes: object) -> Desired:
    return Desired(config_digest="new", owner="o", digest=DIGEST, generation=2, **changes)  # type: ignore[arg-type]


def _observed(release: Release | None, control: rules.Control, **changes: object) -> Observed:
    return Observed(release=release, control=control, **changes)  # type: ignore[arg-type]


DEPLOYED_OLD = Release("deployed", "o", "old", 3, last_good=2)


def test_a_change_waits_for_approval_then_for_a_window() -> None:
    waiting = decide(_desired(), _observed(DEPLOYED_OLD, rules.Control(approved=False)))
    assert (waiting.action, waiting.reason) == (Action.NONE, Reason.AWAITING_APPROVAL) and DIGEST in waiting.message
    closed = decide(_desired(), _observed(DEPLOYED_OLD, rules.Control(window="inside the deny window x")))
    assert (closed.action, closed.reason) == (Action.NONE, Reason.OUTSIDE_WINDOW)
    assert decide(_desired(), _observed(None, rules.Control(approved=False))).reason is Reason.AWAITING_APPROVAL
    assert decide(_desired(), _observed(DEPLOYED_OLD, rules.Control())).action is Action.UPGRADE


def test_remediation_and_drift_correction_go_through_a_closed_window() -> None:
    failed = Release("failed", "o", "new", 4, last_good=3)
    control = rules.Control(approved=False, window="closed")
    remediation = decide(_desired(upgrade=Remediation(retries=3)),
                         _observed(failed, control, last_attempted_digest="new", last_action=Action.UPGRADE,
                                   upgrade_failures=1))
    assert remediation.action is Action.ROLLBACK and remediation.remediation
    drifted = decide(_desired(drift_mode="enabled"),
                     _observed(Release("deployed", "o", "new", 4), control, drift=("Deployment/x: /spec",)))
    assert drifted.action is Action.CORRECT


def test_a_pin_holds_over_upgrades_remediation_and_forced_upgrades() -> None:
    pin = Pin(action="rollback", by="alice", at=AT, revision="4", digest=DIGEST)
    held = decide(_desired(upgrade=Remediation(retries=3)),
                  _observed(Release("failed", "o", "old", 4, last_good=2), rules.Control(pin=pin),
                            force_requested=True, last_attempted_digest="new", upgrade_failures=1))
    assert (held.action, held.reason) == (Action.NONE, Reason.PINNED)
    assert "pinned at revision 4 by alice" in held.message
    drift = decide(_desired(drift_mode="enabled"),
                   _observed(DEPLOYED_OLD, rules.Control(pin=pin), drift=("Deployment/x: /spec/replicas",)))
    assert drift.action is Action.CORRECT  # toward the pinned revision, which the release runs


def test_a_rollback_goes_to_the_revision_asked_or_the_one_before() -> None:
    asked = Request(Asked.ROLLBACK, "bob", AT, revision="1")
    to_one = decide(_desired(), _observed(DEPLOYED_OLD, rules.Control(rollback=asked)))
    assert (to_one.action, to_one.target_revision, to_one.asked) == (Action.ROLLBACK, 1, asked)
    previous = decide(_desired(), _observed(DEPLOYED_OLD, rules.Control(rollback=Request(Asked.ROLLBACK, "b", AT))))
    assert previous.target_revision == 2
    nowhere = decide(_desired(), _observed(Release("deployed", "o", "old", 1),
                                           rules.Control(rollback=Request(Asked.ROLLBACK, "b", AT))))
    assert nowhere.action is Action.NONE and "no revision to roll back to" in nowhere.message


def test_a_pin_ends_when_the_desired_state_moves_or_on_unpin() -> None:
    pinned = HelmReleaseStatus(pin=Pin(action="pin", by="a", at=AT, revision="3", digest="sha256:old"))
    moved, said = rules.settle(pinned, rules.Asks(), DIGEST)
    assert moved.pin is None and said[0][1] == "PinEnded" and "desired state changed" in said[0][2]
    kept, said = rules.settle(pinned, rules.Asks(), "sha256:old")
    assert kept.pin is not None and not said
    unpin = Request(Asked.UNPIN, "carol", "2026-11-29T04:00:00Z", "fixed in git")
    ended, said = rules.settle(pinned, rules.Asks(unpin=unpin), "sha256:old")
    assert ended.pin is None and "unpinned by carol" in said[0][2]
    assert ended.last_handled_request == Handled(action="unpin", by="carol", at=unpin.at, reason="fixed in git")
    again, said = rules.settle(ended.but(pin=pinned.pin), rules.Asks(unpin=unpin), "sha256:old")
    assert again.pin is not None and not said  # an unpin acts once


def test_an_approval_lets_exactly_its_revision_through_and_only_when_attested() -> None:
    approve = Request(Asked.APPROVE, "dave", AT, revision=DIGEST)
    status, said = rules.settle(HelmReleaseStatus(), rules.Asks(approve=approve), DIGEST)
    settings = rules.Settings(approval=True, closed="closed")
    assert rules.control(status, rules.Asks(approve=approve), DIGEST, settings).approved
    assert not rules.control(status, rules.Asks(approve=approve), "sha256:newer", settings).approved
    assert rules.control(status, rules.Asks(), DIGEST, settings).window == "closed"  # approve, not approve --now
    assert said == (("Normal", "Approved", f"revision {DIGEST} approved by dave at {AT}"),)
    untrusted, said = rules.settle(HelmReleaseStatus(), rules.Asks(approve=approve, approvals_trusted=False), DIGEST)
    assert untrusted.approved is None and said[0][1] == "ApprovalRefused"
    now = Request(Asked.APPROVE_NOW, "dave", AT, revision=DIGEST)
    overridden, _ = rules.settle(HelmReleaseStatus(), rules.Asks(approve=now), DIGEST)
    assert rules.control(overridden, rules.Asks(approve=now), DIGEST, settings).window == ""


def test_a_rollback_or_pin_of_a_release_not_installed_is_answered() -> None:
    for asked in (rules.Control(rollback=Request(Asked.ROLLBACK, "b", AT)),
                  rules.Control(pin_request=Request(Asked.PIN, "b", AT))):
        decision = decide(_desired(), _observed(None, asked))
        assert (decision.action, decision.reason) == (Action.NONE, Reason.ROLLBACK_REQUESTED)
        assert decision.asked is not None and "not installed" in decision.message


def test_flux_kinds_take_change_control_from_the_spec_helmop_serves_or_from_annotations() -> None:
    by_spec = parse_change_control({"approval": {"required": True}}, {}, flux=True)
    by_note = parse_change_control({}, {"helmop.dev/approval": "required",
                                        "helmop.dev/windows": "[{schedule: '0 9 * * 1', duration: 8h, mode: allow}]"},
                                   flux=True)
    assert by_spec.approval and by_note.approval and len(by_note.windows) == 1 and not by_note.namespace_default
    assert not parse_change_control({}, {"helmop.dev/approval": "required"}, flux=False).approval  # helmop's: spec
    with pytest.raises(SpecError, match="must be 'required'"):
        parse_change_control({}, {"helmop.dev/approval": "yes"}, flux=True)
