"""The one controller contract: every kind's reconcile and clean-up answer with an Outcome, and one policy
turns it into the next delay (the failure backoff for every kind, the interval after a success)."""

from __future__ import annotations

from typing import Any

from helmop.api.conditions import condition_of
from helmop.api.redaction import safe_url
from helmop.api.settings import Backoff, Backoffs
from helmop.controllers.handlers import _Failures
from helmop.controllers.outcome import DONE, FAILED, after

KEY = ("ConfigSync", "team", "apps")


def test_backoff_doubles_up_to_its_limit() -> None:
    backoff = Backoff(2.0, 300.0)
    assert [backoff.after(n) for n in (1, 2, 3, 8, 9, 50)] == [2.0, 4.0, 8.0, 256.0, 300.0, 300.0]


def test_failures_back_off_and_a_success_resets_them() -> None:
    failures = _Failures(Backoffs(failure=Backoff(1.0, 10.0), error=Backoff(5.0, 60.0)))
    assert [failures.delay(KEY, FAILED, 600.0) for _ in range(5)] == [1.0, 2.0, 4.0, 8.0, 10.0]
    assert failures.delay(KEY, DONE, 600.0) == 600.0  # done: the object's interval
    assert failures.delay(KEY, FAILED, 600.0) == 1.0  # the count started again
    assert failures.delay(KEY, after(0.5), 600.0) == 0.5  # waiting for something under way
    assert failures.unexpected(KEY) == 5.0 and failures.unexpected(KEY) == 10.0
    assert failures.delay(("ConfigSync", "team", "other"), FAILED, 600.0) == 1.0  # counted per object


def test_condition_lookup() -> None:
    obj = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert condition_of(obj, "Ready")["status"] == "True"
    assert condition_of(obj, "Stalled") == {} and condition_of({}, "Ready") == {}


def test_urls_lose_their_credentials() -> None:
    assert safe_url("https://user:pw@git.example:8443/a.git?x=1") == "https://git.example:8443/a.git?x=1"
    assert safe_url("https://git.example/a.git") == "https://git.example/a.git"


async def test_event_repeats_are_dropped_and_the_memory_of_them_is_bounded(monkeypatch: Any) -> None:
    from helmop.infra import events

    posted: list[str] = []

    class Kube:
        async def request(self, _method: str, _path: str, body: dict[str, Any]) -> None:
            posted.append(f"{body['involvedObject']['uid']}:{body['reason']}")

    monkeypatch.setattr(events, "REMEMBERED", 2)
    recorder = events.Recorder(Kube())  # type: ignore[arg-type]

    def obj(uid: str) -> dict[str, Any]:
        return {"kind": "HelmRelease", "metadata": {"uid": uid, "name": uid, "namespace": "ns"}}

    for uid in ("a", "a", "b", "c", "a"):
        await recorder.normal(obj(uid), "Installed", "done")
    assert posted == ["a:Installed", "b:Installed", "c:Installed", "a:Installed"]  # "a" was forgotten
    assert len(recorder._last) == 2
