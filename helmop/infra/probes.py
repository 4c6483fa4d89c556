"""What ``/healthz`` and ``/readyz`` answer, measured so that the answers mean something.

Liveness is the event loop's: the probes are served on the loop, so a loop that stalls does not
answer (the kubelet's probe times out and the pod is restarted), and the loop's lag is measured
all the time (``helmop_event_loop_lag_seconds``; the benchmark reads its maximum). Readiness is
the API server's: a cheap authenticated request every few seconds; unreachable, TLS that no longer
verifies, or credentials refused make the operator not ready, with the reason in the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .kube import Kube, KubeError
from .metrics import Metrics

SCHEDSTAT = Path("/proc/thread-self/schedstat")  # Linux: this thread's time on a CPU, and waiting for one (ns)


class Scheduled:
    """Seconds the thread that made it has computed or been ready to compute, waiting for a CPU. A loop starved
    by other processes waits for a CPU where a loop with nothing to do waits for events: only the second has time
    to spare. Its CPU time alone where the kernel keeps no such account.

    The file stays open and each reading is one ``pread``: each blocking call of the ``os`` and ``io`` modules lets
    the GIL go, and beside a thread that computes (an index parsed), taking it back costs up to the switch interval
    (Python's default: 5 ms); opening and reading the file anew took eight of them, 40-80 ms of the loop's, at every
    tick."""

    def __init__(self, stat: Path = SCHEDSTAT) -> None:
        try:
            self._fd: int | None = os.open(stat, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self._fd = None

    def __call__(self) -> float:
        if self._fd is not None:
            try:
                on_cpu, waiting = os.pread(self._fd, 128, 0).split()[:2]
                return (int(on_cpu) + int(waiting)) / 1e9
            except (OSError, ValueError):
                self.close()  # from now on the CPU time alone (one interval mixes the two accounts)
        return time.thread_time()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


@dataclass
class Probes:
    kube: Kube
    metrics: Metrics
    tick: float = 0.1  # how often the loop's lag is measured
    api_every: float = 5.0  # how often the API server is asked
    api_problem: str = "not checked yet"
    api_checked: float = 0.0
    # told each lag measured, and the share of the time since the last that the loop's thread computed or waited
    # for a CPU to compute on (the scheduler paces its turns by them)
    lag_listeners: list[Callable[[float, float], None]] = field(default_factory=list)

    async def run(self) -> None:
        """Measure until cancelled."""
        self.metrics.loop_lag_max.set(0)
        tasks = [asyncio.create_task(self._measure_lag()), asyncio.create_task(self._check_api())]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _measure_lag(self) -> None:
        loop = asyncio.get_running_loop()
        scheduled = Scheduled()  # of the loop's thread
        worst, computed, read_at = 0.0, scheduled(), loop.time()
        try:
            while True:
                due = loop.time() + self.tick
                await asyncio.sleep(self.tick)
                lag = max(0.0, loop.time() - due)  # (the reading below is not part of it)
                now, now_at = scheduled(), loop.time()
                busy = max(0.0, now - computed) / max(now_at - read_at, self.tick)  # (>= 0 across a fallback)
                computed, read_at, worst = now, now_at, max(worst, lag)
                self.metrics.loop_lag.set(lag)
                self.metrics.loop_lag_max.set(worst)
                for listener in self.lag_listeners:
                    listener(lag, busy)
        finally:
            scheduled.close()

    async def _check_api(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self.kube.request("GET", "/api", attempts=1), self.api_every)
                self.api_problem = ""
            except KubeError as exc:
                self.api_problem = (f"the API server refused helmop's credentials ({exc.status})"
                                    if exc.status in (401, 403) else f"the API server is not usable: {exc}")
            except TimeoutError:
                self.api_problem = f"the API server did not answer within {self.api_every:g} s"
            self.api_checked = time.monotonic()
            self.metrics.api_reachable.set(0 if self.api_problem else 1)
            await asyncio.sleep(self.api_every)

    def api_ready(self) -> str:
        """"" when the API server answered lately, else why not."""
        if time.monotonic() - self.api_checked > 3 * self.api_every:
            return "the API server has not been checked lately"
        return self.api_problem
