"""Replicas that split the objects among themselves (``--shards auto``), through one Lease per replica.

Each replica renews its Lease ``helmop-member-<identity>`` (labelled with its group: the label shard it
serves, ``default`` without one) every ``retry_period`` and lists its group's Leases. The live ones (as
this replica observed their renewals, the way leader election judges expiry) give each replica its
range of the hash space (:func:`helmop.api.shards.share`); the range a replica *holds* — acts on, or still
finishes turns in — is written on its Lease (annotation ``helmop.dev/holds``, in the 1.36 shardSelector
form). A handoff is safe by this order:

- giving up: the replica stops starting turns outside its new range at once, and writes the smaller range
  only once the turns still running there ended (it never cancels a helm action to move a range);
- taking: a replica takes a range only when no live replica holds any of it; it writes its claim first,
  reads the others' again, and acts only if nobody claimed an overlap meanwhile (of two racing claims,
  the later reader backs off);
- a replica that could not renew for ``renew_deadline`` (shorter than the Lease's duration) stops every
  turn at once (a timer, whatever its requests are stuck on), before the others may judge it gone; a
  Lease unrenewed for its duration counts as gone, and its range is taken by the rest. A replica that
  stops cleanly deletes its Lease, so the rest take over at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from helmop.api.shards import NOTHING, Range, share

from .kube import Kube, KubeError
from .leader import micro_time

log = logging.getLogger(__name__)
GROUP_LABEL = "helmop.dev/member-of"
HOLDS = "helmop.dev/holds"
PREFIX = "helmop-member-"


class Holder(Protocol):
    def hold(self, acting: Range) -> bool:
        """Act on ``acting`` from now on; True once no turn outside it is still running."""

    def drop(self) -> None:
        """Stop every turn now (this replica may no longer be counted as live)."""


def lease_name(identity: str) -> str:
    return (PREFIX + re.sub(r"[^a-z0-9.-]+", "-", identity.lower())).strip("-.")[:253]


@dataclass
class Membership:
    kube: Kube
    namespace: str
    group: str  # the label shard served ("" for none)
    identity: str
    holder: Holder
    lease_duration: float
    renew_deadline: float
    retry_period: float
    held: Range = NOTHING  # what this replica's Lease says it holds
    acting: Range = NOTHING  # what its turns may start in (within ``held``)
    _seen: dict[str, tuple[str, float]] = field(default_factory=dict)  # Lease -> (renewTime, when it changed)
    _watchdog: asyncio.TimerHandle | None = None  # fires renew_deadline after the last renewal
    _drops: int = 0  # how often it fired

    @property
    def name(self) -> str:
        return lease_name(self.identity)

    @property
    def _collection(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases"

    async def run(self, stop: asyncio.Event) -> None:
        """Take part until ``stop`` is set; then give the Lease up."""
        try:
            while not stop.is_set():
                try:  # a hung request must not hold renewals up
                    await asyncio.wait_for(self._tick(), self.renew_deadline / 2)
                except (TimeoutError, KubeError) as exc:
                    log.warning("member Lease %s: %s", self.name, exc or "the API did not answer in time")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.retry_period)
        finally:
            if self._watchdog is not None:
                self._watchdog.cancel()
            with contextlib.suppress(KubeError):
                await self.kube.request("DELETE", f"{self._collection}/{self.name}", attempts=1)

    def _expire(self) -> None:
        """No renewal for ``renew_deadline``: stop every action now, before the others may count this replica
        gone (a timer, so a tick stuck on the API cannot delay it)."""
        self._watchdog = None
        self._drops += 1
        if not self.acting.empty:
            log.error("could not renew the member Lease %s for %.0f s: stopping every action", self.name,
                      self.renew_deadline)
            self.holder.drop()
        self._set(NOTHING, NOTHING)

    async def _tick(self) -> None:
        if not await self._publish(self.held):
            return
        members, others = await self._members()
        target = share(members, self.identity)
        kept = self.held.within(target)
        if kept != self.held:  # giving up first: stop starting turns there, write it once they ended
            self._set(self.held, kept)
            if self.holder.hold(kept) and await self._publish(kept):
                self._set(kept, kept)
            return
        if target == self.held or any(target.overlaps(o) for o in others):
            return  # settled, or another replica still holds part of it: next time
        drops = self._drops
        if not await self._publish(target):
            return
        _, others = await self._members()
        if any(target.overlaps(o) for o in others) or drops != self._drops:  # a racing claim, or renewals failed
            await self._publish(self.held)
            return
        self.holder.hold(target)
        self._set(target, target)

    def _set(self, held: Range, acting: Range) -> None:
        changed = acting != self.acting
        self.held, self.acting = held, acting
        if changed:
            log.info("member %s now acts on %s", self.identity, acting.selector() or "nothing")

    async def _members(self) -> tuple[list[str], list[Range]]:
        """The live members' identities (this one included), and the ranges the others hold."""
        listed = await self.kube.request("GET", self._collection, attempts=1,
                                         params={"labelSelector": f"{GROUP_LABEL}={self.group or 'default'}"})
        now, members, others = time.monotonic(), [self.identity], []
        names = set()
        for lease in listed.get("items") or []:
            name, spec = lease["metadata"]["name"], lease.get("spec") or {}
            names.add(name)
            holder = spec.get("holderIdentity")
            if name == self.name or not holder:
                continue
            renewed = str(spec.get("renewTime"))
            if self._seen.get(name, ("", 0.0))[0] != renewed:
                self._seen[name] = (renewed, now)
            silent = now - self._seen[name][1]
            duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
            if silent < duration:
                members.append(holder)
                others.append(Range.parse((lease["metadata"].get("annotations") or {}).get(HOLDS, "")))
            else:  # gone (killed): its Lease goes too, unless renewed meanwhile (it then comes back)
                await self._remove(name, lease["metadata"].get("resourceVersion", ""))
        self._seen = {k: v for k, v in self._seen.items() if k in names}
        return members, others

    async def _remove(self, name: str, resource_version: str) -> None:
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"resourceVersion": resource_version}}
        try:
            await self.kube.request("DELETE", f"{self._collection}/{name}", body, attempts=1)
        except KubeError as exc:
            log.info("could not remove the expired member Lease %s: %s", name, exc)

    async def _publish(self, held: Range) -> bool:
        """Renew this replica's Lease, saying it holds ``held``."""
        lease: dict[str, Any] = {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace,
                         "labels": {GROUP_LABEL: self.group or "default"}, "annotations": {HOLDS: held.selector()}},
            "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": math.ceil(self.lease_duration),
                     "renewTime": micro_time()}}
        try:
            try:
                await self.kube.request("PUT", f"{self._collection}/{self.name}", lease, attempts=1)
            except KubeError as exc:
                if exc.status != 404:
                    raise
                await self.kube.request("POST", self._collection, lease, attempts=1)
        except KubeError as exc:
            log.warning("renewing the member Lease %s failed: %s", self.name, exc)
            return False
        if self._watchdog is not None:
            self._watchdog.cancel()
        self._watchdog = asyncio.get_running_loop().call_later(self.renew_deadline, self._expire)
        return True
