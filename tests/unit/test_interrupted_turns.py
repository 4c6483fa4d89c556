"""A turn under way stops when its object is suspended or deleted (controllers.handlers.Dispatcher): a listing or a
fetch that a hostile server keeps going (a Bucket "truncated" forever) holds neither the suspension nor the
clean-up back. The next turn comes at once, an Event says why; a turn in a helm action is left to its
supersession, and a spec change that is neither leaves the turn alone."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from helmop.api.kinds import FINALIZER, HELMOP
from helmop.api.objects import ObjectKey
from helmop.api.settings import Settings
from helmop.api.status.sources import BucketStatus
from helmop.api.tenancy import Tenancy
from helmop.controllers.handlers import Dispatcher
from helmop.controllers.outcome import DONE, Outcome
from helmop.controllers.registration import Controller
from helmop.controllers.turn import Turn
from helmop.decisions.specs import Reader
from helmop.infra.metrics import Metrics

KIND = HELMOP.bucket
KEY = ObjectKey(KIND.key, "apps", "cfg")


async def eventually_async(check: Callable[[], bool], timeout: float = 5.0) -> None:
    """Let the loop run until ``check`` holds (an AssertionError after ``timeout`` seconds)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "not within the time"
        await asyncio.sleep(0.01)


def _body(generation: int, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": KIND.api_version, "kind": KIND.kind,
            "metadata": {"name": "cfg", "namespace": "apps", "uid": "u1", "resourceVersion": str(generation),
                         "generation": generation, "finalizers": [FINALIZER]},
            "spec": {"interval": "10m", **spec}}


def _deleting(generation: int, **spec: Any) -> dict[str, Any]:
    body = _body(generation, **spec)
    body["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return body


class _Events:
    def __init__(self) -> None:
        self.posted: list[tuple[str, str]] = []

    async def normal(self, _obj: dict[str, Any], reason: str, message: str) -> None:
        self.posted.append((reason, message))


def _dispatcher(clean_up: asyncio.Event | None = None) -> tuple[Dispatcher, Controller, list[dict[str, Any]],
                                                                  _Events]:
    """A dispatcher of one kind whose turns never end unless suspended, and whose clean-up waits for
    ``clean_up`` (when given)."""
    started: list[dict[str, Any]] = []

    async def reconcile(turn: Turn[dict[str, Any], BucketStatus]) -> Outcome:
        body = turn.body
        started.append(body)
        if not body["spec"].get("suspend"):
            await asyncio.Event().wait()  # a listing that never ends
        return DONE

    async def finalize(turn: Turn[dict[str, Any], BucketStatus]) -> Outcome:
        started.append({**turn.body, "finalized": True})
        if clean_up is not None:
            await clean_up.wait()
        return DONE

    events = _Events()
    services = SimpleNamespace(metrics=Metrics(), notifier=SimpleNamespace(), events=events,
                               kube=SimpleNamespace(merge_patch=_patched), tenancy=Tenancy(),
                               remotes=SimpleNamespace(held={}))
    dispatcher = Dispatcher(services, Settings())  # type: ignore[arg-type]
    # a kind whose turn sees the suspension itself (it must run to be seen stopping)
    controller = dispatcher.controllers[KIND.key] = Controller(
        KIND, BucketStatus, 600.0, SimpleNamespace(reconcile=reconcile, finalize=finalize),
        reader=Reader(lambda _kind, this: this.spec),
        suspended=lambda _turn: False)
    return dispatcher, controller, started, events


async def test_a_suspension_stops_the_turn_under_way_and_the_next_comes_at_once() -> None:
    dispatcher, controller, started, events = _dispatcher()
    try:
        dispatcher.seen(controller, _body(1), "ADDED")
        await eventually_async(lambda: len(started) == 1)
        dispatcher.seen(controller, _body(2, suspend=True), "MODIFIED")
        await eventually_async(lambda: len(started) == 2 and KEY not in dispatcher.scheduler.running)
        assert started[1]["spec"]["suspend"] is True
        assert events.posted == [("ReconcileInterrupted", "the reconcile under way was stopped: the Bucket is "
                                                          "suspended")]
        assert not dispatcher.interrupted
    finally:
        await dispatcher.stop()


async def test_a_deletion_stops_it_and_cleans_up() -> None:
    dispatcher, controller, started, events = _dispatcher()
    try:
        dispatcher.seen(controller, _body(1), "ADDED")
        await eventually_async(lambda: len(started) == 1)
        dispatcher.seen(controller, _deleting(2), "MODIFIED")
        await eventually_async(lambda: len(started) == 2)
        assert started[1].get("finalized") and events.posted[0][1].endswith("the Bucket is being deleted")
    finally:
        await dispatcher.stop()


async def _patched(_path: str, body: dict[str, Any]) -> dict[str, Any]:
    return body


async def test_other_changes_and_helm_actions_are_left_to_run() -> None:
    dispatcher, controller, started, events = _dispatcher()
    try:
        dispatcher.seen(controller, _body(1), "ADDED")
        await eventually_async(lambda: len(started) == 1)
        task = dispatcher.scheduler.running[KEY]
        dispatcher.seen(controller, _body(2, prefix="apps/"), "MODIFIED")  # neither suspended nor deleted
        dispatcher.ctx.memory.committed.add(KEY)  # in helm: its supersession stops helm, not a cancellation
        dispatcher.seen(controller, _body(3, suspend=True), "MODIFIED")
        # Task.cancel counts at once what it asks for (delivered at the turn's next step): none asked
        assert task.cancelling() == 0 and not dispatcher.interrupted and not task.done()
        assert dispatcher.ctx.memory.superseded(KEY).is_set()  # what does tell it
    finally:
        await dispatcher.stop()


async def test_a_suspension_then_a_deletion_at_once_still_clean_up() -> None:
    """Two halts before the turn sees the first: one cancellation, one Event, and the clean-up's turn follows (a
    second cancel would have looked like the operator stopping, and no turn would have come)."""
    dispatcher, controller, started, events = _dispatcher()
    try:
        dispatcher.seen(controller, _body(1), "ADDED")
        await eventually_async(lambda: len(started) == 1)
        task = dispatcher.scheduler.running[KEY]
        dispatcher.seen(controller, _body(2, suspend=True), "MODIFIED")
        dispatcher.seen(controller, _deleting(3, suspend=True), "MODIFIED")
        assert task.cancelling() == 1
        await eventually_async(lambda: any(body.get("finalized") for body in started))
        assert [reason for reason, _ in events.posted] == ["ReconcileInterrupted"]
    finally:
        await dispatcher.stop()


async def test_a_later_generation_of_a_deleting_object_leaves_its_clean_up_alone() -> None:
    """A spec change of an object already being deleted cancels nothing: a tenant writing it over and over would
    otherwise restart its clean-up (a prune, a wait for termination) each time."""
    clean_up = asyncio.Event()
    dispatcher, controller, started, events = _dispatcher(clean_up)
    try:
        dispatcher.seen(controller, _body(1), "ADDED")
        await eventually_async(lambda: len(started) == 1)
        dispatcher.seen(controller, _deleting(2), "MODIFIED")
        await eventually_async(lambda: any(body.get("finalized") for body in started))
        cleaning = dispatcher.scheduler.running[KEY]
        dispatcher.seen(controller, _deleting(3, prefix="other/"), "MODIFIED")
        assert cleaning.cancelling() == 0 and len(events.posted) == 1
        clean_up.set()
        await eventually_async(lambda: cleaning.done())
        assert not cleaning.cancelled()
    finally:
        await dispatcher.stop()
