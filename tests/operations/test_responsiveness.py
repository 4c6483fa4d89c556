"""An operator that stays responsive: large and endless repository indexes, probes that mean something,
and termination within 5 s (issue "Scale and stay responsive")."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helmop_sandbox import Sandbox

from tests.chartrepo import ChartRepo
from tests.tools import Run

from .conftest import Replica, free_port, helm_recorder, helmrelease, ready_condition

# A server for the index tests, in a process of its own so that it does not compete with the sandbox
# for this process's interpreter: /big/index.yaml is a valid 31 MB index; /endless/index.yaml never ends.
INDEX_SERVER = r"""
import http.server, sys
big = open(sys.argv[2], "rb").read()

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    def log_message(self, *args): pass
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/x-yaml")
        if self.path.startswith("/big/"):
            self.send_header("Content-Length", str(len(big)))
            self.end_headers()
            self.wfile.write(big)
            return
        self.end_headers()
        self.wfile.write(b"apiVersion: v1\nentries:\n  endless:\n")
        line = b"  - version: 1.0.0\n    urls: [https://example.com/endless-1.0.0.tgz]\n" * 1000
        try:
            while True:
                self.wfile.write(line)
        except (BrokenPipeError, ConnectionResetError):
            pass

http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


def big_index(path: Path, charts: int = 600, versions: int = 100) -> Path:
    """A repository index of ~31 MB, shaped like real ones (every field helm writes)."""
    with path.open("w") as out:
        out.write("apiVersion: v1\nentries:\n")
        for c in range(charts):
            out.write(f"  chart{c}:\n")
            for v in range(versions):
                out.write(f"""  - apiVersion: v2
    appVersion: 1.{v}.0
    created: "2024-01-01T00:00:00Z"
    description: Chart number {c}, with a description as long as real ones tend to be
    digest: {"a" * 64}
    home: https://example.com/chart{c}
    keywords: [a, b, c]
    maintainers:
    - email: x@example.com
      name: someone
    name: chart{c}
    sources: [https://github.com/example/chart{c}]
    urls:
    - https://example.com/charts/chart{c}-1.{v}.0.tgz
    version: 1.{v}.0
""")
        out.write("generated: \"2024-01-01T00:00:00Z\"\n")
    return path


@pytest.fixture(scope="module")
def index_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("indexes")
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", INDEX_SERVER, str(port), str(big_index(root / "big.yaml"))])
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            break
        except OSError:
            assert time.monotonic() < deadline, "index server did not start"
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}"
    proc.kill()
    proc.wait()


@pytest.fixture(scope="module")
def replica(cluster: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replica]:
    # Only its own namespaces: other tests of this package run operators of their own next to it.
    op = Replica(cluster, tmp_path_factory.mktemp("solo"), "--namespace", "big", "--namespace", "endless")
    op.wait_ready()
    yield op
    op.stop()


def _condition_while_probing(replica: Replica, kubectl: Run, namespace: str, name: str,
                             timeout: float = 120) -> tuple[dict[str, str], float]:
    """(the HelmRelease's Ready condition once it has a reason other than progress, the slowest /healthz
    answer meanwhile), probing every 20 ms."""
    slowest, deadline, last_check = 0.0, time.monotonic() + timeout, 0.0
    while time.monotonic() < deadline:
        status, _, took = replica.probe("/healthz")
        assert status == 200, replica.output()
        slowest = max(slowest, took)
        if time.monotonic() - last_check > 0.5:
            last_check = time.monotonic()
            ready = ready_condition(kubectl, namespace, name)
            if ready.get("reason") not in (None, "Progressing"):
                return ready, slowest
        time.sleep(0.02)
    raise AssertionError(f"no outcome within {timeout}s:\n{replica.output()}")


