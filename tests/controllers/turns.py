"""Turns tested directly: the operator's own dispatcher, services (real helm, git and kustomize) and table of kinds,
against a sandbox over HTTP, with no kopf and no scheduler: a test hands an object's body over as its watch would
and runs the object's turn to its end, then reads the object. What took an operator started and polled takes a
turn, and a test says which turns happen, in which order.

The asyncio loop runs in a thread of its own (the services' clients, workers and semaphores are bound to it); the
methods are synchronous, for tests."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from helmop_sandbox import Sandbox

from helmop.api.kinds import Kind
from helmop.api.objects import ObjectKey, unpacked
from helmop.api.settings import Settings
from helmop.controllers.context import Services
from helmop.controllers.fluxgate import FluxGate
from helmop.controllers.handlers import Dispatcher
from helmop.controllers.operator import app_kinds, build_services, install_crds
from helmop.controllers.registration import Controller, controllers
from helmop.helm.engine import Processes
from helmop.infra.kube import Connection, Kube, KubeError

T = TypeVar("T")
# Kinds that others read, by kind name (helmop's and Flux's alike): their turns come first in a round of
# :meth:`Turns.settle`, sources before what is built from them. (ExternalArtifacts have no turn: their producer,
# an ArtifactGenerator, writes them.)
FIRST = {"GitRepository": 0, "HelmRepository": 0, "OCIRepository": 0, "Bucket": 0, "HelmChart": 1,
         "ArtifactGenerator": 1}
REST = 2
UNSETTLED = ("Progressing", "Reconciling")  # reasons of a Ready condition while a reconcile is under way
TIMEOUT = 300.0  # one turn (a helm action waits for its release at most its own timeout)


def ready(obj: dict[str, Any]) -> dict[str, Any]:
    """The object's Ready condition ({} while it has none)."""
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), {})


def settled(obj: dict[str, Any]) -> bool:
    """Whether the object's last turn came to a conclusion: Ready is there, neither Unknown nor under way."""
    condition = ready(obj)
    return bool(condition) and condition.get("status") != "Unknown" and condition.get("reason") not in UNSETTLED


