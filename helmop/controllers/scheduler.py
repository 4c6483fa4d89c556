"""When each object is reconciled next, for every object of every kind: one timer heap, and a task only
while an object's turn runs. An idle object costs a heap entry and a number, not a task, its locks and
its logger (what a per-object daemon costs: the bulk of an idle operator's memory).

One turn at a time per object: a wake that arrives during a turn runs the next turn right after it.
At most ``limit`` turns run at once; due ones wait their turn in order. ``owns`` says which objects this
replica acts on (hash shards); turns of the others are not started. Times are the event loop's clock
(``loop.time()``, monotonic), so a test can run the scheduler on a loop whose clock it moves.

How many of the ``limit`` places are open follows the event loop's pace (:meth:`Scheduler.paced`, told by the
probes every 0.1 s), between ``floor`` and ``limit``, as TCP's window follows loss. Turns that wake together (a
thousand ConfigSyncs resuming from one discovery answer, or in step through a no-op when the API server answers
a batch at once) each run a few ms of CPU before their next wait, and a hundred of them in one loop iteration
hold every timer, watch and probe for hundreds of ms (the longer when other processes take the CPUs). So fewer
start while the loop is late with no time to spare, and more only while it keeps time with time to spare and every
open place taken (a loop that computes most of the time runs no faster with more turns, it only wakes them in larger
herds), starting from ``floor``: a burst finds the loop's pace before it fills it. Running turns are never stopped.
Turns that wait (on helm, on readiness watches, on a dependency) leave the loop idle, so their places open up to
``limit``.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
from collections import deque
from collections.abc import Awaitable, Callable

from helmop.api.objects import ObjectKey

log = logging.getLogger(__name__)

Turn = Callable[[ObjectKey], Awaitable[float | None]]  # the delay to the next turn; None: none (the object is gone)

LATE = 0.04  # a loop lag past this, with the loop's thread computing (or waiting for a CPU) at least
BUSY = 0.5  # this share of the time, closes places (to 0.7 of them); on time, computing less, with every place taken,
# opens an eighth more (a loop that computes most of the time runs no faster with more turns, it wakes larger herds)


class Scheduler:
    def __init__(self, turn: Turn, owns: Callable[[ObjectKey], bool] = lambda key: True, limit: int = 100,
                 floor: int | None = None) -> None:
        self.turn, self.owns, self.limit = turn, owns, limit
        self.floor = limit if floor is None else min(floor, limit)  # None: every place open, whatever the lag
        self.open = self.floor  # places open now
        self._ready: deque[ObjectKey] = deque()  # due, waiting for one of the open places
        self._queued: set[ObjectKey] = set()
        self.due: dict[ObjectKey, float] = {}  # the loop's time of each object's next turn
        self.running: dict[ObjectKey, asyncio.Task[None]] = {}
        self._again: set[ObjectKey] = set()  # woken during their turn
        self._heap: list[tuple[float, ObjectKey]] = []  # (time, key); entries that no longer match ``due`` are stale
        self._timer: asyncio.TimerHandle | None = None
        self._stopping = False

    @property
    def waiting(self) -> int:
        """Turns due and waiting for one of the open places."""
        return len(self._queued)

    def paced(self, lag: float, busy: float) -> None:
        """The event loop's lag, just measured, and the share of the time its thread computed or waited for a CPU
        (:class:`helmop.infra.probes.Scheduled`): fewer places open while it is late and has no time to spare, more
        while it keeps time with time to spare and every place is taken (a loop that waits on events, its turns on
        helm or on readiness, runs no worse for more of them, and holding them back would only queue the rest
        behind them). A loop that other processes keep from a CPU has no time to spare either, and one late from a
        herd of turns that woke together, then idle, is not given a larger herd. With no turn running or waiting, the
        places go back to the floor: a burst of short turns after one of turns that waited (a no-op resync after
        installs) would otherwise start as a herd of every place the first opened."""
        if not self.running and not self._ready:
            self.open = self.floor  # a burst is over: the next one finds its own pace, from the floor
        elif lag > LATE and busy >= BUSY:
            self.open = max(self.floor, int(self.open * 0.7))
        elif lag <= LATE and busy < BUSY and len(self.running) >= self.open and self.open < self.limit:
            # only while the places are all taken: an idle loop says nothing of a burst to come
            self.open = min(self.limit, self.open + max(1, self.open // 8))
            self._start_ready()

    def wake(self, key: ObjectKey, delay: float = 0.0) -> None:
        """A turn for ``key`` in ``delay`` seconds (or sooner, if one is due sooner already)."""
        if self._stopping:
            return
        if key in self.running or key in self._queued:
            if delay == 0.0 and key in self.running:
                self._again.add(key)
            return
        at = asyncio.get_running_loop().time() + delay
        if key in self.due and self.due[key] <= at:
            return
        self._at(key, at)

    def forget(self, key: ObjectKey) -> None:
        """No more turns for ``key`` (the one running ends as it will)."""
        self.due.pop(key, None)
        self._again.discard(key)
        self._queued.discard(key)  # its place in the queue is passed over

    def _at(self, key: ObjectKey, at: float) -> None:
        self.due[key] = at
        heapq.heappush(self._heap, (at, key))
        if len(self._heap) > 2 * len(self.due) + 64:  # mostly stale entries: rebuild, so memory stays bounded
            self._heap = [(when, k) for k, when in self.due.items()]
            heapq.heapify(self._heap)
        self._arm()

    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._heap:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_at(max(loop.time(), self._heap[0][0]), self._fire)

    def _fire(self) -> None:
        self._timer = None
        now = asyncio.get_running_loop().time()
        while self._heap and self._heap[0][0] <= now:
            at, key = heapq.heappop(self._heap)
            if self.due.get(key) != at:
                continue  # stale: rescheduled or forgotten since
            del self.due[key]
            self._ready.append(key)
            self._queued.add(key)
        self._start_ready()
        self._arm()

    def _start_ready(self) -> None:
        while self._ready and len(self.running) < self.open and not self._stopping:
            key = self._ready.popleft()
            if key in self._queued:
                self._queued.discard(key)
                if self.owns(key):
                    self.running[key] = asyncio.create_task(self._run(key))

    async def _run(self, key: ObjectKey) -> None:
        delay: float | None = None
        try:
            delay = await self.turn(key)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():  # stopped: the operator, a shard move, lost membership
                self._again.discard(key)
                return
            log.warning("a turn of %s %s/%s ended cancelled from within; again in 5 s", *key)
            delay = 5.0
        except Exception:  # the turn reports its own errors; this is a bug in the reporting itself
            log.exception("a turn of %s %s/%s failed", *key)
            delay = 30.0
        finally:
            self.running.pop(key, None)
            self._start_ready()
        if key in self._again:
            self._again.discard(key)
            self.wake(key)
        elif delay is not None:
            self.wake(key, delay)

    def cancel(self) -> list[asyncio.Task[None]]:
        """Stop every running turn (their helm processes are told to stop); the tasks, ending."""
        tasks = list(self.running.values())
        for task in tasks:
            task.cancel()
        return tasks

    async def stop(self) -> None:
        """Stop every running turn and start no more."""
        self._stopping = True
        if self._timer is not None:
            self._timer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*self.cancel(), return_exceptions=True)
