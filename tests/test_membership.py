"""Hash-shard membership against the sandbox over HTTP, with short Lease timings: members split the space,
a member whose API calls fail stops acting on its own before the others may take its range, and they do
take it once its Lease expired. (The process-level journey, with helm, is tests/operations/test_replicas.py.)"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from helmop_sandbox import Sandbox

from helmop.api.shards import NOTHING, SPACE, Range
from helmop.infra.kube import Connection, Kube
from helmop.infra.membership import Membership
from tests.tools import eventually


class Recorder:
    """A holder that records what it is told (the Dispatcher's part, without a Dispatcher)."""

    def __init__(self) -> None:
        self.acting = NOTHING
        self.dropped = 0.0  # when it was told to stop everything

    def hold(self, acting: Range) -> bool:
        self.acting = acting
        return True

    def drop(self) -> None:
        self.acting, self.dropped = NOTHING, time.monotonic()


async def _until(check: Callable[[], bool], timeout: float) -> None:
    """``eventually``, from a thread: the members it watches run on this loop."""
    await asyncio.to_thread(eventually, check, timeout, 0.05)


async def test_members_split_the_space_and_a_silent_one_stops_before_its_range_moves() -> None:
    with Sandbox(ready_delay=0.05) as sandbox:
        timings = {"lease_duration": 2.0, "renew_deadline": 1.0, "retry_period": 0.1}
        kubes = [Kube(Connection.from_kubeconfig(sandbox.kubeconfig)) for _ in range(2)]
        holders = [Recorder(), Recorder()]
        members = [Membership(kube, "default", "", f"m{i}", holder, **timings)
                   for i, (kube, holder) in enumerate(zip(kubes, holders, strict=True))]
        stops = [asyncio.Event(), asyncio.Event()]
        tasks = [asyncio.create_task(m.run(s)) for m, s in zip(members, stops, strict=True)]
        try:
            await _until(lambda: holders[0].acting == Range(0, SPACE // 2)
                         and holders[1].acting == Range(SPACE // 2, SPACE), 10)
            # m1's API goes away (a partition): it stops on its own within renew_deadline ...
            members[1].kube = Kube(Connection(server="https://127.0.0.1:9", insecure=True))
            kubes.append(members[1].kube)
            cut = time.monotonic()
            await _until(lambda: holders[1].acting.empty, 5)
            assert holders[1].dropped - cut < timings["lease_duration"]
            # ... and only then, once its Lease expired as m0 saw it, m0 takes the whole space
            await _until(lambda: holders[0].acting == Range(0, SPACE), 10)
            taken = time.monotonic()
            # m1 stopped a renew_deadline after its last renewal, m0 took over a lease_duration after it saw
            # that renewal: never both at once, and m1 was still counted for most of the Lease's duration
            assert holders[1].dropped < taken and taken - cut > timings["renew_deadline"]
        finally:
            for stop in stops:
                stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            for kube in kubes:
                await kube.close()
