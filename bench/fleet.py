"""One helmop delivering to a fleet: C sandboxes as remote clusters, N HelmReleases spread over them (each on the
management sandbox, in the namespace of its cluster, with ``spec.kubeConfig`` naming that namespace's kubeconfig
Secret), until all are Ready; then the same N raw ``helm upgrade --install --wait`` against each cluster (the
same spread and concurrency); then a no-op resync.

    .venv/bin/python bench/fleet.py --clusters 10 --count 1000             # 10 x 100, against raw helm
    .venv/bin/python bench/fleet.py --clusters 10 --count 1000 --down stopped --no-raw   # one cluster gone
    .venv/bin/python bench/fleet.py --clusters 10 --count 1000 --down frozen --no-raw    # one cluster hanging
    .venv/bin/python bench/fleet.py --clusters 10 --count 1000 --local --no-raw # baseline: C namespaces, no remote

Release ``i`` goes to cluster ``i % C`` (namespace ``c<k>`` on the management sandbox, the same namespace on the
remote, created by helm). The management sandbox runs in this process; each remote sandbox is a child process
(``python -m helmop_sandbox``), so that ten of them are not one Python thread, and the operator is ``helmop run``
in a child process (its memory, CPU and loop lag its own). ``--down stopped``: cluster 0's sandbox is stopped
(SIGTERM: its port refuses connections) before the releases are applied; ``--down frozen``: it is SIGSTOPped
(connections open, nothing answers). The figures then are the other clusters' time to all Ready and how long
cluster 0's releases took to say ClusterUnreachable; a normal run prints the same per-cluster times for
comparison. ``--local``: the same spread over C namespaces of the management cluster,
no kubeConfig: what the remotes themselves cost.

Connections are the operator's established TCP sockets (from /proc/<pid>/fd and /proc/net/tcp{,6}), counted by
server: their peak during the burst (sampled every second) and what is held once idle; /healthz is asked every
second of the burst (the slowest answer, and how many were not 200). Prints a summary, then
one JSON line. Not a test: it prints numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
import yaml
from helmop_sandbox import Sandbox
from helmreleases import (
    Ours,
    bench_chart,
    cpu_seconds,
    current_rss_mib,
    helm_wrapper,
    idle,
    metric,
    metric_sum,
    noop,
    peak_rss_mib,
    raw_helm,
    wait_all,
)
from operator_process import kubectl, start_operator

SETTLE = 20.0  # seconds after idle before the held connections and memory are read (aiohttp keeps idle ones 15 s)


@dataclass
class RemoteSandbox:
    """A sandbox in a child process, as a remote cluster."""

    proc: subprocess.Popen[str]
    kubeconfig: Path
    port: int

    @classmethod
    def start(cls, work: Path, k: int) -> RemoteSandbox:
        kubeconfig = work / f"cluster-{k}.yaml"
        proc = subprocess.Popen([sys.executable, "-m", "helmop_sandbox", "--kubeconfig", str(kubeconfig),
                                 "--ready-delay", "0.05"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                text=True)
        assert proc.stdout is not None
        for line in proc.stdout:  # "kubeconfig: ...", then "server: https://127.0.0.1:<port>"
            if line.startswith("server: "):
                threading.Thread(target=proc.stdout.read, daemon=True).start()  # never blocks on a full pipe
                return cls(proc, kubeconfig, int(line.rsplit(":", 1)[1]))
        raise SystemExit(f"sandbox {k} did not start ({proc.wait()})")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)  # a frozen one too
            self.proc.terminate()
            self.proc.wait(30)


def tcp_connections(pid: int) -> Counter[int]:
    """The process's established TCP connections, by the port of the other end."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    by_port: Counter[int] = Counter()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "01" and fields[9] in inodes:  # ESTABLISHED
                by_port[int(fields[2].rsplit(":", 1)[1], 16)] += 1
    return by_port


