"""A pytest plugin: ``pytest_plugins = ["helmop_sandbox.testing"]`` gives tests a ``sandbox``.

One sandbox serves the whole session (starting one costs a TLS key pair and the schema load);
tests keep apart by using namespaces of their own (the ``namespace`` fixture). ``pytest
--sandbox-faults SPEC`` runs it with injected API faults (:mod:`.faults`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from .embedded import Sandbox


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--sandbox-faults", metavar="SPEC", default=None,
                     help="run the session's sandbox with injected API faults (see helmop_sandbox.faults)")


@pytest.fixture(scope="session")
def sandbox(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    with Sandbox(ready_delay=0.05, faults=request.config.getoption("--sandbox-faults")) as sb:
        yield sb


@pytest.fixture
def namespace(sandbox: Sandbox) -> str:
    """A fresh namespace in the session's sandbox."""
    assert sandbox.api is not None
    name = f"t-{uuid.uuid4().hex[:8]}"
    rt = sandbox.api.type_of(("", "namespaces"))
    from .apiserver import WriteOptions

    sandbox.api.create(rt, "", {"metadata": {"name": name}}, WriteOptions(manager="pytest"))
    return name
