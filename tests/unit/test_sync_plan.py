"""A ConfigSync's plan, decided without I/O (helmop.decisions.sync): the objects as applied, what is refused,
the apply and prune order, and the inventory after a sync that applied some, failed some or pruned some."""

from __future__ import annotations

from helmop.api.manifests import Manifest
from helmop.api.status.configsync import AppliedObject
from helmop.decisions.sync import (
    OWNER_LABEL,
    OWNER_UID,
    Marks,
    ObjectId,
    claims,
    desired,
    entry,
    inventory_after,
    owner_label,
    to_prune,
)

MARKS = Marks(label="team.apps", uid="uid-1", origin={"kustomize.toolkit.fluxcd.io/name": "apps"})


def manifest(kind: str, name: str, api_version: str = "v1", namespace: str = "", line: int = 1) -> Manifest:
    meta = {"name": name, **({"namespace": namespace} if namespace else {}), "labels": {"app": "x"}}
    return Manifest({"apiVersion": api_version, "kind": kind, "metadata": meta}, f"apps/all.yaml:{line}")


def test_objects_are_placed_and_marked() -> None:
    found = [manifest("ConfigMap", "a"), manifest("ConfigMap", "b", namespace="other"),
             manifest("Namespace", "n"), manifest("Widget", "w", "example.com/v1")]  # a kind no API serves yet
    want = desired(found, {("v1", "ConfigMap"): True, ("v1", "Namespace"): False}, "team", MARKS)
    assert set(want.objects) == {
        ObjectId("v1", "ConfigMap", "team", "a"), ObjectId("v1", "ConfigMap", "other", "b"),
        ObjectId("v1", "Namespace", "", "n"), ObjectId("example.com/v1", "Widget", "team", "w")}
    assert want.cluster_scoped == {ObjectId("v1", "Namespace", "", "n")}
    cm = want.objects[ObjectId("v1", "ConfigMap", "team", "a")]
    assert cm["metadata"]["labels"] == {"app": "x", OWNER_LABEL: "team.apps",
                                        "kustomize.toolkit.fluxcd.io/name": "apps"}
    assert cm["metadata"]["annotations"] == {OWNER_UID: "uid-1"}
    assert "labels" in found[0].obj["metadata"] and OWNER_LABEL not in found[0].obj["metadata"]["labels"]  # a copy
    assert want.origins[ObjectId("v1", "ConfigMap", "team", "a")] == "apps/all.yaml:1"


def test_an_object_defined_twice_is_said_with_where() -> None:
    want = desired([manifest("ConfigMap", "a", line=1), manifest("ConfigMap", "a", line=9)], {}, "team", MARKS)
    assert want.duplicates == ("ConfigMap/team/a: defined twice (apps/all.yaml:9)",)


def test_a_long_owner_label_becomes_a_digest() -> None:
    assert owner_label("team", "apps") == "team.apps"
    long = owner_label("team", "a" * 70)
    assert len(long) == 40 and long == owner_label("team", "a" * 70) != owner_label("team", "b" * 70)


def test_claims_name_every_object_of_someone_else() -> None:
    want = desired([manifest("ConfigMap", "mine"), manifest("ConfigMap", "theirs"), manifest("ConfigMap", "new")],
                   {}, "team", MARKS)
    live = {ObjectId("v1", "ConfigMap", "team", "mine"): {"metadata": {"annotations": {OWNER_UID: "uid-1"}}},
            ObjectId("v1", "ConfigMap", "team", "theirs"): {"metadata": {"annotations": {OWNER_UID: "uid-2"}}},
            ObjectId("v1", "ConfigMap", "team", "new"): None}
    reason, message = claims(want, live, MARKS, (), adopt=False)
    assert reason == "ObjectOwnedElsewhere" and "theirs is managed by another ConfigSync (uid uid-2)" in message
    assert "mine" not in message and "new" not in message
    assert claims(want, {**live, ObjectId("v1", "ConfigMap", "team", "theirs"): None}, MARKS, (),
                  adopt=False) is None


def test_an_object_recreated_by_someone_else_is_not_claimed() -> None:
    want = desired([manifest("ConfigMap", "a")], {}, "team", MARKS)
    oid = ObjectId("v1", "ConfigMap", "team", "a")
    inventory = (entry(oid, {oid: "applied-uid"}),)
    copied = {"metadata": {"uid": "other-uid", "annotations": {OWNER_UID: "uid-1"}}}
    assert claims(want, {oid: copied}, MARKS, inventory, adopt=False)[0] == "ObjectOwnedElsewhere"
    kept = {"metadata": {"uid": "applied-uid", "annotations": {OWNER_UID: "uid-1"}}}
    assert claims(want, {oid: kept}, MARKS, inventory, adopt=False) is None


A, B, GONE = (ObjectId("v1", "ConfigMap", "team", n) for n in ("a", "b", "gone"))
BEFORE = (AppliedObject(api_version="v1", kind="ConfigMap", namespace="team", name="a", uid="ua"),
          AppliedObject(api_version="v1", kind="ConfigMap", namespace="team", name="gone", uid="ug"))


def test_the_inventory_after_a_full_sync_holds_what_is_applied() -> None:
    want = desired([manifest("ConfigMap", "a"), manifest("ConfigMap", "b")], {}, "team", MARKS)
    assert to_prune([A, GONE], list(want.objects)) == [GONE]
    after = inventory_after(want, BEFORE, {A: "ua", B: "ub"}, [])
    assert [(x.name, x.uid) for x in after] == [("a", "ua"), ("b", "ub")]


def test_an_object_refused_at_its_first_apply_is_not_inventoried_but_one_applied_before_is() -> None:
    want = desired([manifest("ConfigMap", "a"), manifest("ConfigMap", "b")], {}, "team", MARKS)
    after = inventory_after(want, BEFORE, {}, [GONE])  # nothing applied this time
    assert [(x.name, x.uid) for x in after] == [("a", "ua"), ("gone", "ug")]


def test_what_left_git_stays_inventoried_until_it_is_pruned() -> None:
    """A sync whose apply failed prunes nothing: what left git stays in the inventory, so a later sync prunes
    it (dropping it would orphan it in the cluster)."""
    want = desired([manifest("ConfigMap", "a")], {}, "team", MARKS)
    assert [x.name for x in inventory_after(want, BEFORE, {A: "ua"}, [GONE])] == ["a", "gone"]
    assert [x.name for x in inventory_after(want, BEFORE, {A: "ua"}, [])] == ["a"]
