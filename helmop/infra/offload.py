"""CPU work of a turn: on the event loop when its input is small, in a thread when it is not.

A thread is not free beside a busy event loop: each hop hands the GIL over and back, and while the thread
computes, every socket write of the loop waits to take the GIL again (up to the 5 ms switch interval, a scheduler
slice when the cores are shared with the API server). For the few KiB most turns build, that waiting cost more than
the work: in a burst of 1000 ConfigSyncs (``bench/configsyncs.py``), parsing and substituting their four objects in
threads took a third more of the operator's CPU and time than doing it in place. Large inputs still go to a thread:
there, the work is the longer wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

SMALL = 32 << 10  # bytes of YAML parsed, dumped or substituted in about a millisecond or two


async def by_size(size: int, limit: int, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)`` here when ``size`` (of its input) is at most ``limit``, else in a thread."""
    if size <= limit:
        return fn(*args, **kwargs)
    return await asyncio.to_thread(fn, *args, **kwargs)