class Turns:
    """The operator's turns of every kind (helmop's, the app kinds of ``settings``, Flux's with
    ``settings.flux.api``) against ``sandbox``, whose CRDs it installs. The dispatcher's scheduler is stopped
    from the start: no turn happens but the ones a test asks for (a wake, a retry, an interval starts none).

    ``identity``: the kubeconfig the operator acts with, as its ``--kubeconfig`` (its ServiceAccount's token, say:
    the API then judges every request of its turns, helm's included, by that account's RBAC); the sandbox's own,
    cluster-admin, by default. The harness itself (:attr:`kube`: what it lists and hands over, as the watch
    would) reads with the sandbox's own either way."""

    def __init__(self, sandbox: Sandbox, settings: Settings, identity: Path | None = None) -> None:
        self.settings = replace(settings, kubeconfig=identity or sandbox.kubeconfig)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="turns", daemon=True)
        self.thread.start()
        self.kube, self.services, self.dispatcher = self.run(self._open(sandbox.kubeconfig))

    async def _open(self, admin: Path) -> tuple[Kube, Services, Dispatcher]:
        settings = self.settings
        kube = Kube(Connection.from_kubeconfig(admin))
        acting = kube if settings.kubeconfig == admin else Kube(Connection.from_kubeconfig(settings.kubeconfig))
        # as the operator with --install-crds: under its own identity (a ClusterRole it may not write: left alone)
        await install_crds(acting, settings.flux.api, settings.flux.removed_versions, settings.limits)
        services = await build_services(settings, acting, Processes())
        dispatcher = Dispatcher(services, settings)
        await dispatcher.scheduler.stop()
        # the operator's table, as `register` serves it (Providers, Alerts and ExternalArtifacts have no turns)
        for controller in controllers(dispatcher.ctx, app_kinds(settings), clusterwide=not settings.namespaces,
                                      flux=settings.flux.api):
            dispatcher.controllers[controller.kind.key] = controller
        if settings.flux.api:  # as the operator: whether Flux's own controllers hold Flux's kinds, known first
            dispatcher.flux_gate = FluxGate(acting, settings.flux.namespace, services.metrics,
                                            dispatcher.serve_flux)
            await dispatcher.flux_gate.check()
        return kube, services, dispatcher

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = TIMEOUT) -> T:
        """Run ``coroutine`` on the turns' loop (where the services live) to its end; its result."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    def controller(self, kind: Kind | str) -> Controller:
        """The controller of ``kind`` (a Kind, or its key: "HelmRelease", "HelmRelease.helm.toolkit.fluxcd.io")."""
        return self.dispatcher.controllers[kind if isinstance(kind, str) else kind.key]

    def metric(self, name: str, **labels: str) -> float:
        """The sum of ``name``'s samples whose labels include ``labels``, in the services' registry (what the
        operator's /metrics serves)."""
        return sum(sample.value for family in self.services.metrics.registry.collect() for sample in family.samples
                   if sample.name == name and labels.items() <= sample.labels.items())

    def turn(self, kind: Kind | str, namespace: str, name: str) -> dict[str, Any]:
        """One turn of the object as it is now, handed over as its watch would; the object after it ({}: gone)."""
        return self.run(self._turn(self.controller(kind), namespace, name))

    def together(self, *objects: tuple[Kind | str, str, str]) -> list[dict[str, Any]]:
        """Turns of several objects (kind, namespace, name) at once, as the scheduler runs them; each after its turn."""
        async def all_of() -> list[dict[str, Any]]:
            return list(await asyncio.gather(*(self._turn(self.controller(kind), namespace, name)
                                               for kind, namespace, name in objects)))

        return self.run(all_of())

    async def _turn(self, controller: Controller, namespace: str, name: str) -> dict[str, Any]:
        path = controller.kind.path(namespace, name)
        body = await self.kube.get(path)
        if body is None:
            raise LookupError(f"no {controller.kind.kind} {namespace}/{name} to give a turn to")
        key = ObjectKey(controller.kind.key, namespace if controller.kind.namespaced else "", name)
        self.dispatcher.seen(controller, body, "MODIFIED")
        await self.dispatcher.turn(key)
        after = await self.kube.get(path)
        if after is None and key in self.dispatcher.bodies:  # its clean-up let it go: the watch's last word
            self.dispatcher.seen(controller, unpacked(self.dispatcher.bodies[key]), "DELETED")
        return after or {}

    def settle(self, namespace: str, target: str, rounds: int = 5) -> dict[str, Any]:
        """Rounds of turns for every object of the namespace (sources first: :data:`FIRST`) until ``target``
        ("<kind key>/<name>") has settled (:func:`settled`); the target then. AssertionError after ``rounds``."""
        kind, _, name = target.rpartition("/")
        wanted, seen = self.controller(kind), "not found"
        for _ in range(rounds):
            for controller, each in self.run(self._objects(namespace)):
                obj = self.turn(controller.kind, namespace, each)
                if controller is wanted and each == name:
                    if settled(obj):
                        return obj
                    seen = str(ready(obj) or obj.get("status") or "no status")
        raise AssertionError(f"{target} in {namespace} did not settle in {rounds} rounds of turns: {seen}")

    async def _objects(self, namespace: str) -> list[tuple[Controller, str]]:
        """Every object of the namespace that has turns, in the order of a round."""
        kinds = sorted((c for c in self.dispatcher.controllers.values() if c.kind.namespaced),
                       key=lambda c: FIRST.get(c.kind.kind, REST))
        listed = await asyncio.gather(*(self._listed(c.kind.path(namespace)) for c in kinds))
        return [(controller, str(obj["metadata"]["name"]))
                for controller, items in zip(kinds, listed, strict=True) for obj in items]

    async def _listed(self, path: str) -> list[dict[str, Any]]:
        try:
            return await self.kube.list(path)
        except KubeError as exc:
            if exc.status != 404:
                raise
            return []  # a kind the cluster does not serve (an app kind whose CRD is not installed): nothing to turn

    def close(self) -> None:
        self.run(self._close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()

    async def _close(self) -> None:
        await self.dispatcher.stop()
        await self.services.close()
        if self.services.kube is not self.kube:
            await self.services.kube.close()
        await self.kube.close()
