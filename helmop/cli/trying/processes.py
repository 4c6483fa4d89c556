"""The processes ``helmop try`` starts: ``helmop run --sandbox`` (the embedded API and the operator, one child
process) and, with ``--ui``, ``helmop ui`` against it. Each is a process group of its own, so that helm and kubectl
processes the operator starts stop with it, and a ``--keep`` outlives the command; their output goes to files in
the run's folder."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import Failed

STARTUP = 180.0  # seconds the sandbox and the operator may take to start (a loaded machine's imports and CRDs)


@dataclass
class Options:
    flux: bool
    chart_mirrors: list[str]
    git_mirrors: list[tuple[str, str]]
    keys: dict[str, bytes]  # --decrypt files, by their key names
    lockdown: list[str] = field(default_factory=list)  # the operator's flags of Flux's multi-tenancy lockdown


@dataclass
class Children:
    work: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    ui: str = ""

    @property
    def kubeconfig(self) -> Path:
        return self.work / "kubeconfig"

    @property
    def log_file(self) -> Path:
        return self.work / "operator.jsonl"

    def tail(self, name: str, lines: int = 20) -> str:
        """The last lines a child process wrote (``name``: operator, ui)."""
        log = self.work / f"{name}.log"
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else ""

    def stop(self) -> None:
        """Each process group, asked to stop, then killed after a while."""
        for process in self.processes:
            _signal(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                _signal(process.pid, signal.SIGKILL)
                process.wait(5)

    def stop_script(self) -> Path:
        """A script that stops what was left running (--keep) and removes the run's folder."""
        groups = " ".join(f"-{process.pid}" for process in self.processes)
        script = self.work / "stop"
        script.write_text("#!/usr/bin/env bash\n# Stops what `helmop try --keep` left running and removes its files.\n"
                          f"groups=({groups})\n"
                          'kill -TERM -- "${groups[@]}" 2>/dev/null\n'
                          "for _ in $(seq 150); do\n"
                          '  alive=false; for g in "${groups[@]}"; do kill -0 -- "$g" 2>/dev/null && alive=true; done\n'
                          "  $alive || break; sleep 0.1\n"
                          "done\n"
                          'kill -KILL -- "${groups[@]}" 2>/dev/null\n'
                          f"rm -rf {shlex.quote(str(self.work))}\n")
        script.chmod(0o755)
        return script


def _signal(group: int, number: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, number)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _spawn(children: Children, name: str, args: list[str]) -> subprocess.Popen[bytes]:
    helm = children.work / "helm"
    env = {**os.environ, "HELM_CACHE_HOME": str(helm / "cache"), "HELM_CONFIG_HOME": str(helm / "config"),
           "HELM_DATA_HOME": str(helm / "data")}
    with (children.work / f"{name}.log").open("wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "helmop.cli", *args], stdin=subprocess.DEVNULL, stdout=out,
                                   stderr=subprocess.STDOUT, env=env, start_new_session=True)
    children.processes.append(process)
    return process


def start_operator(children: Children, options: Options) -> None:
    """The sandbox and the operator, serving the private repository root; returns once the operator is ready."""
    work = children.work
    port = _free_port()
    args = ["run", "--sandbox", "--kubeconfig", str(children.kubeconfig), "--cache-dir", str(work / "cache"),
            "--allow-file-git", str(work / "git"), "--bind-address", "127.0.0.1", "--metrics-port", str(port),
            "--log-file", str(children.log_file)]
    if options.keys:
        keys = work / "keys"
        keys.mkdir(mode=0o700)
        for name, data in options.keys.items():
            (keys / name).write_bytes(data)
        args += ["--decryption-keys", str(keys)]
    args += ["--flux-api"] * options.flux + options.lockdown
    args += [arg for mirror in options.chart_mirrors for arg in ("--chart-mirror", mirror)]
    args += [arg for source, target in options.git_mirrors for arg in ("--git-mirror", f"{source}={target}")]
    process = _spawn(children, "operator", args)
    _wait(children, process, "operator", lambda: _answers(f"http://127.0.0.1:{port}/readyz"), "the operator")


def start_ui(children: Children) -> None:
    """``helmop ui`` on a free loopback port, with the sandbox's kubeconfig; its URL in ``children.ui``."""
    process = _spawn(children, "ui", ["ui", "--kubeconfig", str(children.kubeconfig), "--port", "0",
                                      "--log-file", str(children.log_file)])
    out = children.work / "ui.log"

    def announced() -> bool:
        for line in out.read_text(errors="replace").splitlines() if out.exists() else []:
            if line.startswith("helmop ui: "):
                children.ui = line.removeprefix("helmop ui: ").strip()
        return bool(children.ui)

    _wait(children, process, "ui", announced, "the web UI")


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return int(reply.status) == 200
    except (urllib.error.URLError, OSError):
        return False


def _wait(children: Children, process: subprocess.Popen[bytes], name: str, ready: Callable[[], bool],
          what: str) -> None:
    deadline = time.monotonic() + STARTUP
    while not ready():
        if process.poll() is not None or time.monotonic() > deadline:
            state = f"exited ({process.returncode})" if process.returncode is not None else f"not ready in {STARTUP}s"
            raise Failed(f"{what} {state}:\n{children.tail(name)}")
        time.sleep(0.2)
