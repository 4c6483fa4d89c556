"""The scheduler that replaced a daemon per object: turns at their time, one at a time per object, a wake
during a turn gives exactly one more, and objects another replica owns get none."""

from __future__ import annotations

import asyncio

from helmop.controllers.scheduler import Scheduler

A, B = ("HelmRelease", "ns", "a"), ("HelmRelease", "ns", "b")


def test_turns_run_one_at_a_time_and_a_wake_during_one_gives_one_more() -> None:
    async def scenario() -> list[str]:
        log: list[str] = []
        release = asyncio.Event()

        async def turn(key: tuple[str, str, str]) -> float | None:
            log.append(f"start {key[2]}")
            if len(log) == 1:
                await release.wait()
            log.append(f"end {key[2]}")
            return None

        scheduler = Scheduler(turn)
        scheduler.wake(A)
        await asyncio.sleep(0.01)
        for _ in range(3):  # three wakes during the turn: one more turn, not three
            scheduler.wake(A)
        release.set()
        await asyncio.sleep(0.05)
        await scheduler.stop()
        return log

    assert asyncio.run(scenario()) == ["start a", "end a", "start a", "end a"]


def test_a_turn_comes_back_after_its_delay_and_forgotten_objects_do_not() -> None:
    async def scenario() -> dict[str, int]:
        counts = {"a": 0, "b": 0}

        async def turn(key: tuple[str, str, str]) -> float | None:
            counts[key[2]] += 1
            return 0.02

        scheduler = Scheduler(turn)
        scheduler.wake(A)
        scheduler.wake(B)
        await asyncio.sleep(0.01)
        scheduler.forget(B)
        await asyncio.sleep(0.1)
        await scheduler.stop()
        return counts

    counts = asyncio.run(scenario())
    assert counts["a"] >= 3 and counts["b"] == 1


def test_objects_not_owned_get_no_turn_and_stop_cancels_running_ones() -> None:
    async def scenario() -> tuple[list[str], bool]:
        seen: list[str] = []
        cancelled = asyncio.Event()

        async def turn(key: tuple[str, str, str]) -> float | None:
            seen.append(key[2])
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return None

        scheduler = Scheduler(turn, owns=lambda key: key == A)
        scheduler.wake(A)
        scheduler.wake(B)
        await asyncio.sleep(0.02)
        await scheduler.stop()
        scheduler.wake(A)  # after stop: nothing more starts
        await asyncio.sleep(0.02)
        return seen, cancelled.is_set()

    assert asyncio.run(scenario()) == (["a"], True)


def test_at_most_limit_turns_run_at_once_and_the_others_wait_in_order() -> None:
    async def scenario() -> tuple[int, list[str]]:
        running, most, order = 0, 0, []

        async def turn(key: tuple[str, str, str]) -> float | None:
            nonlocal running, most
            running += 1
            most = max(most, running)
            order.append(key[2])
            await asyncio.sleep(0.01)
            running -= 1
            return None

        scheduler = Scheduler(turn, limit=3)
        for i in range(10):
            scheduler.wake(("HelmRelease", "ns", f"o{i}"))
        await asyncio.sleep(0.2)
        await scheduler.stop()
        return most, order

    most, order = asyncio.run(scenario())
    assert most == 3 and sorted(order) == sorted(f"o{i}" for i in range(10)) and len(order) == 10
