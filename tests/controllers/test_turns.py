"""Every kind's turn has one shape, served by one dispatcher: driven here directly (no kopf, no operator process)
against the sandbox over HTTP. An API error in any kind's turn is said as APIError (never ReconcileError, the
sign of a bug), and a deleted object leaves nothing in the operator's memory."""

from __future__ import annotations

import asyncio
from collections.abc import Container, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from helmop_sandbox import Sandbox

from helmop.api.images import HELMOP_IMAGES
from helmop.api.kinds import RECEIVER
from helmop.api.objects import ObjectKey
from helmop.api.settings import Settings
from helmop.api.tenancy import Tenancy
from helmop.controllers.handlers import Dispatcher
from helmop.controllers.operator import install_crds
from helmop.controllers.registration import controllers
from helmop.infra.clusters import Remotes
from helmop.infra.events import Recorder
from helmop.infra.kube import Connection, Kube
from helmop.infra.metrics import Metrics

NAMESPACE = "turns"
TOKEN = "c2VjcmV0LXRva2Vu"  # base64 of a token the tests look for in memory


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(ready_delay=0.05, faults="seed=5") as running:  # no fault until a test asks for one
        yield running


def _dispatcher(kube: Kube) -> Dispatcher:
    """A dispatcher serving every kind of helmop's (the operator's own table), its I/O the sandbox's."""
    services: Any = SimpleNamespace(kube=kube, events=Recorder(kube), metrics=Metrics(), notifier=SimpleNamespace(),
                                    tenancy=Tenancy(), remotes=Remotes())
    dispatcher = Dispatcher(services, Settings())
    for controller in controllers(dispatcher.ctx, [], clusterwide=False):
        dispatcher.controllers[controller.kind.key] = controller
    return dispatcher


async def _turn(dispatcher: Dispatcher, kube: Kube, key: ObjectKey) -> dict[str, Any]:
    """One turn of the object as it is now (the watch's event handed over by hand); the object after it."""
    controller = dispatcher.controllers[key.kind]
    body = await kube.get(controller.kind.path(key.namespace, key.name))
    assert body is not None
    dispatcher.seen(controller, body, "MODIFIED")
    await dispatcher.turn(key)
    return await kube.get(controller.kind.path(key.namespace, key.name)) or {}


def _ready(obj: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == "Ready"), {})


def _kept(dispatcher: Dispatcher, key: ObjectKey) -> list[str]:
    """Every place of the operator's memory that still holds something of ``key``."""
    memory = dispatcher.ctx.memory
    tables: dict[str, Container[Any]] = {
        "secrets": memory.secrets, "supersessions": memory.supersessions, "written": memory.written,
        "retry_at": memory.retry_at, "references": memory.references.targets, "observers": memory.observers.targets,
        "bodies": dispatcher.bodies, "uids": dispatcher.uids, "tokens": dispatcher.tokens,
        "halting": dispatcher.halting, "failures": dispatcher.failures.counts}
    held = [name for name, table in tables.items() if key in table]
    held += [f"holders of {target}" for target, holders in memory.references.holders.items() if key in holders]
    return held


async def _setup(kube: Kube) -> None:
    await install_crds(kube)
    await kube.request("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    await kube.request("POST", f"/api/v1/namespaces/{NAMESPACE}/secrets",
                       {"metadata": {"name": "token"}, "data": {"token": TOKEN}})


def test_a_deleted_receiver_leaves_nothing_in_memory(sandbox: Sandbox) -> None:
    async def scenario() -> None:
        kube = Kube(Connection.from_kubeconfig(sandbox.kubeconfig))
        await _setup(kube)
        await kube.request("POST", RECEIVER.path(NAMESPACE), {
            "apiVersion": RECEIVER.api_version, "kind": RECEIVER.kind, "metadata": {"name": "hook"},
            "spec": {"type": "generic", "secretRef": {"name": "token"},
                     "resources": [{"kind": "GitRepository", "name": "app"}]}})
        dispatcher = _dispatcher(kube)
        key = ObjectKey(RECEIVER.key, NAMESPACE, "hook")
        received = await _turn(dispatcher, kube, key)
        assert _ready(received).get("status") == "True", received
        assert dispatcher.ctx.memory.secrets[key] == ["secret-token"]  # what the turn read, to be masked
        assert _kept(dispatcher, key)

        await kube.request("DELETE", RECEIVER.path(NAMESPACE, "hook"))
        assert not await _turn(dispatcher, kube, key)  # its clean-up let the finalizer go: it is gone
        dispatcher.seen(dispatcher.controllers[key.kind], received, "DELETED")  # the watch's last word
        assert _kept(dispatcher, key) == []
        await dispatcher.stop()
        await kube.close()

    asyncio.run(scenario())


def test_an_api_error_in_any_kinds_turn_is_said_as_api_error(sandbox: Sandbox) -> None:
    """Each of these turns reads an object of another kind through the API, which fails every read of those
    (500, 503, 504: retried, then given up): the turn ends with Ready=False APIError, and is Ready once the API
    answers again."""
    objects = [
        (RECEIVER, {"type": "generic", "secretRef": {"name": "token"},
                    "resources": [{"kind": "GitRepository", "name": "app"}]}),
        (HELMOP_IMAGES.policy, {"imageRepositoryRef": {"name": "app"}, "policy": {"alphabetical": {}}}),
    ]

    async def scenario() -> None:
        kube = Kube(Connection.from_kubeconfig(sandbox.kubeconfig))
        await kube.request("POST", "/api/v1/namespaces", {"metadata": {"name": f"{NAMESPACE}-api"}})
        await kube.request("POST", f"/api/v1/namespaces/{NAMESPACE}-api/secrets",
                           {"metadata": {"name": "token"}, "data": {"token": TOKEN}})
        for kind, spec in objects:
            await kube.request("POST", kind.path(f"{NAMESPACE}-api"), {
                "apiVersion": kind.api_version, "kind": kind.kind, "metadata": {"name": "app"}, "spec": spec})
        dispatcher = _dispatcher(kube)
        faults = sandbox.faults
        assert faults is not None
        faults.verbs, faults.resources = frozenset({"get"}), frozenset({"secrets", "imagerepositories"})
        faults.error = 1.0
        try:
            ended = await asyncio.gather(*(_turn(dispatcher, kube, ObjectKey(kind.key, f"{NAMESPACE}-api", "app"))
                                           for kind, _ in objects))
        finally:
            faults.error = 0.0
        for (kind, _), obj in zip(objects, ended, strict=True):
            ready = _ready(obj)
            assert (ready.get("status"), ready.get("reason")) == ("False", "APIError"), (kind.kind, ready)
            assert "the API server answered 5" in ready["message"]
        received = await _turn(dispatcher, kube, ObjectKey(RECEIVER.key, f"{NAMESPACE}-api", "app"))
        assert _ready(received).get("status") == "True", received
        await dispatcher.stop()
        await kube.close()

    asyncio.run(scenario())
