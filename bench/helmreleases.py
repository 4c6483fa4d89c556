"""HelmRelease throughput and the cost of doing nothing: N HelmReleases applied at once until all are
Ready, next to the same N raw `helm upgrade --install --wait` at the same concurrency; then, once the
operator has no turn running or waiting, a no-op resync (every HelmRelease asked to reconcile, nothing
changed; with drift detection on, by default in warn mode, that pass also compares every release's
objects with helm's record).

    .venv/bin/python bench/helmreleases.py [--count 100 --count 1000] [--concurrency 10] [--helm helm3]
                                           [--drift warn|enabled|disabled] [--layout per-namespace:10]
    .venv/bin/python bench/helmreleases.py --count 3000 --replicas 3    # hash shards: --shards auto
    .venv/bin/python bench/helmreleases.py --count 1000 --source helmrepository --no-raw   # shared sources
    .venv/bin/python bench/helmreleases.py --suspended 10000      # memory per resident, idle HelmRelease

Per count: a fresh sandbox (in this process) and the operator as `helmop run` in a child process, so
its memory (VmHWM), CPU time (/proc/<pid>/stat) and event-loop lag (its /metrics) are its own; helm
is wrapped to count the processes the operator starts, and the sandbox counts the API requests (the
operator's and its helm processes') per installed release. ``--layout`` puts every release in one
namespace (helm 4's --wait watches a whole namespace: the worst case for raw helm) or K per namespace,
for both sides. ``--replicas R``: R operators with ``--shards auto`` (each its own process; raw helm is
not run), their figures per replica, and double actions (helm installs or upgrades beyond one per
release: two replicas acting on one release). ``--source``: the chart from a URL in each release, or
from one HelmRepository or OCIRepository per namespace (its index downloads or tag listings counted).
Prints a table, then one JSON line per count (keys: count, replicas, layout, source, helmop_s,
raw_helm_s, ratio, api_requests_per_release, noop_s, noop_cpu_s, noop_helm, noop_dry_runs (server-side
dry runs of drift checks in the no-op), peak_rss_mib, max_loop_lag_ms, double_actions, source_fetches
(over the run and its no-op), noop_max_loop_lag_ms (the largest loop lag during the no-op), burst_cpu_s,
helm_cpu_s, sandbox_cpu_s (the CPU of the install burst: the operators', their helm processes', this
process's: the sandbox), others_cpu_s (what the rest of the machine took meanwhile: other work sharing it),
raw_others_cpu_s (the same during raw helm's run), per_replica), and, for one-namespace runs from a URL against
raw helm, draws docs/img/helmreleases-<helm>.png when matplotlib (the ``bench`` extra) is installed.
``--suspended N``: N suspended HelmReleases resident (no helm work), the operator's RSS before and after, and
the memory per object. Not a test: it prints numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests
import yaml
from operator_process import ROOT, TOOLS, kubectl, start_operator

sys.path.insert(0, str(ROOT))

from helmop_sandbox import Sandbox

from tests.chartrepo import ChartRepo
from tests.registry import Registry

RESULTS = ROOT / "docs" / "img"  # the docs' Benchmarks page shows the chart
KEYS = ("count", "replicas", "layout", "source", "helmop_s", "raw_helm_s", "ratio", "api_requests_per_release",
        "noop_s", "noop_cpu_s", "noop_helm", "noop_dry_runs", "peak_rss_mib", "max_loop_lag_ms", "double_actions",
        "source_fetches", "noop_max_loop_lag_ms", "burst_cpu_s", "helm_cpu_s", "sandbox_cpu_s", "others_cpu_s",
        "raw_others_cpu_s", "per_replica")


_STATE = ('jsonpath={.metadata.namespace}/{.metadata.name}|{.status.conditions[?(@.type=="Ready")].status}|'
          '{.status.lastHandledReconcileAt}{"\\n"}')


def wait_all(kubeconfig: Path, count: int, key: str = "", times: dict[str, float] | None = None,
             kind: str = "hr") -> float:
    """Until ``count`` HelmReleases (or objects of ``kind``) are Ready (with ``key``: having handled that request),
    from one watch: a list of 1000 HelmReleases every half second took a third of a core from the operator being
    measured. ``times``: filled with the seconds each one ("namespace/name") took to be Ready first."""
    start = time.perf_counter()
    done: set[str] = set()
    while len(done) < count:  # a watch the server ends is started again (its list says all anew)
        with subprocess.Popen([str(TOOLS / "kubectl"), "--kubeconfig", str(kubeconfig), "get", kind, "-A",
                               "--watch", "--chunk-size=0", "-o", _STATE], stdout=subprocess.PIPE, text=True) as watch:
            assert watch.stdout is not None
            for line in watch.stdout:
                name, ready, handled = [*line.strip().split("|"), "", ""][:3]
                if ready == "True" and (not key or handled == key):
                    done.add(name)
                    if times is not None:
                        times.setdefault(name, time.perf_counter() - start)
                else:
                    done.discard(name)
                if len(done) >= count:
                    break
            watch.terminate()
    return time.perf_counter() - start


def cpu_seconds(pid: int, children: bool = False) -> float:
    """A process's CPU time; ``children``: that of its children it waited for (the operator's helm processes)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    first = 13 if children else 11  # cutime + cstime, or utime + stime
    return (int(fields[first]) + int(fields[first + 1])) / os.sysconf("SC_CLK_TCK")


