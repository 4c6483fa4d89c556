"""Flux's own controllers still at work: while their leader Leases are being renewed, helmop serves no Flux
object (two controllers acting on one HelmRelease would install, upgrade and roll back against each other).

Flux's controllers elect a leader through a Lease named ``<controller>-leader-election`` in their namespace
(``flux-system`` unless installed elsewhere: ``--flux-namespace``). A Lease with a holder whose last renewal is
more recent than its duration is a running controller; one released (no holder, a clean stop) or lapsed is
not. The Leases are read at the start, before any Flux object gets a turn, and again every
``tunables.flux_check`` seconds: when Flux's controllers come back, helmop stops serving Flux's kinds again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from helmop.infra.kube import Kube, KubeError
from helmop.infra.metrics import Metrics

log = logging.getLogger(__name__)

# The controllers whose kinds helmop serves with --flux-api (their controller-runtime leader election IDs).
CONTROLLERS = ("helm-controller", "source-controller", "kustomize-controller")


def renewed_by(lease: dict[str, Any], now: datetime) -> tuple[str, float] | None:
    """(holder, seconds since its last renewal) of a Lease that is still held; None when it is released or
    lapsed. Clocks are compared across machines here: a skew of seconds only moves when Flux counts as gone."""
    spec = lease.get("spec") or {}
    holder = str(spec.get("holderIdentity") or "")
    try:
        renewed = datetime.fromisoformat(str(spec.get("renewTime") or "").replace("Z", "+00:00"))
    except ValueError:
        return None
    if renewed.tzinfo is None:
        renewed = renewed.replace(tzinfo=UTC)
    age = (now - renewed).total_seconds()
    duration = float(spec.get("leaseDurationSeconds") or 15)
    return (holder, max(age, 0.0)) if holder and age < duration else None


class FluxGate:
    """Whether Flux's kinds are served now (``held`` says why not), kept up to date by :meth:`run`."""

    def __init__(self, kube: Kube, namespace: str, metrics: Metrics, served: Callable[[], None]) -> None:
        self.kube = kube
        self.namespace = namespace
        self.metrics = metrics
        self.served = served  # called when Flux's kinds are served again: their objects get a turn at once
        self.held = ""
        self._unreadable = False
        self._said: set[str] = set()  # the controllers last said to be running (said again when that changes)

    def _path(self, controller: str) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/{controller}-leader-election"

    async def check(self) -> None:
        running: dict[str, str] = {}  # controller -> what is said of it
        for controller in CONTROLLERS:
            try:
                lease = await self.kube.get(self._path(controller))
            except KubeError as exc:
                if exc.status != 403:
                    raise
                if not self._unreadable:
                    log.warning("cannot read Flux's leader Lease %s/%s-leader-election (%s): helmop cannot tell "
                                "whether Flux's controllers still run; make sure they are scaled to zero",
                                self.namespace, controller, exc.message)
                self._unreadable = True
                continue
            held = renewed_by(lease or {}, datetime.now(UTC))
            if held is not None:
                running[controller] = (f"{controller} (Lease {self.namespace}/{controller}-leader-election held by "
                                       f"{held[0]}, renewed {held[1]:.0f}s ago)")
        was, self.held = self.held, "" if not running else (
            "Flux's controllers are still running: " + "; ".join(running.values()) + ". helmop serves no Flux "
            f"object until they stop: `kubectl -n {self.namespace} scale deployment {' '.join(CONTROLLERS)} "
            "--replicas=0` (docs: Migrating from Flux)")
        self.metrics.flux_controllers.set(len(running))
        if running and set(running) != self._said:
            log.error("%s", self.held)
        elif was and not self.held:
            log.info("Flux's controllers have stopped: serving Flux's kinds")
            self.served()
        self._said = set(running)

    async def run(self, every: float) -> None:
        while True:
            await asyncio.sleep(every)
            try:
                await self.check()
            except KubeError as exc:  # the API failing: the gate stays as it was, and asks again
                log.warning("could not read Flux's leader Leases: %s", exc)
