"""spec.healthCheckExprs evaluated off the event loop, in a child process with a time and a memory limit.

The ``cel`` library evaluates in Rust while holding the GIL, with no cost limit: a short expression of
nested comprehensions runs for minutes, and neither a thread nor asyncio can interrupt it. Kubernetes
bounds CEL by an estimated cost before running it and a runtime cost budget while it runs; helmop
refuses expressions over a static budget when the spec is read (:func:`helmop.reconcile.health.cost_problem`)
and runs the rest here: one long-lived child (``python -m helmop.controllers.celworker``) answers one JSON
line per request; a request that takes longer than ``timeout`` kills it (the next request starts a new
one), and its address space is capped, so a runaway expression costs a bounded time and memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import sys
from dataclasses import dataclass, field
from typing import Any

MEMORY = 512 << 20  # the child's address space
TIMEOUT = 1.0  # seconds for one object's expressions
_LINE = 64 << 20  # an object is at most 1.5 MiB in etcd; its expressions' answers are a few booleans


class CelTimeout(Exception):
    """The expressions did not finish in time (or the child died): they count as not true."""


@dataclass
class CelWorker:
    timeout: float = TIMEOUT
    memory: int = MEMORY
    _proc: asyncio.subprocess.Process | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def evaluate(self, expressions: list[str], obj: dict[str, Any]) -> list[bool]:
        """Whether each expression is true of ``obj`` (``self``); an expression that fails is not true."""
        request = json.dumps({"expressions": expressions, "self": obj}).encode() + b"\n"
        async with self._lock:
            proc = await self._started()
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write(request)
                await proc.stdin.drain()
                line = await asyncio.wait_for(proc.stdout.readline(), self.timeout)
            except (TimeoutError, ConnectionError) as exc:
                await self.close()
                raise CelTimeout(f"the expressions did not finish within {self.timeout:g}s") from exc
            if not line:  # the child died (its memory limit)
                await self.close()
                raise CelTimeout("the expressions exceeded the memory an evaluation may use")
            answers: list[bool] = json.loads(line)
            return answers

    async def _started(self) -> asyncio.subprocess.Process:
        if self._proc is None or self._proc.returncode is not None:
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "helmop.controllers.celworker", str(self.memory),
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
                limit=_LINE, start_new_session=True)
        return self._proc

    async def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()


def main() -> None:
    """The child: cap the address space, then answer each request line with a JSON list of booleans."""
    memory = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    os.nice(10)  # a runaway expression competes with the operator's loop for CPU until it is killed
    import cel  # after the cap: what it allocates counts

    programs: dict[str, Any] = {}
    for line in sys.stdin:
        request = json.loads(line)
        answers = []
        for expression in request["expressions"]:
            try:
                if len(programs) > 256:
                    programs.clear()
                program = programs.get(expression) or programs.setdefault(expression, cel.compile(expression))
                answers.append(program.execute({"self": request["self"]}) is True)
            except Exception:  # a field the object does not have yet, a type error: not true (yet)
                answers.append(False)
        sys.stdout.write(json.dumps(answers) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
