"""What the benchmarks share: the real binaries, and the operator started as `helmop run` in a child
process (so its memory, CPU time and event-loop lag are its own) once its probes say it is ready."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / ".tools" / "bin"


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    return subprocess.run([str(TOOLS / "kubectl"), "--kubeconfig", str(kubeconfig), *args], input=stdin,
                          capture_output=True, text=True, check=True).stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_operator(kubeconfig: Path, log: Path, *args: str, helm: Path) -> tuple[subprocess.Popen[bytes], int]:
    """`helmop run` with its CRDs installed and /metrics on a free port; returns (process, that port)
    once /readyz answers 200. With HELMOP_BENCH_SAMPLES (a folder), its stacks are sampled into
    ``<folder>/<log's name>.stacks`` (``python bench/stack_sampler.py --report FILE`` reads them)."""
    port = free_port()
    samples = os.environ.get("HELMOP_BENCH_SAMPLES")  # a folder: the operator's stacks sampled (stack_sampler.py)
    python = [sys.executable, *([str(Path(__file__).with_name("stack_sampler.py")),
                                 str(Path(samples) / f"{log.stem}.stacks")] if samples else [])]
    with log.open("w") as out:
        proc = subprocess.Popen([*python, "-m", "helmop.cli", "run", "--kubeconfig", str(kubeconfig),
                                 "--install-crds", "--metrics-port", str(port), "--bind-address", "127.0.0.1",
                                 *args], env={**os.environ, "HELMOP_HELM": str(helm)}, stdout=out, stderr=out)
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"the operator exited ({proc.returncode}); see {log}")
        try:
            if requests.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return proc, port
        except requests.RequestException:
            pass
        time.sleep(0.2)
