"""Stopping within a pod's termination grace period.

On SIGTERM (or SIGINT) the operator stops reconciling, tells the helm processes it started to stop
(helm records their releases as failed or leaves them pending; the next leader unlocks them), and
exits. If that has not happened within the deadline (4.5 s by default), a thread kills what is left and exits
the process: the kubelet's SIGKILL would come anyway, and this way no helm process outlives the
operator (helm runs in sessions of its own, so it would not get the kubelet's signal).

The handler is a plain ``signal.signal`` handler, not an event loop callback: the C-level handler
still wakes the loop (asyncio's wakeup fd, through which kopf sees the signal too), and the Python
handler runs between bytecodes even while the loop is busy, so a stalled loop cannot delay it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType

log = logging.getLogger(__name__)


def handle_signals(halt: asyncio.Event, signal_children: Callable[[int], None],
                   deadline: float) -> Callable[[], None]:
    """Install the handler (main thread only); ``signal_children(signum)`` passes a signal on to the
    processes the operator started. Returns a function that installs the handler again (kopf puts its
    own in place when it starts)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    loop = asyncio.get_running_loop()
    received: list[int] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        loop.call_soon_threadsafe(halt.set)
        signal_children(signal.SIGTERM)
        if not received:
            received.append(signum)
            threading.Thread(target=_deadline, args=(signum, signal_children, deadline), name="termination-deadline",
                             daemon=True).start()

    def install() -> None:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, on_signal)

    install()
    return install


def _deadline(signum: int, signal_children: Callable[[int], None], deadline: float) -> None:
    time.sleep(deadline)
    signal_children(signal.SIGKILL)
    log.warning("not stopped within %.1f s of signal %d: exiting now", deadline, signum)
    logging.shutdown()
    os._exit(128 + signum)
