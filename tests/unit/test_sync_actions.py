"""A ConfigSync's sync decided without I/O (helmop.decisions.syncplan): refused or not and what it prunes, then
what becomes of each object of a stage once it was read and dry-run; and every status, message and Event of its
turn (helmop.decisions.settle.configsync)."""

from __future__ import annotations

from typing import Any

from helmop.api.status import READY, RECONCILING, STALLED
from helmop.api.status.configsync import AppliedObject, ConfigSyncStatus
from helmop.decisions.settle import configsync as settle
from helmop.decisions.sync import OWNER_UID, Marks, ObjectId, Refusal, desired
from helmop.decisions.syncplan import FORCE, Act, Failure, Rules, Seen, Step, action, planned, prepared, staged

from .test_sync_plan import manifest

MARKS = Marks(label="team.apps", uid="uid-1")
A, B, GONE = (ObjectId("v1", "ConfigMap", "team", n) for n in ("a", "b", "gone"))
INVENTORY = (AppliedObject(api_version="v1", kind="ConfigMap", namespace="team", name="gone", uid="ug"),)
SSA = "kustomize.toolkit.fluxcd.io/ssa"


def cm(data: str, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "team", **meta},
            "data": {"k": data}}


def test_a_plan_prunes_what_left_the_source_unless_it_is_refused() -> None:
    want = desired([manifest("ConfigMap", "a"), manifest("ConfigMap", "b")], {}, "team", MARKS)
    mine = {"metadata": {"annotations": {OWNER_UID: "uid-1"}}}
    plan = planned(want, {A: mine, B: None}, MARKS, INVENTORY, confined=None, adopt=False, prune=True)
    assert plan.refusal is None and plan.prune == (GONE,)
    assert planned(want, {A: mine, B: None}, MARKS, INVENTORY, confined=None, adopt=False, prune=False).prune == ()
    theirs = {"metadata": {"annotations": {OWNER_UID: "uid-2"}}}
    refused = planned(want, {A: theirs, B: None}, MARKS, INVENTORY, confined=None, adopt=False, prune=True)
    assert refused.refusal is not None and refused.refusal.reason == "ObjectOwnedElsewhere" and refused.prune == ()
    confined = Refusal("ClusterScopedObject", "outside")
    assert planned(want, {}, MARKS, INVENTORY, confined=confined, adopt=False, prune=True).refusal == confined


def test_an_object_someone_else_has_is_no_refusal_when_the_sync_leaves_it_alone() -> None:
    want = desired([manifest("ConfigMap", "a")], {}, "team", MARKS)
    theirs = {"metadata": {"annotations": {OWNER_UID: "uid-2", SSA: "Ignore"}}}
    assert planned(want, {A: theirs}, MARKS, (), confined=None, adopt=False, prune=True).refusal is None


def test_before_a_dry_run_what_kubectl_wrote_is_taken_over_unless_merged() -> None:
    kubectl = {"manager": "kubectl-edit", "operation": "Update", "fieldsV1": {"f:data": {}}}
    live = cm("x", managedFields=[kubectl])
    assert prepared(cm("x"), live)[0] == "" and prepared(cm("x"), live)[1]
    assert prepared(cm("x", annotations={SSA: "Merge"}), live) == ("", [])
    assert prepared(cm("x"), None) == ("", [])
    assert prepared(cm("x", annotations={SSA: "Ignore"}), live) == (f"{SSA}: Ignore", [])


def test_each_object_is_created_configured_left_or_skipped_as_its_dry_run_says() -> None:
    live = cm("old", uid="u-a")
    assert action(A, cm("new"), Seen(None, dry_run=cm("new")), Rules()).act is Act.CREATE
    same = action(A, cm("old"), Seen(live, dry_run=cm("old", uid="u-a")), Rules())
    assert not isinstance(same, str) and same.act is Act.UNCHANGED and same.uid == "u-a"
    changed = action(A, cm("new"), Seen(live, dry_run=cm("new", uid="u-a")), Rules())
    assert not isinstance(changed, str) and changed.act is Act.CONFIGURE and changed.payload == cm("new")
    skipped = action(A, cm("new"), Seen(live, skipped=f"{SSA}: Ignore"), Rules())
    assert not isinstance(skipped, str) and skipped.act is Act.SKIP and skipped.why == f"{SSA}: Ignore"