def machine_cpu_seconds() -> float:
    """CPU time every process of the machine used since boot (all cores; /proc/stat's busy columns): what other
    work took during a run is this, less what the run's own processes took."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, Path("/proc/stat").read_text().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


class Ours:
    """What the rest of the machine took since this was made, beside this process and the children it waited for
    (raw helm's processes, kubectl): machine_cpu_seconds less theirs."""

    def __init__(self) -> None:
        self.machine, self.ours = machine_cpu_seconds(), self._ours()

    @staticmethod
    def _ours() -> float:
        own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    def others(self) -> float:
        return machine_cpu_seconds() - self.machine - (self._ours() - self.ours)


def own_cpu_seconds() -> float:
    """This process's CPU time: the sandbox it runs, mostly."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM"))) / 1024


def namespace_of(i: int, per_namespace: int, base: str) -> str:
    """Where release ``i`` goes: ``base``, or ``base-<k>`` with ``per_namespace`` releases in each."""
    return f"{base}-{i // per_namespace}" if per_namespace else base


def parse_layout(text: str) -> int:
    """one-namespace -> 0; per-namespace:K -> K."""
    if text == "one-namespace":
        return 0
    kind, _, k = text.partition(":")
    if kind != "per-namespace" or not k.isdigit() or int(k) < 1:
        raise argparse.ArgumentTypeError("one-namespace or per-namespace:K (K >= 1)")
    return int(k)


def metric(port: int, name: str) -> float:
    for line in requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise LookupError(name)


class LagWatch:
    """The operators' event-loop lag while a phase runs (the no-op): their gauge of the last lag (measured every
    0.1 s) read every second, the largest kept, and their maximum since the start if it grew meanwhile (a spike
    between two reads is then still counted). Not more often: rendering /metrics costs the operator time in
    proportion to its objects (series of each), and read ten times a second it inflated the no-op's CPU."""

    def __init__(self, ports: list[int]) -> None:
        self.ports, self.worst_ms, self._stop = ports, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            lag = max(metric(port, "helmop_event_loop_lag_seconds") for port in self.ports)
            self.worst_ms = max(self.worst_ms, 1000 * lag)

    def __enter__(self) -> LagWatch:
        self._max = [metric(port, "helmop_event_loop_lag_max_seconds") for port in self.ports]
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        for port, was in zip(self.ports, self._max, strict=True):
            now = metric(port, "helmop_event_loop_lag_max_seconds")
            if now > was:
                self.worst_ms = max(self.worst_ms, 1000 * now)


def idle(ports: list[int], timeout: float = 300) -> None:
    """Until no operator has a turn running or waiting: what the burst left to do (the first release looked at
    again once its kinds' watches listed, queued behind the others) is the burst's, not the no-op's."""
    deadline = time.monotonic() + timeout
    while any(metric(port, "helmop_turns_running") + metric(port, "helmop_turns_waiting") for port in ports):
        if time.monotonic() > deadline:
            raise SystemExit(f"the operators still had turns to run {timeout:.0f} s after all were Ready")
        time.sleep(0.2)


