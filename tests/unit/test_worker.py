"""The worker process: large YAML loaded off the event loop as helmop would load it in place (the same data,
the same errors with their lines), and bounded in time."""

from __future__ import annotations

import asyncio
import time

import pytest
import yaml

from helmop.api import yamlc
from helmop.api.manifests import YamlProblem
from helmop.infra.worker import Worker, WorkerTimeout


def dense(count: int) -> str:
    return "\n".join(f"k{i}:\n  a: [1, y, '0777', 0777]\n  b: {{c: d, e: [f, g]}}" for i in range(count)) + "\n"


async def test_documents_are_what_helmop_would_read() -> None:
    worker = Worker(timeout=30)
    try:
        text = dense(200) + "---\nsecond: =\n"
        assert await worker.documents(text) == [(node.start_mark.line + 1, data)
                                                for node, data in yamlc.documents(text)]
        with pytest.raises(yaml.YAMLError) as err:
            await worker.documents("a: 1\nb: [1, 2\n")
        assert YamlProblem.of(err.value).line is not None
        with pytest.raises(yaml.YAMLError, match="excessive aliasing"):
            await worker.documents("a0: &a0 [x, x, x, x, x, x, x, x, x]\n" + "\n".join(
                f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)))
    finally:
        await worker.close()


@pytest.mark.alone  # its bound is on time: with the cores busy with other tests, sending the document alone took 5 s
async def test_a_document_too_slow_to_load_is_cut_off() -> None:
    worker = Worker(timeout=0.3)
    try:
        started = time.monotonic()
        with pytest.raises(WorkerTimeout, match="did not finish"):
            await worker.documents(dense(40000))  # a few MiB: seconds of loading
        assert time.monotonic() - started < 5
        assert await worker.documents("a: 1\n") == [(1, {"a": 1})]  # a new child answers the next one
    finally:
        await worker.close()


async def test_an_asker_cancelled_while_waiting_leaves_no_answer_for_the_next() -> None:
    """A turn cancelled while the worker loads its document (its object suspended, deleted): the next asker,
    another object's, gets the answer to its own question, never the one still on its way."""
    worker = Worker(timeout=30)
    try:
        for wait in (0.0, 0.3):  # cancelled while the process starts, and while it loads (seconds of loading)
            first = asyncio.create_task(worker.documents(dense(20000)))
            while not worker._lock.locked():
                await asyncio.sleep(0.01)
            await asyncio.sleep(wait)
            first.cancel()
            with pytest.raises(asyncio.CancelledError):
                await first
            assert await worker.documents("mine: 1\n") == [(1, {"mine": 1})]
    finally:
        await worker.close()