def test_an_immutable_change_recreates_only_when_forced() -> None:
    immutable = Failure(Step.DRY_RUN, 422, "Invalid", "spec.selector: field is immutable")
    seen = Seen(cm("old"), failure=immutable)
    assert action(A, cm("new"), seen, Rules()) == "ConfigMap/team/a dry-run failed (Invalid): " \
                                                  "spec.selector: field is immutable"
    forced = action(A, cm("new"), seen, Rules(force=True))
    assert not isinstance(forced, str) and forced.act is Act.RECREATE
    marked = action(A, cm("new", annotations={FORCE: "Enabled"}), seen, Rules())
    assert not isinstance(marked, str) and marked.act is Act.RECREATE
    assert isinstance(action(A, cm("new"), Seen(None, failure=immutable), Rules(force=True)), str)  # nothing to delete


def test_a_failed_read_or_take_over_is_said_as_such() -> None:
    read = Seen(None, failure=Failure(Step.READ, 404, "NotFound", "no such kind"))
    assert action(A, cm("x"), read, Rules()) == "ConfigMap/team/a dry-run failed (NotFound): no such kind"
    taken = Seen(cm("x"), failure=Failure(Step.TAKE_OVER, 409, "Conflict", "changed"))
    assert action(A, cm("x"), taken, Rules()) == \
        "ConfigMap/team/a metadata.managedFields cleanup failed (Conflict): changed"


def test_a_stage_names_every_refused_object_with_where_it_came_from() -> None:
    want = desired([manifest("ConfigMap", "a", line=1), manifest("ConfigMap", "b", line=5)], {}, "team", MARKS)
    refused = Seen(None, failure=Failure(Step.DRY_RUN, 400, "BadRequest", "no"))
    plan = staged(want, [A, B], {A: Seen(None, dry_run={}), B: refused}, Rules())
    assert [a.oid for a in plan.actions] == [A]
    assert plan.refused == ("ConfigMap/team/b dry-run failed (BadRequest): no (apiVersion v1, apps/all.yaml:5)",)


BEFORE = settle.Before(ConfigSyncStatus(), 3, ("s3cret",))


def test_a_failure_is_masked_said_and_stalled_when_only_a_change_mends_it() -> None:
    report = settle.failed(BEFORE, "BuildFailed", "the value s3cret is wrong", stalled=True)
    ready = report.status.condition(READY)
    assert ready is not None and not ready.true and ready.message == "the value *** is wrong"
    assert report.status.condition(STALLED) is not None and report.stalled and report.outcome
    assert report.event == settle.Event("Warning", "BuildFailed", "the value *** is wrong")
    assert report.status.observed_generation == 3


def test_waiting_for_a_dependency_is_said_once() -> None:
    first = settle.waiting(BEFORE, ["team/db"])
    assert first.event is not None and first.event.message == "waiting for team/db to be Ready (spec.dependsOn)"
    again = settle.waiting(settle.Before(first.status, 3), ["team/db"])
    assert again.event is None and again.status.condition(READY) == first.status.condition(READY)


def test_a_new_revision_is_said_as_progressing() -> None:
    report = settle.attempting(settle.attempted(ConfigSyncStatus(), "main@sha1:1"), 3, "main@sha1:1")
    assert report is not None and not report.outcome
    assert report.status.condition(RECONCILING) is not None
    assert report.event == settle.Event("Normal", "Progressing", "applying revision main@sha1:1")
    applied = ConfigSyncStatus().but(last_applied_revision="main@sha1:1")
    assert settle.attempting(applied, 3, "main@sha1:1") is None


def test_apply_failures_and_refusals_name_the_revision() -> None:
    failed = settle.apply_failed(BEFORE, "r1", [f"e{i}" for i in range(12)], held=2)
    assert failed.event is not None and failed.event.message == (
        "revision r1: e0; e1; e2; e3; e4; e5; e6; e7; e8; e9; 2 object(s) not applied (that stage and those after it)")
    assert not failed.stalled
    refused = settle.refused(BEFORE, "r1", Refusal("ObjectOwnedElsewhere", "refused, nothing applied: x"))
    assert refused.stalled and refused.event == settle.Event("Warning", "ObjectOwnedElsewhere",
                                                             "revision r1: refused, nothing applied: x")


def test_a_sync_is_ready_with_what_it_pruned_said_when_it_changed() -> None:
    pruned = [ObjectId("v1", "ConfigMap", "team", f"c{i}") for i in range(11)]
    report = settle.synced(BEFORE, "r1", 4, pruned)
    assert report.status.last_applied_revision == "r1" and report.event is not None
    assert report.event.message.startswith("applied revision r1: 4 object(s), pruned 11 (ConfigMap/team/c0, ")
    assert report.event.message.endswith("ConfigMap/team/c9, ...)")
    ready = report.status.condition(READY)
    assert ready is not None and ready.true and ready.reason == "ReconciliationSucceeded"
    again = settle.synced(settle.Before(report.status, 3), "r1", 4, [])
    assert again.event is None and again.status.last_applied_revision == "r1"