async def raw_helm(count: int, concurrency: int, helm: str, chart: Path, kubeconfig: Path | list[Path], ns: str,
                   per_namespace: int = 0) -> float:
    """``per_namespace``: releases per namespace ``<ns>-<k>`` (0: all in ``ns``); ``kubeconfig`` a list: release
    ``i`` goes to the cluster of ``kubeconfig[i % len(kubeconfig)]`` (a fleet)."""
    slots = asyncio.Semaphore(concurrency)
    clusters = kubeconfig if isinstance(kubeconfig, list) else [kubeconfig]

    async def one(i: int) -> None:
        async with slots:
            where = namespace_of(i, per_namespace, ns)
            proc = await asyncio.create_subprocess_exec(
                str(TOOLS / helm), "upgrade", "--install", f"raw{i}", str(chart), "-n", where, "--wait",
                "--create-namespace",
                "--kubeconfig", str(clusters[i % len(clusters)]), "--set", f"fullnameOverride=raw{i}",
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
            _, err = await proc.communicate()
            assert proc.returncode == 0, err.decode()

    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(count)))
    return time.perf_counter() - start


@dataclass
class Source:
    """Where the releases' chart comes from, and how often it was asked: ``inline`` (each release names the
    repository URL), ``helmrepository`` (one HelmRepository per namespace, by sourceRef) or ``ocirepository``
    (one OCIRepository per namespace, by chartRef, from a loopback registry)."""
    kind: str
    repo: ChartRepo
    registry: Registry | None = None

    def chart(self) -> dict[str, Any]:
        if self.kind == "helmrepository":
            return {"chart": {"spec": {"chart": "bench", "version": "1.0.0",
                                       "sourceRef": {"kind": "HelmRepository", "name": "bench"}}}}
        if self.kind == "ocirepository":
            return {"chartRef": {"kind": "OCIRepository", "name": "bench"}}
        return {"chart": {"repository": {"url": self.repo.url, "name": "bench", "version": "1.0.0"}}}

    def objects(self, namespace: str) -> list[dict[str, Any]]:
        """The source objects (and credentials) a namespace's releases name."""
        meta = {"name": "bench", "namespace": namespace}
        if self.kind == "helmrepository":
            return [{"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRepository", "metadata": meta,
                     "spec": {"url": self.repo.url, "interval": "1h"}}]
        if self.kind == "ocirepository" and self.registry is not None:
            return [{"apiVersion": "v1", "kind": "Secret", "metadata": {**meta, "name": "robot"},
                     "stringData": {"username": "robot", "password": "pw"}},
                    {"apiVersion": "helmop.dev/v1alpha1", "kind": "OCIRepository", "metadata": meta,
                     "spec": {"url": f"oci://127.0.0.1:{self.registry.port}/charts/bench", "insecure": True,
                              "interval": "1h", "ref": {"semver": "1.x"}, "secretRef": {"name": "robot"}}}]
        return []

    def fetches(self) -> int:
        """Index downloads (a chart repository) or tag listings (a registry) so far."""
        return self.registry.listed if self.registry is not None else self.repo.paths.count("/index.yaml")

    @classmethod
    def of(cls, kind: str, repo: ChartRepo) -> Source:
        chart = {"1.0.0": next(repo.dir.glob("*.tgz")).read_bytes()} if kind == "ocirepository" else None
        return cls(kind, repo, Registry(chart) if chart else None)


def releases(count: int, per_namespace: int, source: Source, drift: str, suspend: bool = False
             ) -> tuple[list[str], list[dict[str, Any]]]:
    """The namespaces and the HelmReleases of a run, after the source objects they name."""
    namespaces = sorted({namespace_of(i, per_namespace, "bench") for i in range(count)})
    docs = [doc for namespace in namespaces for doc in source.objects(namespace)]
    docs += [{"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease",
              "metadata": {"name": f"hr{i}", "namespace": namespace_of(i, per_namespace, "bench")},
              "spec": {"interval": "1h", "suspend": suspend, **source.chart(),
                       "values": {"fullnameOverride": f"hr{i}"}, "driftDetection": {"mode": drift}}}
             for i in range(count)]
    return namespaces, docs


