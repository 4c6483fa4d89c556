"""Which deployed objects a drift check may pass over (controllers.drift_memory): pure bookkeeping."""

from __future__ import annotations

from helmop.controllers.drift_memory import Clean, DriftMemory, fingerprint

KEY = ("HelmRelease", "apps", "web")
DEPLOY = ("", "apps", "Deployment", "web")  # of the operator's own cluster
TOKEN = (("record-uid", "7"), 1)


def _meta(**changes: object) -> dict[str, object]:
    return {"uid": "u1", "resourceVersion": "10", "generation": 2, "labels": {"app": "web"}, **changes}


def _found_clean(memory: DriftMemory) -> None:
    epoch = memory.epoch(DEPLOY)
    assert epoch is not None
    memory.found(KEY, TOKEN, {DEPLOY: Clean(fingerprint(_meta()), epoch)}, everything=True)


def test_an_object_found_clean_is_passed_over_until_its_spec_or_metadata_changes() -> None:
    memory = DriftMemory()
    memory.watching("", "Deployment", "")
    _found_clean(memory)
    assert memory.all_unchanged(KEY, TOKEN) == 1
    memory.seen(DEPLOY, _meta(resourceVersion="11"))  # a status update: same generation, same metadata
    assert memory.all_unchanged(KEY, TOKEN) == 1
    memory.seen(DEPLOY, _meta(resourceVersion="12", generation=3))  # kubectl scale
    assert memory.clean(KEY, TOKEN, DEPLOY) is None and memory.all_unchanged(KEY, TOKEN) == 0


def test_labels_deletion_and_a_new_record_or_generation_are_changes() -> None:
    for change in ({"labels": {"app": "other"}}, {"deletionTimestamp": "2026-01-01T00:00:00Z"}, {"uid": "u2"}):
        memory = DriftMemory()
        memory.watching("", "Deployment", "")
        _found_clean(memory)
        memory.seen(DEPLOY, _meta(**change))
        assert memory.clean(KEY, TOKEN, DEPLOY) is None, change
    memory = DriftMemory()
    memory.watching("", "Deployment", "")
    _found_clean(memory)
    memory.seen(DEPLOY, None)  # deleted
    assert memory.clean(KEY, TOKEN, DEPLOY) is None
    memory = DriftMemory()
    memory.watching("", "Deployment", "")
    _found_clean(memory)
    assert memory.clean(KEY, (("record-uid", "8"), 1), DEPLOY) is None  # a new revision of the release
    assert memory.clean(KEY, (("record-uid", "7"), 2), DEPLOY) is None  # new ignore rules (the spec)


def test_nothing_is_passed_over_across_a_broken_watch_or_without_one() -> None:
    memory = DriftMemory()
    assert memory.epoch(DEPLOY) is None  # not watched (lockdown): always compared
    memory.watching("", "Deployment", "")
    _found_clean(memory)
    memory.lost("", "Deployment", "")
    assert memory.clean(KEY, TOKEN, DEPLOY) is None
    memory.watching("", "Deployment", "")  # listed again: what changed in between was not seen
    assert memory.clean(KEY, TOKEN, DEPLOY) is None
    memory.watching("", "Deployment", "apps")  # a watch of the one namespace covers it too
    memory.lost("", "Deployment", "")
    assert memory.epoch(DEPLOY) is not None


def test_what_nobody_observes_is_forgotten() -> None:
    memory = DriftMemory()
    memory.watching("", "Deployment", "")
    _found_clean(memory)
    memory.seen(DEPLOY, _meta(generation=9))
    memory.unobserved([DEPLOY])
    memory.forget(KEY)
    assert memory.all_unchanged(KEY, TOKEN) == 0 and not memory._now


def test_an_object_no_longer_observed_is_not_trusted_when_observed_again() -> None:
    memory = DriftMemory()
    memory.watching("", "Deployment", "")
    _found_clean(memory)
    memory.unobserved([DEPLOY])  # its changes went unseen meanwhile
    assert memory.clean(KEY, TOKEN, DEPLOY) is None and memory.all_unchanged(KEY, TOKEN) == 0


def test_a_remote_object_is_passed_over_on_its_own_clusters_watch_only() -> None:
    memory = DriftMemory()
    remote = ("tenant/0123abcd", "apps", "Deployment", "web")  # the same kind, namespace and name elsewhere
    memory.watching("", "Deployment", "")  # the operator's own cluster's watch
    assert memory.epoch(remote) is None
    memory.watching("tenant/0123abcd", "Deployment", "apps")  # the remote's, of that namespace
    epoch = memory.epoch(remote)
    assert epoch is not None
    memory.found(KEY, TOKEN, {remote: Clean(fingerprint(_meta()), epoch)}, everything=True)
    assert memory.all_unchanged(KEY, TOKEN) == 1
    memory.seen(DEPLOY, _meta(generation=9))  # a change of the local object is not one of the remote's
    assert memory.all_unchanged(KEY, TOKEN) == 1
    memory.lost("tenant/0123abcd", "Deployment", "apps")  # the remote closed (or its watch broke)
    assert memory.all_unchanged(KEY, TOKEN) == 0 and memory.epoch(remote) is None
