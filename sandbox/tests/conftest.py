"""Fixtures of the sandbox's tests (the `sandbox` and `namespace` fixtures come from its pytest plugin)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from helmop_sandbox import Sandbox
from support import Raw, runner

from tests.tools import Run


@pytest.fixture(scope="module")
def http(sandbox: Sandbox) -> Iterator[Raw]:
    raw = Raw(sandbox)
    yield raw
    raw.session.close()


@pytest.fixture(scope="session")
def run(sandbox: Sandbox) -> Run:
    """Run a real binary (kubectl, helm, helm3) against the sandbox."""
    return runner(sandbox)


@pytest.fixture(scope="session")
def k8s(sandbox: Sandbox) -> Iterator[object]:
    """The official kubernetes Python client, configured from the sandbox's kubeconfig."""
    from kubernetes import config

    api_client = config.new_client_from_config(config_file=str(sandbox.kubeconfig))
    yield api_client
    api_client.close()