def apply(kubeconfig: Path, namespaces: list[str], docs: list[dict[str, Any]]) -> None:
    for namespace in namespaces:
        kubectl(kubeconfig, "create", "namespace", namespace)
    kubectl(kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump_all(docs))


def members_settled(kubeconfig: Path, replicas: int) -> None:
    """Until ``replicas`` member Leases (--shards auto) each hold a share of the hash space."""
    while True:
        leases = json.loads(kubectl(kubeconfig, "-n", "default", "get", "lease", "-l",
                                    "helmop.dev/member-of=default", "-o", "json"))["items"]
        holds = [lease["metadata"].get("annotations", {}).get("helmop.dev/holds", "") for lease in leases]
        if len(holds) == replicas and all(holds):
            return
        time.sleep(0.5)


def helm_wrapper(work: Path, tag: str, helm: str) -> tuple[Path, Path]:
    """The helm the operator runs: ``helm`` that logs each call's arguments first; (the wrapper, its log). Also
    points HELM_CACHE_HOME into ``work``."""
    calls = work / f"helm-calls-{tag}.log"
    wrapper = work / f"helm-{tag}"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {calls}\nexec {TOOLS / helm} "$@"\n')
    wrapper.chmod(0o755)
    calls.write_text("")
    os.environ["HELM_CACHE_HOME"] = str(work / "helm-cache")
    return wrapper, calls


def noop(kubeconfig: Path, namespaces: list[str], count: int, kind: str = "hr") -> float:
    """Every HelmRelease (or object of ``kind``) of ``namespaces`` asked to reconcile (a requestedAt annotation),
    until ``count`` have handled it and are Ready: the seconds that took."""
    stamp = datetime.now(UTC).isoformat()
    start = time.perf_counter()
    for namespace in namespaces:
        kubectl(kubeconfig, "-n", namespace, "annotate", kind, "--all", "--overwrite",
                f"helmop.dev/requestedAt={stamp}")
    wait_all(kubeconfig, count, stamp, kind=kind)
    return time.perf_counter() - start


def bench_chart(work: Path) -> ChartRepo:
    """`helm create`'s chart as bench@1.0.0, served from a loopback chart repository."""
    subprocess.run([str(TOOLS / "helm"), "create", str(work / "src")], check=True, capture_output=True)
    repo = ChartRepo(work, work / "src", str(TOOLS / "helm"))
    repo.publish("bench", "1.0.0")
    return repo


def double_actions(calls: Path) -> int:
    """helm installs and upgrades beyond the one each release needs (two replicas acting on one release)."""
    per_release: dict[str, int] = {}
    for line in calls.read_text().splitlines():
        args = line.split()
        if args[:1] in (["install"], ["upgrade"]) and len(args) > 1:
            release = next((a for a in args[1:] if not a.startswith("-")), "")
            per_release[release] = per_release.get(release, 0) + 1
    return sum(n - 1 for n in per_release.values() if n > 1)


