"""`helmop sandbox` in the foreground: it prints its kubeconfig, serves kubectl, and stops on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.tools import tool


def test_sandbox_command_serves_kubectl(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    proc = subprocess.Popen([sys.executable, "-m", "helmop.cli", "sandbox", "--kubeconfig", str(kubeconfig)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().strip()
        assert first == f"kubeconfig: {kubeconfig}"
        out = subprocess.run([tool("kubectl"), "get", "namespaces", "-o", "name"], capture_output=True, text=True,
                             env={**os.environ, "KUBECONFIG": str(kubeconfig)}, timeout=60, check=True).stdout
        assert "namespace/default" in out.split()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
