"""Which status a turn reads: the one it wrote last wins over watch events from before that write, however late
they come, until the watch shows the write (controllers.context.Memory.watched / with_written, as the Dispatcher
keeps bodies). With three replicas each following every HelmRelease's events, the watch ran seconds behind: a
turn read the status from before the install, observed an inventory of nothing for drift, and the no-op
compared every object of those releases again (732 of 1000 releases' objects in a 3-replica bench run). A turn
that read the written status also ended it, so the next late event won."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from helmop.api.kinds import FINALIZER, HELMOP
from helmop.api.objects import ObjectKey
from helmop.api.settings import Settings
from helmop.api.status.helmrelease import HelmReleaseStatus
from helmop.api.tenancy import Tenancy
from helmop.controllers.context import Memory
from helmop.controllers.handlers import Dispatcher
from helmop.controllers.outcome import DONE, Outcome
from helmop.controllers.registration import Controller
from helmop.controllers.turn import Turn
from helmop.decisions.specs import Reader
from helmop.infra.metrics import Metrics

KIND = HELMOP.helmrelease
KEY = ObjectKey(KIND.key, "apps", "web")
PROGRESSING = {"conditions": [{"type": "Ready", "status": "Unknown", "reason": "Progressing"}]}
INSTALLED = {"conditions": [{"type": "Ready", "status": "Unknown", "reason": "InstallSucceeded"}],
             "inventory": {"entries": [{"id": "apps_web_apps_Deployment", "v": "v1"}]}}
READY = {**INSTALLED, "conditions": [{"type": "Ready", "status": "True", "reason": "InstallSucceeded"}]}


def _body(version: str, status: dict[str, Any] | None = None, uid: str = "u1") -> dict[str, Any]:
    return {"apiVersion": KIND.api_version, "kind": KIND.kind,
            "metadata": {"name": "web", "namespace": "apps", "uid": uid, "resourceVersion": version,
                         "generation": 1, "finalizers": [FINALIZER]},
            "spec": {"interval": "10m"}, **({"status": status} if status is not None else {})}


async def test_a_turn_reads_what_it_wrote_until_the_watch_shows_that_write() -> None:
    read: list[dict[str, Any] | None] = []

    async def reconcile(turn: Turn[dict[str, Any], HelmReleaseStatus]) -> Outcome:
        read.append(turn.body.get("status"))
        return DONE

    services = SimpleNamespace(metrics=Metrics(), notifier=SimpleNamespace(), tenancy=Tenancy())
    dispatcher = Dispatcher(services, Settings())  # type: ignore[arg-type]
    controller = dispatcher.controllers[KIND.key] = Controller(KIND, HelmReleaseStatus, 600.0,
                                                               SimpleNamespace(reconcile=reconcile),
                                                               reader=Reader(lambda _kind, this: this.spec))
    dispatcher.seen(controller, _body("10"), "ADDED")
    # one turn installed the release: three status writes (progress, the install, Ready), the last at version 13
    dispatcher.ctx.memory.status_written(KEY, READY, "u1", "13")
    for version, status in (("11", PROGRESSING), ("12", INSTALLED)):  # their events come late, in order
        await dispatcher.turn(KEY)
        dispatcher.seen(controller, _body(version, status), "MODIFIED")
    await dispatcher.turn(KEY)
    assert read == [READY, READY, READY]  # never the progress mark: its inventory is nothing
    dispatcher.seen(controller, _body("13", READY), "MODIFIED")  # the write's own event: caught up
    later = {**READY, "lastHandledReconcileAt": "now"}  # written by another replica after a shard move, say
    dispatcher.seen(controller, _body("15", later), "MODIFIED")
    await dispatcher.turn(KEY)
    assert read[-1] == later


def test_the_write_is_seen_by_its_resource_version_even_when_the_server_changed_the_status() -> None:
    memory = Memory(wake=lambda key: None)
    memory.status_written(KEY, INSTALLED, "u1", "12")
    kept = {"inventory": INSTALLED["inventory"]}  # what the server kept of it (a field its schema does not have)
    memory.watched(KEY, _body("12", kept))
    assert memory.with_written(KEY, _body("12", kept))["status"] == kept


def test_another_object_of_the_name_and_the_bound_end_it() -> None:
    memory = Memory(wake=lambda key: None)
    memory.status_written(KEY, INSTALLED, "u1", "12")
    memory.watched(KEY, _body("20", uid="u2"))  # deleted and made again
    assert "status" not in memory.with_written(KEY, _body("20", uid="u2"))
    memory.status_written(KEY, INSTALLED, "u1", "12")
    memory.written[KEY] = replace(memory.written[KEY], at=memory.written[KEY].at - memory.written_wins - 1)
    assert "status" not in memory.with_written(KEY, _body("10"))  # a write whose event never came
    memory.status_written(KEY, INSTALLED)  # the object was gone when written: no uid, no version
    memory.watched(KEY, _body("31"))
    assert memory.with_written(KEY, _body("31"))["status"] == INSTALLED