def measure(count: int, concurrency: int, helm: str, source: Source, work: Path, drift: str,
            per_namespace: int, replicas: int = 1, raw: bool = True) -> dict[str, Any]:
    """One run; with ``replicas`` > 1, that many operators with ``--shards auto`` (raw helm is not run: the
    ratio is a one-replica figure)."""
    repo = source.repo
    wrapper, calls = helm_wrapper(work, str(count), helm)
    sharded = ["--shards", "auto", "--leader-election-namespace", "default"] if replicas > 1 else []
    with Sandbox(ready_delay=0.05) as sandbox:
        kc = sandbox.kubeconfig
        operators = [start_operator(kc, work / f"operator-{count}-{r}.log", "--cache-dir",
                                    str(work / f"cache-{count}-{r}"), "--concurrency", str(concurrency), *sharded,
                                    helm=wrapper)
                     for r in range(replicas)]
        try:
            if replicas > 1:
                members_settled(kc, replicas)
            namespaces, docs = releases(count, per_namespace, source, drift)
            served, fetched = sandbox.requests_served, source.fetches()
            pids = [operator.pid for operator, _ in operators]
            cpu0 = [(cpu_seconds(pid), cpu_seconds(pid, children=True)) for pid in pids], own_cpu_seconds()
            ours = Ours()
            start = time.perf_counter()
            apply(kc, namespaces, docs)
            wait_all(kc, count)
            helmop_s = time.perf_counter() - start  # from the apply
            burst = {"burst_cpu_s": sum(cpu_seconds(pid) - own for pid, (own, _) in zip(pids, cpu0[0], strict=True)),
                     "helm_cpu_s": sum(cpu_seconds(pid, children=True) - kids
                                       for pid, (_, kids) in zip(pids, cpu0[0], strict=True)),
                     "sandbox_cpu_s": own_cpu_seconds() - cpu0[1]}
            burst["others_cpu_s"] = ours.others() - burst["burst_cpu_s"] - burst["helm_cpu_s"]
            requests_per_release = (sandbox.requests_served - served) / count  # the bench's own polls included
            doubles = double_actions(calls)

            idle([port for _, port in operators])
            before, cpu_before = len(calls.read_text().splitlines()), [cpu_seconds(pid) for pid in pids]
            compared = sum(metric_sum(port, "helmop_drift_checks_total", 'result="compared"') for _, port in operators)
            with LagWatch([port for _, port in operators]) as lag:
                noop_s = noop(kc, namespaces, count)
            cpu = [cpu_seconds(pid) - was for pid, was in zip(pids, cpu_before, strict=True)]
            figures = {"noop_s": noop_s, "noop_cpu_s": sum(cpu),
                       "noop_helm": len(calls.read_text().splitlines()) - before,
                       "noop_dry_runs": sum(metric_sum(port, "helmop_drift_checks_total", 'result="compared"')
                                            for _, port in operators) - compared,
                       "peak_rss_mib": max(peak_rss_mib(pid) for pid in pids),
                       "max_loop_lag_ms": 1000 * max(metric(port, "helmop_event_loop_lag_max_seconds")
                                                     for _, port in operators),
                       "api_requests_per_release": requests_per_release, "double_actions": doubles,
                       "source_fetches": source.fetches() - fetched, "noop_max_loop_lag_ms": lag.worst_ms, **burst}
            if replicas > 1:
                figures["per_replica"] = [
                    {"peak_rss_mib": round(peak_rss_mib(pid), 1), "cpu_s": round(cpu_seconds(pid), 1),
                     "installs": metric_sum(port, "helmop_helm_actions_total", 'action="install"')}
                    for pid, (_, port) in zip(pids, operators, strict=True)]
        finally:
            for operator, _ in operators:
                operator.terminate()
            for operator, _ in operators:
                operator.wait(30)
        raw_s: float | None = None
        if replicas == 1 and raw:
            kubectl(kc, "create", "namespace", "raw")
            ours = Ours()
            raw_s = asyncio.run(raw_helm(count, concurrency, helm, next(repo.dir.glob("*.tgz")), kc, "raw",
                                         per_namespace))
            figures["raw_others_cpu_s"] = ours.others()
    layout = f"per-namespace:{per_namespace}" if per_namespace else "one-namespace"
    return {"count": count, "replicas": replicas, "layout": layout, "source": source.kind, "helmop_s": helmop_s,
            "raw_helm_s": raw_s, "ratio": helmop_s / raw_s if raw_s else None, **figures}


