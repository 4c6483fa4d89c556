"""Operators as separate processes (`helmop run`), as they run in pods: for what only a process shows
(its memory, its signals, its probes) and for several replicas at once. They share one sandbox."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from helmop_sandbox import Sandbox

from tests.chartrepo import ChartRepo, tiny_chart
from tests.conftest import _runner
from tests.tools import ROOT, TOOLS, Run, eventually, tool

HELMOP = Path(sys.executable).with_name("helmop")
# Leases of 6 s instead of 15 (renewed every second, given up after 4 s without): a standby takes a dead leader's
# place, or the members a dead one's range, as it would with the defaults, 9 s sooner.
SHORT_LEASES = ("--leader-election-lease-duration", "6s", "--leader-election-renew-deadline", "4s",
                "--leader-election-retry-period", "1s")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def helm_recorder(path: Path, log: Path, *, hang: bool = False) -> Path:
    """A helm that logs "<operator pid> <args>" (its parent is the operator) and runs the real helm; with
    ``hang``, install/upgrade never finish (they sleep, after writing their pid next to the log)."""
    upgrade = f'echo $$ > {log}.hung; exec sleep 600' if hang else f'exec {TOOLS / "helm"} "$@"'
    path.write_text(f"""#!/bin/sh
echo "$PPID $@" >> {log}
case "$1" in
  upgrade) {upgrade} ;;
  *) exec {TOOLS / "helm"} "$@" ;;
esac
""")
    path.chmod(0o755)
    return path


class Replica:
    """One `helmop run` process with its probes on a port of its own."""

    def __init__(self, sandbox: Sandbox, workdir: Path, *args: str, helm: Path | None = None,
                 kubeconfig: Path | None = None, env: dict[str, str] | None = None) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.log = workdir / "operator.log"
        env = {**os.environ, "HELMOP_HELM": str(helm or TOOLS / "helm"), "PATH": f"{TOOLS}:{os.environ['PATH']}",
               **(env or {})}
        self.proc = subprocess.Popen(
            [str(HELMOP), "run", "--kubeconfig", str(kubeconfig or sandbox.kubeconfig), "--cache-dir",
             str(workdir / "cache"), "--metrics-port", str(self.port), "--bind-address", "127.0.0.1", *args],
            stdout=self.log.open("w"), stderr=subprocess.STDOUT, env=env)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def probe(self, path: str, timeout: float = 2.0) -> tuple[int, str, float]:
        """(status, body, seconds it took); status 0 when nothing answered."""
        started = time.monotonic()
        try:
            r = requests.get(self.url + path, timeout=timeout)
            return r.status_code, r.text, time.monotonic() - started
        except requests.RequestException:
            return 0, "", time.monotonic() - started

    def wait_ready(self, timeout: float = 60) -> None:
        eventually(lambda: self._alive() and self.probe("/readyz")[0] == 200, timeout)

    def wait_serving(self, timeout: float = 60) -> None:
        """Until the probes answer at all (a standby is not ready, but it answers)."""
        eventually(lambda: self._alive() and self.probe("/healthz")[0] == 200, timeout)

    def _alive(self) -> bool:
        assert self.proc.poll() is None, f"operator exited ({self.proc.returncode}):\n{self.output()}"
        return True

    def metric(self, name: str) -> float:
        for line in requests.get(self.url + "/metrics", timeout=5).text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        raise AssertionError(f"no metric {name}")

    def peak_rss_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        raise AssertionError("no VmHWM")

    def output(self) -> str:
        return self.log.read_text()[-4000:] if self.log.exists() else ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> float:
        """Send ``sig`` and wait; the seconds it took the process to exit."""
        started = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return time.monotonic() - started


@pytest.fixture(scope="package")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    """A sandbox with helmop's CRDs, shared by this package's operators."""
    with Sandbox(ready_delay=0.05) as sandbox:
        crds = [arg for path in sorted((ROOT / "crds").glob("*.yaml")) for arg in ("-f", str(path))]
        subprocess.run([tool("kubectl"), "--kubeconfig", str(sandbox.kubeconfig), "apply", "--server-side", *crds],
                       check=True, capture_output=True)
        subprocess.run([tool("kubectl"), "--kubeconfig", str(sandbox.kubeconfig), "wait", "--for",
                        "condition=Established", "crd", "--all"], check=True, capture_output=True)
        yield sandbox


@pytest.fixture(scope="package")
def kubectl(cluster: Sandbox) -> Run:
    return _runner(cluster)


@pytest.fixture(scope="package")
def tiny_charts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChartRepo]:
    """A repository with a chart of one ConfigMap: installs cost helm little, so tests can run many."""
    root = tmp_path_factory.mktemp("tiny")
    source = tiny_chart(root / "src", "greeting: hello\n", "  greeting: {{ .Values.greeting | quote }}\n")
    repo = ChartRepo(root, source, tool("helm"))
    repo.publish("tiny", "0.1.0")
    yield repo
    repo.close()


def helmrelease(name: str, namespace: str, repo_url: str, *, labels: dict[str, str] | None = None,
                chart: str = "tiny", version: str = "0.1.0", values: dict[str, Any] | None = None) -> str:
    return json.dumps({
        "apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {"interval": "10m", "chart": {"repository": {"url": repo_url, "name": chart, "version": version}},
                 **({"values": values} if values else {})}})


def ready_condition(kubectl: Run, namespace: str, name: str) -> dict[str, str]:
    out = kubectl("kubectl", "-n", namespace, "get", "hr", name, "-o", "json", check=False)
    if out.returncode != 0:
        return {}
    conditions = (json.loads(out.stdout).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Ready"), {})


def installs_by_release(log: Path) -> dict[str, set[int]]:
    """release name -> pids of the operators that started `helm upgrade --install` for it."""
    return defaultdict(set, {release: set(pids) for release, pids in upgrades_since(log).items()})


def all_ready(kubectl: Run, namespace: str, names: list[str], timeout: float, generation: int = 0) -> None:
    """Until every HelmRelease named is Ready (for ``generation`` of its spec, when given); polled gently (each
    poll is a kubectl of every object)."""
    deadline = time.monotonic() + timeout
    pending = list(names)
    while pending:
        assert time.monotonic() < deadline, f"not Ready within {timeout}s: {pending[:5]} ({len(pending)} left)"
        listed = json.loads(kubectl("kubectl", "-n", namespace, "get", "hr", "-o", "json").stdout)["items"]
        ready = {o["metadata"]["name"] for o in listed
                 if any(c["type"] == "Ready" and c["status"] == "True"
                        and (not generation or c.get("observedGeneration") == generation)
                        for c in o.get("status", {}).get("conditions", []))}
        pending = [n for n in pending if n not in ready]
        time.sleep(0.5 if len(names) < 20 else 1 if generation else 3)


def upgrades_since(log: Path, after: int = 0) -> dict[str, list[int]]:
    """release -> pids of the operators that ran `helm upgrade` for it (each time), from line ``after`` of the
    log (a helm_recorder's) on."""
    by_release: dict[str, list[int]] = defaultdict(list)
    for line in log.read_text().splitlines()[after:] if log.exists() else []:
        pid, verb, *rest = line.split()
        if verb == "upgrade":
            by_release[rest[0]].append(int(pid))
    return by_release
