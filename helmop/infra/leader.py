"""Leader election through a ``coordination.k8s.io/v1`` Lease, as client-go's leaderelection does it.

Only the holder of the Lease reconciles; the other replicas wait. The holder renews every
``retry_period``; if it cannot renew for ``renew_deadline`` it stops acting (and the process exits,
so a restart rejoins the election), and a standby takes the Lease once ``lease_duration`` passed
without a renewal *as it observed it*: expiry is judged by the standby's own clock since the record
last changed, never by comparing clocks across machines. Writes carry the resourceVersion they
read, so of two replicas trying at once exactly one wins (the other gets 409 Conflict). A holder
that stops cleanly gives the Lease up, so a standby takes over at once instead of after 15 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .kube import Kube, KubeError

log = logging.getLogger(__name__)


def lease_name(shard: str) -> str:
    """Each shard elects its own leader."""
    return f"helmop-leader-{shard}" if shard else "helmop-leader"


def identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def micro_time() -> str:
    """Now, as a Lease's MicroTime fields are written."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # a MicroTime


@dataclass
class Election:
    kube: Kube
    namespace: str
    name: str
    identity: str
    lease_duration: float
    renew_deadline: float
    retry_period: float
    _observed: dict[str, Any] = field(default_factory=dict)  # the Lease's spec as last read
    _observed_at: float = 0.0  # local monotonic time the spec last changed

    @property
    def path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/{self.name}"

    async def acquire(self, stop: asyncio.Event) -> bool:
        """Wait until this replica holds the Lease (True) or ``stop`` is set (False)."""
        logged = False
        while not stop.is_set():
            if await self._try():
                log.info("became the leader (Lease %s/%s, identity %s)", self.namespace, self.name, self.identity)
                return True
            if not logged:
                log.info("waiting to become the leader (Lease %s/%s is held by %s)", self.namespace, self.name,
                         self._observed.get("holderIdentity"))
                logged = True
            await _wait(stop, self.retry_period)
        return False

    async def hold(self, stop: asyncio.Event) -> None:
        """Renew until ``stop`` is set or renewing failed for ``renew_deadline`` (then returns: lost)."""
        renewed = time.monotonic()
        while not stop.is_set():
            await _wait(stop, self.retry_period)
            if stop.is_set():
                return
            if await self._try():
                renewed = time.monotonic()
            elif time.monotonic() - renewed > self.renew_deadline or self._held_by_other():
                log.error("lost the leader Lease %s/%s (holder now: %s)", self.namespace, self.name,
                          self._observed.get("holderIdentity") or "none")
                return

    async def release(self) -> None:
        """Give the Lease up (a clean stop): a standby need not wait for it to expire."""
        if self._observed.get("holderIdentity") != self.identity:
            return
        spec = {**self._observed, "holderIdentity": None, "leaseDurationSeconds": 1, "renewTime": micro_time()}
        try:
            await self.kube.request("PUT", self.path, self._lease(spec), attempts=1)
        except KubeError as exc:
            log.info("could not give the Lease up (%s); it expires on its own", exc)

    def _held_by_other(self) -> bool:
        holder = self._observed.get("holderIdentity")
        return bool(holder) and holder != self.identity

    def _lease(self, spec: dict[str, Any], resource_version: str = "") -> dict[str, Any]:
        meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if resource_version:
            meta["resourceVersion"] = resource_version
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}

    async def _try(self) -> bool:
        """One attempt to take or renew the Lease."""
        try:
            live = await self.kube.request("GET", self.path, attempts=1)
        except KubeError as exc:
            if exc.status != 404:
                log.warning("reading the leader Lease failed: %s", exc)
                return False
            return await self._write("POST", self._creation_path(), self._lease(self._spec(None, 0)))
        spec = live.get("spec") or {}
        if spec != self._observed:
            self._observed, self._observed_at = spec, time.monotonic()
        holder = spec.get("holderIdentity")
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        if holder and holder != self.identity and time.monotonic() - self._observed_at < duration:
            return False  # held, and not expired as far as this replica saw
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if holder == self.identity else 1)
        acquired = spec.get("acquireTime") if holder == self.identity else None
        return await self._write("PUT", self.path, self._lease(self._spec(acquired, transitions),
                                                               live["metadata"]["resourceVersion"]))

    def _creation_path(self) -> str:
        return self.path.rsplit("/", 1)[0]

    def _spec(self, acquired: str | None, transitions: int) -> dict[str, Any]:
        now = micro_time()
        return {"holderIdentity": self.identity, "leaseDurationSeconds": int(self.lease_duration),
                "acquireTime": acquired or now, "renewTime": now, "leaseTransitions": transitions}

    async def _write(self, method: str, path: str, lease: dict[str, Any]) -> bool:
        try:
            written = await self.kube.request(method, path, lease, attempts=1)
        except KubeError as exc:
            if exc.status not in (409,):  # 409: another replica wrote first, the normal way to lose a race
                log.warning("writing the leader Lease failed: %s", exc)
            return False
        self._observed, self._observed_at = written.get("spec") or {}, time.monotonic()
        return True


async def _wait(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