def measure_suspended(count: int, repo: ChartRepo, work: Path) -> dict[str, Any]:
    """``count`` suspended HelmReleases resident: the operator's memory with no helm work at all."""
    with Sandbox(ready_delay=0.05) as sandbox:
        kc = sandbox.kubeconfig
        operator, port = start_operator(kc, work / f"operator-suspended-{count}.log", "--cache-dir",
                                        str(work / "cache-suspended"), helm=TOOLS / "helm")
        try:
            idle = current_rss_mib(operator.pid)
            namespaces, docs = releases(count, 1000, Source("inline", repo), "disabled", suspend=True)
            start = time.perf_counter()
            for chunk in range(0, count, 1000):  # kubectl apply of 10 000 documents at once is slow to parse
                apply(kc, namespaces if chunk == 0 else [], docs[chunk:chunk + 1000])
            while metric_sum(port, "helmop_resource_suspended") < count:
                time.sleep(1)
            took = time.perf_counter() - start
            seen = current_rss_mib(operator.pid)
            # Resident means settled: every object reconciled once, and the burst's idle API connections
            # closed (aiohttp keeps them 15 s; each TLS connection holds a 256 KiB buffer).
            while metric_sum(port, "helmop_reconcile_duration_seconds_count") < count:
                time.sleep(1)
            time.sleep(20)
            resident = current_rss_mib(operator.pid)
            return {"suspended": count, "observed_s": round(took, 1), "idle_rss_mib": round(idle, 1),
                    "seen_rss_mib": round(seen, 1), "rss_mib": round(resident, 1),
                    "peak_rss_mib": round(peak_rss_mib(operator.pid), 1),
                    "kib_per_object": round((resident - idle) * 1024 / count, 1)}
        finally:
            operator.terminate()
            operator.wait(30)


def current_rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS"))) / 1024


def metric_sum(port: int, name: str, having: str = "") -> float:
    """The sum of a metric's samples (every label set, or those whose labels include ``having``)."""
    lines = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text.splitlines()
    return sum(float(line.split()[-1]) for line in lines if line.startswith(name + "{") and having in line)


def measure_raw(count: int, concurrency: int, helm: str, repo: ChartRepo, work: Path,
                per_namespace: int) -> tuple[float, float, float]:
    """The raw-helm phase alone, on a fresh sandbox: (seconds, the sandbox's CPU seconds, helm's CPU
    seconds): how the sandbox scales under helm, and which side the time goes to."""
    os.environ["HELM_CACHE_HOME"] = str(work / "helm-cache")
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    with Sandbox(ready_delay=0.05) as sandbox:
        kubectl(sandbox.kubeconfig, "create", "namespace", "raw")
        took = asyncio.run(raw_helm(count, concurrency, helm, next(repo.dir.glob("*.tgz")), sandbox.kubeconfig,
                                    "raw", per_namespace))
    own_after, children_after = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return (took, own_after.ru_utime + own_after.ru_stime - own.ru_utime - own.ru_stime,
            children_after.ru_utime + children_after.ru_stime - children.ru_utime - children.ru_stime)


