"""Flux's own controllers still at work: while their leader Leases are being renewed, helmop serves no Flux
object (two controllers acting on one HelmRelease would install, upgrade and roll back against each other).

Flux's controllers elect a leader through a Lease named ``<controller>-leader-election`` in their namespace
(``flux-system`` unless installed elsewhere: ``--flux-namespace``). A Lease with a holder whose last renewal is
more recent than its duration is a running controller; one released (no holder, a clean stop) or lapsed is
not. The Leases are read at the start, before any Flux object gets a turn, and again every
``settings.flux.check`` seconds: when Flux's controllers come back, helmop stops serving Flux's kinds again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from helmop.api.kinds import FLUX_IMAGE
from helmop.infra.kube import Kube, KubeError
from helmop.infra.metrics import Metrics

log = logging.getLogger(__name__)

# The controllers whose kinds helmop serves with --flux-api (their controller-runtime leader election IDs).
CONTROLLERS = ("helm-controller", "source-controller", "kustomize-controller")
# Flux's image controllers hold only the image kinds: a cluster that kept them while helmop served the rest (as
# helmop's docs advised before it served them) goes on as it was; scaled to zero, helmop takes those kinds too.
IMAGE_CONTROLLERS = ("image-reflector-controller", "image-automation-controller")


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
        self.images_held = ""  # the same, for Flux's image kinds (IMAGE_CONTROLLERS)
        self._unreadable = False
        self._said: set[str] = set()  # the controllers last said to be running (said again when that changes)

    def _path(self, controller: str) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/{controller}-leader-election"

    def holds(self, group: str) -> str:
        """Why the Flux kinds of API ``group`` are not served now ("": they are)."""
        return self.images_held if group == FLUX_IMAGE else self.held

    async def check(self) -> None:
        running = await self._running(CONTROLLERS)
        images = await self._running(IMAGE_CONTROLLERS)
        was = (self.held, self.images_held)
        self.held, self.images_held = _said(running, CONTROLLERS, self.namespace), _said(images, IMAGE_CONTROLLERS,
                                                                                         self.namespace)
        self.metrics.flux_controllers.set(len(running) + len(images))
        if (running or images) and set(running) | set(images) != self._said:
            log.error("%s", " ".join(h for h in (self.held, self.images_held) if h))
        if any(before and not now for before, now in zip(was, (self.held, self.images_held), strict=True)):
            log.info("Flux's controllers have stopped: serving their kinds")
            self.served()
        self._said = set(running) | set(images)

    async def _running(self, controllers: tuple[str, ...]) -> dict[str, str]:
        """Which of ``controllers`` hold their Lease now, and what is said of each."""
        running: dict[str, str] = {}  # controller -> what is said of it
        for controller in controllers:
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
        return running

    async def run(self, every: float) -> None:
        while True:
            await asyncio.sleep(every)
            try:
                await self.check()
            except KubeError as exc:  # the API failing: the gate stays as it was, and asks again
                log.warning("could not read Flux's leader Leases: %s", exc)


def _said(running: dict[str, str], controllers: tuple[str, ...], namespace: str) -> str:
    if not running:
        return ""
    which = "Flux's image controllers" if controllers == IMAGE_CONTROLLERS else "Flux's controllers"
    return (f"{which} are still running: " + "; ".join(running.values()) + ". helmop serves none of their objects "
            f"until they stop: `kubectl -n {namespace} scale deployment {' '.join(controllers)} --replicas=0` (docs: "
            "Migrating from Flux)")