class Sampler:
    """The operator's connections per server, sampled every second while a burst runs: the peak of each; and its
    /healthz asked as often: the slowest answer and the answers that were not 200."""

    def __init__(self, pid: int, port: int) -> None:
        self.pid, self.port, self.peak, self._stop = pid, port, Counter[int](), threading.Event()
        self.healthz_max_ms, self.healthz_failed = 0.0, 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            for port, n in tcp_connections(self.pid).items():
                self.peak[port] = max(self.peak[port], n)
            try:
                status, ms = healthz_ms(self.port)
            except requests.RequestException:
                status, ms = 0, 30_000.0
            self.healthz_max_ms = max(self.healthz_max_ms, ms)
            self.healthz_failed += status != 200

    def stop(self) -> Counter[int]:
        self._stop.set()
        self._thread.join()
        return self.peak


def kubeconfig_secret(namespace: str, text: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "kubeconfig", "namespace": namespace, "labels": {"helmop.dev/cluster": namespace}},
            "data": {"value": base64.b64encode(text.encode()).decode()}}


def fleet(count: int, clusters: list[RemoteSandbox] | int, url: str, drift: str
          ) -> tuple[list[str], list[dict[str, Any]]]:
    """The namespaces and objects of a run: release ``i`` in namespace ``c<i % C>``, naming its kubeconfig Secret
    (``clusters`` a number: the management cluster's own namespaces, no kubeConfig)."""
    n = clusters if isinstance(clusters, int) else len(clusters)
    namespaces = [f"c{k}" for k in range(n)]
    docs = [] if isinstance(clusters, int) else [
        kubeconfig_secret(ns, remote.kubeconfig.read_text()) for ns, remote in zip(namespaces, clusters, strict=True)]
    target = {} if isinstance(clusters, int) else {"kubeConfig": {"secretRef": {"name": "kubeconfig"}}}
    docs += [{"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease",
              "metadata": {"name": f"hr{i}", "namespace": namespaces[i % n]},
              "spec": {"interval": "1h", "chart": {"repository": {"url": url, "name": "bench", "version": "1.0.0"}},
                       "install": {"createNamespace": True}, **target,
                       "values": {"fullnameOverride": f"hr{i}"}, "driftDetection": {"mode": drift}}}
             for i in range(count)]
    return namespaces, docs


def per_cluster(times: dict[str, float], namespaces: list[str]) -> dict[str, float]:
    """Each cluster's time to all Ready (its last release's), from the Ready times of "namespace/name"."""
    return {ns: round(max((t for name, t in times.items() if name.startswith(ns + "/")), default=0.0), 1)
            for ns in namespaces}