def table(rows: list[dict[str, Any]], helm: str, concurrency: int) -> str:
    lines = [f"{helm}, concurrency {concurrency}",
             "| HelmReleases | replicas | layout | source | helmop -> all Ready | raw helm | ratio | "
             "API requests per release | no-op resync | no-op CPU | no-op helm processes | no-op dry runs | "
             "peak RSS | max loop lag | "             "double actions | source fetches |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        raw, ratio = (f"{r['raw_helm_s']:.1f} s", f"{r['ratio']:.2f}") if r["raw_helm_s"] else ("-", "-")
        lines.append(f"| {r['count']} | {r['replicas']} | {r['layout']} | {r['source']} | {r['helmop_s']:.1f} s | "
                     f"{raw} | {ratio} | {r['api_requests_per_release']:.0f} | "
                     f"{r['noop_s']:.1f} s | {r['noop_cpu_s']:.1f} s | {r['noop_helm']} | {r['noop_dry_runs']:.0f} | "
                     f"{r['peak_rss_mib']:.0f} MiB | {r['max_loop_lag_ms']:.0f} ms | {r['double_actions']} | "
                     f"{r['source_fetches']} |")
    return "\n".join(lines)


def chart(rows: list[dict[str, Any]], helm: str) -> Path | str:
    """The docs' chart: helmop against raw helm, releases in one namespace from a URL, one replica (other runs
    would overwrite it with another comparison); why not, when it is not drawn."""
    if not all(r["raw_helm_s"] and r["layout"] == "one-namespace" and r["source"] == "inline" for r in rows):
        return "not drawn (the docs' chart compares one-namespace, inline-source runs with raw helm)"
    try:
        import matplotlib
    except ImportError:
        return "not drawn (matplotlib is not installed: pip install -e '.[bench]')"

    matplotlib.use("Agg")  # files only: no display here
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    labels = [str(r["count"]) for r in rows]
    positions = range(len(rows))
    left.bar([p - 0.2 for p in positions], [r["helmop_s"] for r in rows], 0.4, label="helmop")
    left.bar([p + 0.2 for p in positions], [r["raw_helm_s"] for r in rows], 0.4, label="raw helm")
    left.set_xticks(list(positions), labels)
    left.set(title="time to all Ready", xlabel="HelmReleases", ylabel="seconds")
    left.legend()
    right.bar(labels, [r["peak_rss_mib"] for r in rows], color="tab:green")
    right.set(title="operator peak RSS", xlabel="HelmReleases", ylabel="MiB")
    fig.suptitle(f"helmop benchmark ({helm})")
    fig.tight_layout()
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"helmreleases-{helm}.png"
    fig.savefig(path)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, action="append", help="HelmReleases (repeatable; default 100)")
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--helm", default="helm", choices=["helm", "helm3"])
    parser.add_argument("--drift", default="warn", choices=["warn", "enabled", "disabled"],
                        help="the HelmReleases' driftDetection.mode (default warn: the no-op pass checks drift)")
    parser.add_argument("--raw-only", action="store_true",
                        help="only raw `helm upgrade --install --wait` (the sandbox's scaling: 1000 vs 100)")
    parser.add_argument("--replicas", type=int, default=1, metavar="R",
                        help="R operators with --shards auto, each its own process (no raw helm run: the ratio is a "
                             "one-replica figure)")
    parser.add_argument("--layout", type=parse_layout, default=0, metavar="one-namespace|per-namespace:K",
                        help="where the releases go, for helmop and raw helm alike (default one-namespace)")
    parser.add_argument("--source", default="inline", choices=["inline", "helmrepository", "ocirepository"],
                        help="the chart's source: a repository URL in each release (default), or one HelmRepository "
                             "or OCIRepository per namespace that releases name; source_fetches counts its index "
                             "downloads or tag listings")
    parser.add_argument("--raw", action=argparse.BooleanOptionalAction, default=True,
                        help="also run raw helm for the ratio (default; --no-raw: helmop only)")
    parser.add_argument("--suspended", type=int, metavar="N",
                        help="only N suspended HelmReleases resident: the operator's memory per idle object")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="helmop-bench-"))
    repo = bench_chart(work)
    if args.suspended:
        figures = measure_suspended(args.suspended, repo, work)
        repo.close()
        print(f"{args.suspended} suspended HelmReleases resident: RSS {figures['idle_rss_mib']} -> "
              f"{figures['rss_mib']} MiB ({figures['kib_per_object']} KiB each), all observed in "
              f"{figures['observed_s']} s")
        print(json.dumps(figures))
        return
    if args.raw_only:
        counts = args.count or [100, 1000]
        runs = [measure_raw(count, args.concurrency, args.helm, repo, work, args.layout) for count in counts]
        repo.close()
        for count, (took, sandbox_cpu, helm_cpu) in zip(counts, runs, strict=True):
            print(f"raw {args.helm}: {count} releases in {took:.1f} s ({took / runs[0][0]:.1f}x the first); "
                  f"CPU: sandbox {sandbox_cpu:.1f} s, helm and kubectl {helm_cpu:.1f} s")
        print(json.dumps({"counts": counts, "raw_helm_s": [round(r[0], 1) for r in runs],
                          "sandbox_cpu_s": [round(r[1], 1) for r in runs],
                          "helm_cpu_s": [round(r[2], 1) for r in runs]}))
        return
    source = Source.of(args.source, repo)
    rows = [measure(count, args.concurrency, args.helm, source, work, args.drift, args.layout, args.replicas,
                    args.raw) for count in args.count or [100]]
    repo.close()
    print(table(rows, f"{args.helm}, drift detection {args.drift}", args.concurrency))
    for row in rows:
        print(json.dumps({key: round(row[key], 3) if isinstance(row[key], float) else row[key]
                          for key in KEYS if key in row}))
    print(f"chart: {chart(rows, args.helm)}")


if __name__ == "__main__":
    main()
