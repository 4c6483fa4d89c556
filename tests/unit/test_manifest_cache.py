"""Parsed manifests kept by release record (helm.releases.Manifests): parsed once per record version, each caller
gets objects of its own, bounded, and a record whose YAML has no JSON form is parsed every time, not kept."""

from __future__ import annotations

from typing import Any

from helmop.helm.releases import Manifests


def _secret(uid: str, version: str) -> dict[str, Any]:
    return {"metadata": {"uid": uid, "resourceVersion": version}}


def test_a_record_is_parsed_once_per_version_and_callers_get_their_own_objects() -> None:
    parses: list[str] = []

    def parse() -> list[dict[str, Any]]:
        parses.append("x")
        return [{"kind": "ConfigMap", "metadata": {"name": "a"}}]

    cache = Manifests(size=2)
    first = cache.objects(_secret("u", "1"), parse)
    first[0]["metadata"]["namespace"] = "changed by a caller"
    assert cache.objects(_secret("u", "1"), parse) == [{"kind": "ConfigMap", "metadata": {"name": "a"}}]
    assert len(parses) == 1
    cache.objects(_secret("u", "2"), parse)  # a new version of the record
    cache.objects(_secret("v", "1"), parse)  # the third: the least recently used goes
    cache.objects(_secret("u", "1"), parse)
    assert len(parses) == 4


def test_what_has_no_json_form_or_no_identity_is_not_kept() -> None:
    parses: list[str] = []

    def forged() -> list[dict[str, Any]]:
        parses.append("x")
        return [{"kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": {"a set"}}}]

    cache = Manifests()
    for secret in (_secret("u", "1"), _secret("u", "1"), _secret("", "")):
        assert cache.objects(secret, forged)[0]["data"] == {"k": {"a set"}}
    assert len(parses) == 3