@pytest.mark.alone  # a bound on latency: measured with nothing else running
def test_a_31mb_index_does_not_stall_the_operator(replica: Replica, kubectl: Run, index_server: str) -> None:
    kubectl("kubectl", "create", "namespace", "big")
    kubectl("kubectl", "apply", "-f", "-",
            stdin=helmrelease("big", "big", index_server + "/big", chart="chart7", version="9.9.9"))
    ready, slowest = _condition_while_probing(replica, kubectl, "big", "big")
    # The index was read (the message lists its versions), and /healthz never waited for it.
    assert ready["reason"] == "VersionNotFound" and "1.99.0" in ready["message"], ready
    assert slowest < 0.1, f"/healthz took {slowest * 1000:.0f} ms while the index was read"
    assert replica.metric("helmop_event_loop_lag_max_seconds") < 0.1


@pytest.mark.alone  # a bound on latency: measured with nothing else running
def test_an_endless_index_stops_at_the_cap_in_bounded_memory(replica: Replica, kubectl: Run,
                                                              index_server: str) -> None:
    kubectl("kubectl", "create", "namespace", "endless")
    kubectl("kubectl", "apply", "-f", "-",
            stdin=helmrelease("endless", "endless", index_server + "/endless", chart="endless"))
    ready, _ = _condition_while_probing(replica, kubectl, "endless", "endless")
    assert ready["reason"] == "IndexTooLarge", ready
    assert "64 MiB" in ready["message"] and "--helm-index-max-size" in ready["message"]
    assert replica.peak_rss_mib() < 400, f"peak RSS {replica.peak_rss_mib():.0f} MiB"


@pytest.mark.alone  # a bound on latency: measured with nothing else running
def test_sigterm_stops_the_operator_and_its_helm_within_5s(cluster: Sandbox, kubectl: Run, tiny_charts: ChartRepo,
                                                           tmp_path: Path) -> None:
    calls = tmp_path / "helm.log"
    op = Replica(cluster, tmp_path / "op", "--namespace", "hang",
                 helm=helm_recorder(tmp_path / "helm", calls, hang=True))
    try:
        op.wait_ready()
        kubectl("kubectl", "create", "namespace", "hang")
        kubectl("kubectl", "apply", "-f", "-", stdin=helmrelease("hang", "hang", tiny_charts.url))
        hung = Path(f"{calls}.hung")
        deadline = time.monotonic() + 60
        while not hung.exists() or not hung.read_text().strip():
            assert time.monotonic() < deadline, op.output()
            time.sleep(0.1)
        helm_pid = int(hung.read_text())
        took = op.stop(signal.SIGTERM)
        assert took < 5, f"took {took:.1f}s to stop:\n{op.output()}"
        assert op.proc.returncode is not None
        with pytest.raises(ProcessLookupError):  # the hung helm did not outlive the operator
            os.kill(helm_pid, 0)
    finally:
        op.stop(signal.SIGKILL)


class _Proxy:
    """A TCP proxy to the sandbox that can be cut and restored: the API server going away and back."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self.open = threading.Event()
        self.conns: list[socket.socket] = []
        self.listener = socket.create_server(("127.0.0.1", self.port))
        self.open.set()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            client, _ = self.listener.accept()
            if not self.open.is_set():
                client.close()
                continue
            upstream = socket.create_connection(self.target)
            self.conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        self.open.clear()
        for s in self.conns:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        self.conns.clear()

    def restore(self) -> None:
        self.open.set()


# (not `alone`: its 30 s bound waits for the operator's own check of the API, idle meanwhile)
def test_readiness_fails_while_the_api_is_unreachable(cluster: Sandbox, tmp_path: Path) -> None:
    host, port = cluster.url.removeprefix("https://").split(":")
    proxy = _Proxy((host, int(port)))
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(cluster.kubeconfig.read_text().replace(cluster.url, f"https://{host}:{proxy.port}"))
    op = Replica(cluster, tmp_path / "op", "--namespace", "quiet", kubeconfig=kubeconfig)
    try:
        op.wait_ready()
        proxy.cut()
        deadline = time.monotonic() + 30
        while (answer := op.probe("/readyz"))[0] == 200:
            assert time.monotonic() < deadline, "still ready 30 s after the API went away"
            time.sleep(0.5)
        assert answer[0] == 503 and "API server" in answer[1], answer
        assert op.probe("/healthz")[0] == 200  # alive: nothing a restart would fix
        proxy.restore()
        op.wait_ready(30)
    finally:
        op.stop(signal.SIGKILL)
