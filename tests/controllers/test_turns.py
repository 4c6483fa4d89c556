"""Every kind's turn has one shape, served by one dispatcher: driven here directly (the turns harness: no kopf, no
operator process, no scheduler) against the sandbox over HTTP. An API error in any kind's turn is said as APIError
(never ReconcileError, the sign of a bug), and a deleted object leaves nothing in the operator's memory."""

from __future__ import annotations

from collections.abc import Container, Iterator
from dataclasses import replace
from typing import Any

import pytest
from helmop_sandbox import Sandbox

from helmop.api.images import HELMOP_IMAGES
from helmop.api.kinds import RECEIVER
from helmop.api.objects import ObjectKey
from helmop.api.settings import Settings
from helmop.controllers.handlers import Dispatcher
from tests.controllers.turns import Turns, ready
from tests.tools import tool

NAMESPACE = "turns"
TOKEN = "c2VjcmV0LXRva2Vu"  # base64 of a token the tests look for in memory


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(ready_delay=0.05, faults="seed=5") as running:  # no fault until a test asks for one
        yield running


@pytest.fixture(scope="module")
def turns(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Turns]:
    """Every kind of helmop's served by the operator's own dispatcher and services, their I/O the sandbox's."""
    defaults = Settings()
    harness = Turns(sandbox, replace(defaults, helm=replace(defaults.helm, executable=str(tool("helm")),
                                                            cache_dir=tmp_path_factory.mktemp("turns"))))
    yield harness
    harness.close()


def _create(turns: Turns, path: str, body: dict[str, Any]) -> None:
    turns.run(turns.kube.request("POST", path, body))


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


def _namespace(turns: Turns, namespace: str) -> None:
    """The namespace, with the Secret that holds :data:`TOKEN`."""
    _create(turns, "/api/v1/namespaces", {"metadata": {"name": namespace}})
    _create(turns, f"/api/v1/namespaces/{namespace}/secrets", {"metadata": {"name": "token"}, "data": {"token": TOKEN}})


def test_a_deleted_receiver_leaves_nothing_in_memory(turns: Turns) -> None:
    _namespace(turns, NAMESPACE)
    _create(turns, RECEIVER.path(NAMESPACE), {
        "apiVersion": RECEIVER.api_version, "kind": RECEIVER.kind, "metadata": {"name": "hook"},
        "spec": {"type": "generic", "secretRef": {"name": "token"},
                 "resources": [{"kind": "GitRepository", "name": "app"}]}})
    key = ObjectKey(RECEIVER.key, NAMESPACE, "hook")
    received = turns.turn(RECEIVER, NAMESPACE, "hook")
    assert ready(received).get("status") == "True", received
    assert turns.dispatcher.ctx.memory.secrets[key] == ["secret-token"]  # what the turn read, to be masked
    assert _kept(turns.dispatcher, key)

    turns.run(turns.kube.request("DELETE", RECEIVER.path(NAMESPACE, "hook")))
    # its clean-up let the finalizer go: it is gone (and the watch's last word, DELETED, handed over)
    assert not turns.turn(RECEIVER, NAMESPACE, "hook")
    assert _kept(turns.dispatcher, key) == []


def test_an_api_error_in_any_kinds_turn_is_said_as_api_error(sandbox: Sandbox, turns: Turns) -> None:
    """Each of these turns reads an object of another kind through the API, which fails every read of those
    (500, 503, 504: retried, then given up): the turn ends with Ready=False APIError, and is Ready once the API
    answers again."""
    objects = [
        (RECEIVER, {"type": "generic", "secretRef": {"name": "token"},
                    "resources": [{"kind": "GitRepository", "name": "app"}]}),
        (HELMOP_IMAGES.policy, {"imageRepositoryRef": {"name": "app"}, "policy": {"alphabetical": {}}}),
    ]
    namespace = f"{NAMESPACE}-api"
    _namespace(turns, namespace)
    for kind, spec in objects:
        _create(turns, kind.path(namespace), {"apiVersion": kind.api_version, "kind": kind.kind,
                                              "metadata": {"name": "app"}, "spec": spec})
    faults = sandbox.faults
    assert faults is not None
    faults.verbs, faults.resources = frozenset({"get"}), frozenset({"secrets", "imagerepositories"})
    faults.error = 1.0
    try:
        ended = turns.together(*((kind, namespace, "app") for kind, _ in objects))
    finally:
        faults.error = 0.0
    for (kind, _), obj in zip(objects, ended, strict=True):
        condition = ready(obj)
        assert (condition.get("status"), condition.get("reason")) == ("False", "APIError"), (kind.kind, condition)
        assert "the API server answered 5" in condition["message"]
    received = turns.turn(RECEIVER, namespace, "app")
    assert ready(received).get("status") == "True", received
