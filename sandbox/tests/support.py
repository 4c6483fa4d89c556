"""What the sandbox's tests share: the real binaries (kubectl, helm, helm3) run against a sandbox (through the
repository's binary runner, tests/tools.py, which knows nothing of the operator), and raw HTTP to it."""

from __future__ import annotations

import json
from typing import Any

import requests
from helmop_sandbox import Sandbox

from tests.tools import Run
from tests.tools import runner as binaries


def runner(sandbox: Sandbox) -> Run:
    """Run kubectl, helm or helm3 against ``sandbox``, helm's homes in its work directory."""
    return binaries(sandbox.kubeconfig, sandbox.workdir)


class Raw:
    """Plain HTTP to the sandbox: what each status code and body really are."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.base = sandbox.url
        self.session = requests.Session()
        self.session.trust_env = False  # else $REQUESTS_CA_BUNDLE replaces our CA
        self.session.verify = str(sandbox.ca_file)
        self.session.headers["Authorization"] = f"Bearer {sandbox.token}"

    def __call__(self, method: str, path: str, body: Any = None, *, ctype: str = "application/json",
                 raw: bytes | None = None, **params: Any) -> tuple[int, Any]:
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        r = self.session.request(method, self.base + path, data=data, params=params,
                                 headers={"Content-Type": ctype} if data is not None else {})
        try:
            return r.status_code, r.json()
        except ValueError:
            return r.status_code, r.text
