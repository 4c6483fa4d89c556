"""A sampling profiler for the operator process (py-spy is not installed here): ``python bench/stack_sampler.py
OUT -m helmop.cli run ...`` runs the module as ``python -m`` would, while a thread looks at the main thread's
stack every few milliseconds and writes the stacks seen, collapsed (``a;b;c count``: flamegraph's input), to
OUT every 10 s and at exit (so an operator stopped hard still leaves them). Samples where the event loop waits
for I/O (its selector's ``select``) are counted as idle; the other threads' stacks go to ``OUT.threads``, a
thread waiting for work counted as idle. ``bench/operator_process.py`` starts the operator this way when
HELMOP_BENCH_SAMPLES names a folder; ``--report OUT`` prints the functions the samples spent most of their time
in (own and with callees), idle left out. Wall-clock samples, not CPU time, and taken when the sampler gets the
GIL: mostly when the loop lets it go, in a socket write or a ``stat``, so those calls are over-counted. For the
loop's CPU, ``cProfile.Profile(time.thread_time)`` in the operator's process tells better.
"""

from __future__ import annotations

import atexit
import collections
import runpy
import sys
import threading
import time
from pathlib import Path

INTERVAL = 0.005
IDLE = ("selectors.py:select", "thread.py:_worker", "threading.py:wait")


def _stack(frame: object) -> str:
    names = []
    while frame is not None:
        code = frame.f_code  # type: ignore[attr-defined]
        names.append(f"{Path(code.co_filename).name}:{code.co_name}")
        frame = frame.f_back  # type: ignore[attr-defined]
    return ";".join(reversed(names))


def sample(out: Path) -> None:
    main = threading.main_thread().ident
    counts: collections.Counter[str] = collections.Counter()
    others: collections.Counter[str] = collections.Counter()

    def write() -> None:
        out.write_text("".join(f"{stack} {n}\n" for stack, n in counts.most_common()))
        out.with_suffix(".threads").write_text("".join(f"{stack} {n}\n" for stack, n in others.most_common()))

    def loop() -> None:
        written = time.monotonic()
        while True:
            time.sleep(INTERVAL)
            for ident, frame in sys._current_frames().items():
                if ident == main:
                    counts[_stack(frame)] += 1
                elif ident != threading.get_ident():
                    others[_stack(frame)] += 1
            if time.monotonic() - written > 10:
                write()
                written = time.monotonic()

    threading.Thread(target=loop, name="stack-sampler", daemon=True).start()
    atexit.register(write)


def report(out: Path, top: int = 40) -> None:
    own: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    busy = idle = 0
    for line in out.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")
        if frames[-1].endswith(IDLE):
            idle += int(n)
            continue
        busy += int(n)
        own[frames[-1]] += int(n)
        for name in set(frames):
            total[name] += int(n)
    print(f"{busy} busy samples, {idle} idle ({INTERVAL * 1000:.0f} ms apart)")
    for title, counter in (("own", own), ("with callees", total)):
        print(f"-- {title}")
        for name, n in counter.most_common(top):
            print(f"{100 * n / max(busy, 1):5.1f}%  {name}")


def main() -> None:
    if sys.argv[1] == "--report":
        report(Path(sys.argv[2]))
        return
    out, flag, module, *rest = sys.argv[1:]
    assert flag == "-m", "stack_sampler.py OUT -m MODULE ARGS..."
    sys.argv = [module, *rest]
    sample(Path(out))
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