def conditions(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return list((obj.get("status") or {}).get("conditions") or [])


class Unreachable:
    """Polls (every 2 s, in a thread) until ``count`` HelmReleases of ``namespace`` say ClusterUnreachable: the
    seconds from ``start`` until the first did (``first``) and all did (``seconds``; NaN until then). Each says it
    at its first turn: the last one's is when the queue of the burst reached it."""

    def __init__(self, kubeconfig: Path, namespace: str, count: int, start: float) -> None:
        self.first = self.seconds = float("nan")
        self._args, self._stop = (kubeconfig, namespace, count, start), threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        kubeconfig, namespace, count, start = self._args
        while not self._stop.wait(2.0):
            items = json.loads(kubectl(kubeconfig, "-n", namespace, "get", "hr", "-o", "json"))["items"]
            said = sum(any(c.get("reason") == "ClusterUnreachable" for c in conditions(hr)) for hr in items)
            if said and self.first != self.first:  # NaN: not yet
                self.first = time.perf_counter() - start
            if said >= count:
                self.seconds = time.perf_counter() - start
                return

    def wait(self, timeout: float) -> float:
        self._thread.join(timeout)
        self._stop.set()
        return self.seconds


def healthz_ms(port: int) -> tuple[int, float]:
    start = time.perf_counter()
    status = requests.get(f"http://127.0.0.1:{port}/healthz", timeout=30).status_code
    return status, 1000 * (time.perf_counter() - start)


def measure(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    repo = bench_chart(work)
    wrapper, calls = helm_wrapper(work, "fleet", args.helm)
    remotes = [] if args.local else [RemoteSandbox.start(work, k) for k in range(args.clusters)]
    try:
        with Sandbox(ready_delay=0.05) as sandbox:
            kc = sandbox.kubeconfig
            operator, port = start_operator(kc, work / "operator.log", "--cache-dir", str(work / "cache"),
                                            "--concurrency", str(args.concurrency), helm=wrapper)
            try:
                figures = run(args, kc, operator.pid, port, remotes, repo.url, calls, sandbox.port)
            finally:
                operator.terminate()
                operator.wait(30)
            print(json.dumps(figures), flush=True)  # helmop's figures, before raw helm's
            if args.raw and not args.local and not args.down:
                start, ours = [cpu_seconds(r.proc.pid) for r in remotes], Ours()
                chart = next(repo.dir.glob("*.tgz"))
                figures["raw_helm_s"] = round(asyncio.run(raw_helm(
                    args.count, args.concurrency, args.helm, chart, [r.kubeconfig for r in remotes], "raw")), 1)
                figures["ratio"] = round(figures["helmop_s"] / figures["raw_helm_s"], 2)
                sandboxes_cpu = sum(cpu_seconds(r.proc.pid) - s for r, s in zip(remotes, start, strict=True))
                figures["raw_sandboxes_cpu_s"] = round(sandboxes_cpu, 1)
                figures["raw_others_cpu_s"] = round(ours.others() - sandboxes_cpu)
    finally:
        for remote in remotes:
            remote.stop()
        repo.close()
    return figures


def run(args: argparse.Namespace, kc: Path, pid: int, port: int, remotes: list[RemoteSandbox], url: str,
        calls: Path, management_port: int) -> dict[str, Any]:
    n = args.clusters
    namespaces, docs = fleet(args.count, n if args.local else remotes, url, args.drift)
    per = args.count // n
    if args.down:  # cluster 0
        if args.down == "frozen":
            os.kill(remotes[0].proc.pid, signal.SIGSTOP)
        else:
            remotes[0].proc.terminate()
            remotes[0].proc.wait(30)
    live = [r for r in remotes if r.proc.poll() is None]
    idle_rss, cpu0, helm0 = current_rss_mib(pid), cpu_seconds(pid), cpu_seconds(pid, children=True)
    sandboxes_cpu0, ours = [cpu_seconds(r.proc.pid) for r in live], Ours()
    sampler = Sampler(pid, port)
    times: dict[str, float] = {}
    start = time.perf_counter()
    for namespace in namespaces:
        kubectl(kc, "create", "namespace", namespace)
    kubectl(kc, "apply", "-f", "-", stdin=yaml.safe_dump_all(docs))
    unreachable = Unreachable(kc, namespaces[0], per, start) if args.down else None
    expected = args.count - (per if args.down else 0)
    applied = time.perf_counter() - start
    wait_all(kc, expected, times=times)
    helmop_s = time.perf_counter() - start
    burst_cpu, helm_cpu = cpu_seconds(pid) - cpu0, cpu_seconds(pid, children=True) - helm0
    sandboxes_cpu = sum(cpu_seconds(r.proc.pid) - s for r, s in zip(live, sandboxes_cpu0, strict=True))
    others_cpu = ours.others() - burst_cpu - helm_cpu - sandboxes_cpu
    times = {name: applied + t for name, t in times.items()}  # from before the apply, as helmop_s
    figures: dict[str, Any] = {"clusters": n, "count": args.count, "local": args.local, "down": args.down or "",
                               "helmop_s": round(helmop_s, 1), "per_cluster_s": per_cluster(times, namespaces)}
    if unreachable is not None:
        figures["down_unreachable_s"] = round(unreachable.wait(300), 1)
        figures["down_first_unreachable_s"] = round(unreachable.first, 1)
        figures["others_s"] = figures["helmop_s"]
    else:
        figures["others_s"] = max(figures["per_cluster_s"][ns] for ns in namespaces[1:])
    peak = sampler.stop()
    if not args.down:
        idle([port])
    time.sleep(SETTLE)
    held = tcp_connections(pid)
    servers = {management_port: "management", **{r.port: f"c{k}" for k, r in enumerate(remotes)}}
    figures.update({
        "burst_cpu_s": round(burst_cpu, 1), "idle_rss_mib": round(idle_rss, 1),
        "peak_rss_mib": round(peak_rss_mib(pid), 1), "settled_rss_mib": round(current_rss_mib(pid), 1),
        "connections_peak": {servers.get(p, "other"): c for p, c in sorted(peak.items())},
        "connections_held": {servers.get(p, "other"): c for p, c in sorted(held.items())},
        "helm_cpu_s": round(helm_cpu, 1), "sandboxes_cpu_s": round(sandboxes_cpu, 1), "others_cpu_s": round(others_cpu),
        "helm_processes": len(calls.read_text().splitlines()),
        "healthz_max_ms": round(sampler.healthz_max_ms), "healthz_failed": sampler.healthz_failed})
    figures["rss_per_cluster_mib"] = round((figures["settled_rss_mib"] - idle_rss) / n, 2)
    figures["cpu_per_cluster_s"] = round(burst_cpu / n, 2)
    if args.down:
        figures["max_loop_lag_ms"] = round(1000 * metric(port, "helmop_event_loop_lag_max_seconds"))
        return figures
    helm_before, cpu_before = len(calls.read_text().splitlines()), cpu_seconds(pid)
    compared = metric_sum(port, "helmop_drift_checks_total", 'result="compared"')
    figures["noop_s"] = round(noop(kc, namespaces, args.count), 1)
    figures["noop_cpu_s"] = round(cpu_seconds(pid) - cpu_before, 1)
    figures["noop_helm"] = len(calls.read_text().splitlines()) - helm_before
    figures["noop_dry_runs"] = int(metric_sum(port, "helmop_drift_checks_total", 'result="compared"') - compared)
    figures["max_loop_lag_ms"] = round(1000 * metric(port, "helmop_event_loop_lag_max_seconds"))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", type=int, default=10, metavar="C")
    parser.add_argument("--count", type=int, default=1000, help="HelmReleases over all clusters (default 1000)")
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--helm", default="helm", choices=["helm", "helm3"])
    parser.add_argument("--drift", default="warn", choices=["warn", "enabled", "disabled"])
    parser.add_argument("--down", choices=["stopped", "frozen"], help="cluster 0 stopped, or frozen, from the start")
    parser.add_argument("--local", action="store_true", help="C namespaces of the management cluster instead")
    parser.add_argument("--raw", action=argparse.BooleanOptionalAction, default=True,
                        help="also run raw helm against each cluster (default; --no-raw: helmop only)")
    args = parser.parse_args()
    if args.local and args.down:
        parser.error("--down needs remote clusters")
    work = Path(tempfile.mkdtemp(prefix="helmop-fleet-"))
    figures = measure(args, work)
    print(f"{args.count} HelmReleases over {args.clusters} {'namespaces' if args.local else 'remote clusters'}"
          f"{f' (cluster 0 {args.down})' if args.down else ''}: all Ready in {figures['helmop_s']} s"
          + (f", raw helm {figures['raw_helm_s']} s (ratio {figures['ratio']})" if "raw_helm_s" in figures else ""))
    print(f"  per cluster: {figures['per_cluster_s']}")
    print(f"  operator: CPU {figures['burst_cpu_s']} s ({figures['cpu_per_cluster_s']} s per cluster), RSS idle "
          f"{figures['idle_rss_mib']} / peak {figures['peak_rss_mib']} / settled {figures['settled_rss_mib']} MiB "
          f"({figures['rss_per_cluster_mib']} MiB per cluster); CPU of its helm processes {figures['helm_cpu_s']} s, "
          f"of the remote sandboxes {figures['sandboxes_cpu_s']} s, of other work on the machine "
          f"{figures['others_cpu_s']} s")
    print(f"  connections: peak {figures['connections_peak']}, held {figures['connections_held']}; /healthz every "
          f"second: slowest {figures['healthz_max_ms']} ms, {figures['healthz_failed']} not 200")
    if "noop_s" in figures:
        print(f"  no-op: {figures['noop_s']} s, CPU {figures['noop_cpu_s']} s, helm {figures['noop_helm']}, "
              f"dry runs {figures['noop_dry_runs']}; max loop lag {figures['max_loop_lag_ms']} ms")
    if args.down:
        print(f"  cluster 0's releases ClusterUnreachable: the first after {figures['down_first_unreachable_s']} s, "
              f"all after {figures['down_unreachable_s']} s")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
