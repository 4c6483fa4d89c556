"""What the sandbox's tests share: the real binaries (kubectl, helm, helm3) run against a sandbox, and raw
HTTP to it."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests
from helmop_sandbox import Sandbox

# The binaries the repository's set-up installs (scripts/install-tools), or HELMOP_TOOLS.
TOOLS = Path(os.environ.get("HELMOP_TOOLS", Path(__file__).resolve().parents[2] / ".tools" / "bin"))

Run = Callable[..., subprocess.CompletedProcess[str]]


def tool(name: str) -> str:
    path = TOOLS / name
    if not path.exists():
        pytest.fail(f"{path} is missing: run scripts/install-tools (the test command does)")
    return str(path)


def runner(sandbox: Sandbox) -> Run:
    """Run kubectl, helm or helm3 against ``sandbox``, helm's homes in its work directory."""
    home = sandbox.workdir
    env = {**os.environ, "KUBECONFIG": str(sandbox.kubeconfig), "HELM_CACHE_HOME": str(home / "helm-cache"),
           "HELM_CONFIG_HOME": str(home / "helm-config"), "HELM_DATA_HOME": str(home / "helm-data"),
           # kubectl's discovery cache is keyed by host:port, and a port is reused by the next sandbox
           "KUBECACHEDIR": str(home / "kube-cache")}

    def run(*args: str, check: bool = True, timeout: float = 120,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([tool(args[0]), *args[1:]], env=env, capture_output=True, text=True,
                              timeout=timeout, input=stdin)
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        return done

    return run


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
