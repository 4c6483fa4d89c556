"""Work on tenants' input that could hold the event loop, done in a child process with a time and a memory
limit: CEL expressions (health checks, a Provider's commit status name), and large YAML documents.

* The ``cel`` library evaluates in Rust while holding the GIL, with no cost limit: a short expression of
  nested comprehensions runs for minutes, and neither a thread nor asyncio can interrupt it. Kubernetes
  bounds CEL by an estimated cost before running it and a runtime cost budget while it runs; helmop
  refuses expressions over a static budget when the spec is read (:func:`helmop.decisions.health.cost_problem`)
  and runs the rest here.
* libyaml's composer holds the GIL too, and a few MiB of dense YAML take seconds to load. Large documents
  (values, ConfigSync files) are loaded here; Kubernetes' YAML gives JSON data (:mod:`helmop.api.k8syaml`),
  so what comes back is JSON.

One long-lived child per :class:`Worker` (``python -m helmop.infra.worker``) answers one JSON line per
request; a request that takes longer than ``timeout`` kills it (the next request starts a new one), and its
address space is capped, so runaway input costs a bounded time and memory. ``timeout`` counts from the
request, not from the child's start: a child says it is ready once it has imported what it needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from helmop.api import yamlc

MEMORY = 512 << 20  # the child's address space
TIMEOUT = 1.0  # seconds for one object's expressions
_LINE = 256 << 20  # a reply: an object is at most 1.5 MiB in etcd, a parsed document a few times its text
START = 60.0  # a new child's imports (cel, yaml): slow on a loaded machine, and not the input's fault
_READY = b"ready\n"


class WorkerTimeout(Exception):
    """The work did not finish in time (or the child died at its memory limit)."""


@dataclass
class Worker:
    timeout: float = TIMEOUT
    memory: int = MEMORY
    _proc: asyncio.subprocess.Process | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def evaluate(self, expressions: list[str], obj: dict[str, Any],
                       dep: dict[str, Any] | None = None) -> list[bool]:
        """Whether each CEL expression is true of ``obj`` (``self``; and ``dep``, a dependency, when given);
        an expression that fails is not true."""
        variables = {"self": obj, **({"dep": dep} if dep is not None else {})}
        answers: list[bool] = (await self._ask({"op": "cel", "expressions": expressions, "vars": variables}))["ok"]
        return answers

    async def each(self, expressions: list[str], variables: dict[str, Any], name: str,
                   values: list[Any]) -> list[bool]:
        """For each of ``values``, whether every expression is true of ``variables`` with ``name`` bound to it (a
        Receiver's filters over its objects, ``res``; ``req`` sent once); an expression that fails is not true."""
        answers: list[bool] = (await self._ask({"op": "cel-each", "expressions": expressions, "vars": variables,
                                                "name": name, "values": values}))["ok"]
        return answers

    async def validations(self, variables: list[tuple[str, str]], expressions: list[str],
                          claims: dict[str, Any]) -> list[bool] | None:
        """Whether each CEL expression is true of ``claims`` and ``vars``, the ``variables`` (name, expression)
        computed first, in order, each seeing those before it (a generic-oidc Receiver's); None when a variable
        fails."""
        answer = await self._ask({"op": "cel-vars", "variables": variables, "expressions": expressions,
                                  "vars": {"claims": claims}})
        checked: list[bool] | None = answer["ok"]
        return checked

    async def text(self, expression: str, variables: dict[str, Any]) -> str | None:
        """The string the CEL ``expression`` makes of ``variables`` (None when it fails or makes no string)."""
        answer = (await self._ask({"op": "cel-text", "expressions": [expression], "vars": variables}))["ok"]
        return answer if isinstance(answer, str) else None

    async def documents(self, text: str) -> list[tuple[int, Any]]:
        """(first line, data) of each YAML document of ``text``, as :func:`yamlc.documents` reads them; a
        ``yaml.YAMLError`` (with the line and column of the problem) when it does not parse."""
        answer = await self._ask({"op": "yaml", "text": text})
        if "error" in answer:
            raise yamlc.YamlBomb(answer["error"]["problem"], _Mark(answer["error"]["line"], answer["error"]["column"]))
        return [(int(line), data) for line, data in answer["ok"]]

    async def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        line = json.dumps(request).encode() + b"\n"
        async with self._lock:
            try:
                proc = await self._started()
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write(line)
                await proc.stdin.drain()
                reply = await asyncio.wait_for(proc.stdout.readline(), self.timeout)
            except (TimeoutError, ConnectionError) as exc:
                await self.close()
                raise WorkerTimeout(f"did not finish within {self.timeout:g}s") from exc
            except asyncio.CancelledError:
                # the asker stopped (its turn cancelled): the answer (or the starting process's greeting) still on
                # its way would be read by the next asker, another object's, as its own. The process goes with it,
                # at once (no await before the lock is let go).
                self._abandon()
                raise
            if not reply:  # the child died (its memory limit)
                await self.close()
                raise WorkerTimeout(f"exceeded the {self.memory >> 20} MiB it may use")
            answer: dict[str, Any] = json.loads(reply)
            return answer

    async def _started(self) -> asyncio.subprocess.Process:
        if self._proc is None or self._proc.returncode is not None:
            proc = self._proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "helmop.infra.worker", str(self.memory),
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
                limit=_LINE, process_group=0)
            assert proc.stdout is not None
            try:
                ready = await asyncio.wait_for(proc.stdout.readline(), START)
            except TimeoutError:
                ready = b""
            if ready != _READY:
                await self.close()
                raise WorkerTimeout(f"the worker process did not start within {START:g}s")
        return self._proc

    def _abandon(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()

    async def close(self) -> None:
        proc = self._proc
        self._abandon()
        if proc is not None:
            await proc.wait()


@dataclass(frozen=True)
class _Mark:
    """Where a YAML problem is (0-based, as PyYAML's marks), for the messages callers write."""

    line: int
    column: int


def _yaml(text: str) -> dict[str, Any]:
    try:
        return {"ok": [(node.start_mark.line + 1, data) for node, data in yamlc.documents(text)]}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or (str(exc).splitlines() or ["invalid YAML"])[0]
        return {"error": {"problem": str(problem), "line": mark.line if mark else 0,
                          "column": mark.column if mark else 0}}


def _all_true(run: Callable[[str, dict[str, Any]], Any], expressions: list[str], variables: dict[str, Any]) -> bool:
    try:
        return all(run(expression, variables) is True for expression in expressions)
    except Exception:
        return False


def _validations(run: Callable[[str, dict[str, Any]], Any], request: dict[str, Any]) -> list[bool] | None:
    """The variables computed in order into ``vars``, then whether each expression is true (None when a variable
    fails)."""
    computed: dict[str, Any] = {}
    variables = {**request["vars"], "vars": computed}
    try:
        for name, expression in request["variables"]:
            computed[name] = run(expression, variables)
    except Exception:
        return None
    return [_all_true(run, [expression], variables) for expression in request["expressions"]]


def main() -> None:
    """The child: cap the address space and the priority, then answer each request line."""
    memory = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    os.nice(10)  # runaway input competes with the operator's loop for CPU until it is killed
    import cel  # after the cap: what it allocates counts

    sys.stdout.write(_READY.decode())
    sys.stdout.flush()
    programs: dict[str, Any] = {}

    def run(expression: str, variables: dict[str, Any]) -> Any:
        if len(programs) > 256:
            programs.clear()
        program = programs.get(expression) or programs.setdefault(expression, cel.compile(expression))
        return program.execute(variables)

    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "yaml":
            answer = _yaml(request["text"])
        elif request["op"] == "cel-vars":
            answer = {"ok": _validations(run, request)}
        elif request["op"] == "cel-each":
            answer = {"ok": [_all_true(run, request["expressions"], {**request["vars"], request["name"]: value})
                             for value in request["values"]]}
        else:
            results = []
            for expression in request["expressions"]:
                try:
                    results.append(run(expression, request["vars"]))
                except Exception:  # a field the object does not have yet, a type error: not true (yet), no text
                    results.append(None)
            if request["op"] == "cel-text":
                answer = {"ok": results[0] if isinstance(results[0], str) else None}
            else:
                answer = {"ok": [result is True for result in results]}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
