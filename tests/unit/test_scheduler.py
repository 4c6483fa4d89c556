"""The scheduler that replaced a daemon per object: turns at their time, one at a time per object, a wake
during a turn gives exactly one more, and objects another replica owns get none.

Each scenario runs on an event loop whose clock moves only when nothing is left to run now (looptime):
`asyncio.sleep(10)` takes no real time, and a count at a given moment is exact, whatever the machine's load.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import looptime

from helmop.controllers.scheduler import Scheduler
from helmop.infra.probes import SCHEDSTAT, Scheduled

A, B = ("HelmRelease", "ns", "a"), ("HelmRelease", "ns", "b")
Key = tuple[str, str, str]
T = TypeVar("T")


def on_fake_clock(scenario: Callable[[], Awaitable[T]]) -> T:
    loop = looptime.new_event_loop(start=0)  # enabled from the start: time moves only when the loop is idle
    try:
        return loop.run_until_complete(scenario())
    finally:
        loop.close()


def test_turns_run_one_at_a_time_and_a_wake_during_one_gives_one_more() -> None:
    async def scenario() -> list[str]:
        log: list[str] = []

        async def turn(key: Key) -> float | None:
            log.append(f"start {key[2]} at {asyncio.get_running_loop().time():g}")
            await asyncio.sleep(1)
            log.append(f"end {key[2]} at {asyncio.get_running_loop().time():g}")
            return None

        scheduler = Scheduler(turn)
        scheduler.wake(A)
        await asyncio.sleep(0.5)
        for _ in range(3):  # three wakes during the turn: one more turn, right after it, not three
            scheduler.wake(A)
        await asyncio.sleep(10)
        await scheduler.stop()
        return log

    assert on_fake_clock(scenario) == ["start a at 0", "end a at 1", "start a at 1", "end a at 2"]


def test_a_turn_comes_back_after_its_delay_and_a_forgotten_object_does_not() -> None:
    async def scenario() -> dict[str, list[float]]:
        times: dict[str, list[float]] = {"a": [], "b": []}

        async def turn(key: Key) -> float | None:
            times[key[2]].append(asyncio.get_running_loop().time())
            return 2.0

        scheduler = Scheduler(turn)
        scheduler.wake(A)
        scheduler.wake(B, 1.0)
        await asyncio.sleep(2.5)
        scheduler.forget(B)
        await asyncio.sleep(5.0)  # until 7.5
        await scheduler.stop()
        return times

    assert on_fake_clock(scenario) == {"a": [0, 2, 4, 6], "b": [1]}


def test_a_sooner_wake_wins_and_a_later_one_does_not_postpone() -> None:
    async def scenario() -> list[float]:
        times: list[float] = []

        async def turn(key: Key) -> float | None:
            times.append(asyncio.get_running_loop().time())
            return None

        scheduler = Scheduler(turn)
        scheduler.wake(A, 5.0)
        scheduler.wake(A, 9.0)  # later: the turn at 5 stands
        scheduler.wake(A, 3.0)  # sooner: it comes at 3 instead
        await asyncio.sleep(20)
        await scheduler.stop()
        return times

    assert on_fake_clock(scenario) == [3.0]


def test_objects_not_owned_get_no_turn_and_stop_cancels_running_ones() -> None:
    async def scenario() -> tuple[list[str], bool, bool]:
        seen: list[str] = []
        cancelled = asyncio.Event()

        async def turn(key: Key) -> float | None:
            seen.append(key[2])
            try:
                await asyncio.sleep(100)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return None

        scheduler = Scheduler(turn, owns=lambda key: key == A)
        scheduler.wake(A)
        scheduler.wake(B)
        await asyncio.sleep(1)
        await scheduler.stop()
        scheduler.wake(A)  # after stop: nothing more starts
        await asyncio.sleep(1)
        return seen, cancelled.is_set(), bool(scheduler.running)

    assert on_fake_clock(scenario) == (["a"], True, False)


def test_at_most_limit_turns_run_at_once_and_the_others_wait_in_order() -> None:
    async def scenario() -> list[tuple[str, float]]:
        started: list[tuple[str, float]] = []

        async def turn(key: Key) -> float | None:
            started.append((key[2], asyncio.get_running_loop().time()))
            await asyncio.sleep(1)
            return None

        scheduler = Scheduler(turn, limit=3)
        for i in range(7):
            scheduler.wake(("HelmRelease", "ns", f"o{i}"))
        scheduler.paced(0.5, 1.0)  # without a floor, a late and busy loop closes no place
        await asyncio.sleep(10)
        await scheduler.stop()
        return started

    # three at once, each second the next three, in the order they were woken
    assert on_fake_clock(scenario) == [("o0", 0), ("o1", 0), ("o2", 0), ("o3", 1), ("o4", 1), ("o5", 1), ("o6", 2)]


def test_a_turn_cancelled_from_within_comes_back_in_five_seconds() -> None:
    async def scenario() -> list[float]:
        times: list[float] = []

        async def turn(key: Key) -> float | None:
            times.append(asyncio.get_running_loop().time())
            if len(times) == 1:
                raise asyncio.CancelledError()  # as a cancelled inner wait surfaces
            return None

        scheduler = Scheduler(turn)
        scheduler.wake(A)
        await asyncio.sleep(30)
        await scheduler.stop()
        return times

    assert on_fake_clock(scenario) == [0, 5]


def test_places_open_with_the_loops_pace_from_the_floor_and_running_turns_are_never_stopped() -> None:
    async def scenario() -> list[tuple[int, int]]:
        release = asyncio.Event()

        async def turn(key: Key) -> float | None:
            await release.wait()
            return None

        scheduler = Scheduler(turn, limit=40, floor=10)
        for i in range(60):
            scheduler.wake(("ConfigSync", "ns", f"o{i}"))
        await asyncio.sleep(0.01)
        seen = [(scheduler.open, len(scheduler.running))]  # a burst starts at the floor
        for _ in range(3):  # CPU to spare, every place taken: one more each time (an eighth, at least 1)
            scheduler.paced(0.005, 0.2)
        seen.append((scheduler.open, len(scheduler.running)))
        scheduler.paced(0.005, 0.9)  # on time, but computing most of the time: no more
        seen.append((scheduler.open, len(scheduler.running)))
        scheduler.paced(0.3, 0.9)  # late through its own work: fewer places (0.7, never under the floor); turns go on
        seen.append((scheduler.open, len(scheduler.running)))
        scheduler.paced(0.3, 0.1)  # late, then idle (a herd woke together): no more, and no fewer
        seen.append((scheduler.open, len(scheduler.running)))
        scheduler.paced(0.02, 0.1)  # on time, waiting on events (its turns on helm): every place taken, one more
        seen.append((scheduler.open, len(scheduler.running)))
        release.set()
        await asyncio.sleep(1)
        scheduler.paced(0.001, 0.0)  # every turn done: the places go back to the floor, for the next burst
        seen.append((scheduler.open, len(scheduler.running)))
        await scheduler.stop()
        return seen

    assert on_fake_clock(scenario) == [(10, 10), (13, 13), (13, 13), (10, 13), (10, 13), (11, 13), (10, 0)]


def test_the_pace_counts_time_waiting_for_a_cpu_as_time_not_to_spare(tmp_path: Path) -> None:
    """A loop that other processes keep from the CPUs is no more idle than one that computes: the kernel's account
    of the thread (time on a CPU, time waiting for one) says so; where there is none, its CPU time alone."""
    stat = tmp_path / "schedstat"
    stat.write_text("1500000000 250000000 42\n")  # as Linux writes it: nanoseconds on a CPU, waiting for one; slices
    scheduled = Scheduled(stat)  # (closed by its garbled reading below)
    assert scheduled() == 1.75
    stat.write_text("2500000000 250000000 43\n")  # read anew each time, through the one descriptor
    assert scheduled() == 2.75
    stat.write_text("garbled\n")  # from then on, the CPU time alone
    before = time.thread_time()
    assert before <= scheduled() <= time.thread_time()
    assert before <= Scheduled(tmp_path / "absent")() <= time.thread_time()
    if SCHEDSTAT.exists():  # this thread's own, live: computing shows at once
        with contextlib.closing(Scheduled()) as live:
            start = live()
            deadline = time.thread_time() + 0.05
            while time.thread_time() < deadline:
                pass
            assert live() - start >= 0.04  # (its account may trail by a scheduler tick)
