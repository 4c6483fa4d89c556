"""HelmRelease throughput: N HelmReleases applied at once until all are Ready, next to the same N
raw `helm upgrade --install` at the same concurrency; then a no-op resync pass.

    .venv/bin/python bench/helmreleases.py [--count 100] [--concurrency 10] [--helm helm]

The sandbox runs in this process; the operator runs as `helmop run` in a child process so its
peak memory (VmHWM) is its own. helm is wrapped to count the processes the operator starts.
Not a test: it prints numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helmop.sandbox import Sandbox  # noqa: E402
from tests.chartrepo import ChartRepo  # noqa: E402

TOOLS = ROOT / ".tools" / "bin"


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    return subprocess.run([str(TOOLS / "kubectl"), "--kubeconfig", str(kubeconfig), *args], input=stdin,
                          capture_output=True, text=True, check=True).stdout


def all_ready(kubeconfig: Path, ns: str, count: int, key: str = "") -> int:
    items = json.loads(kubectl(kubeconfig, "-n", ns, "get", "hr", "-o", "json"))["items"]
    done = 0
    for item in items:
        status = item.get("status") or {}
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])
        if ready and (not key or status.get("lastHandledReconcileAt") == key):
            done += 1
    return done


async def raw_helm(count: int, concurrency: int, helm: str, chart: Path, kubeconfig: Path, ns: str) -> float:
    slots = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with slots:
            proc = await asyncio.create_subprocess_exec(
                str(TOOLS / helm), "upgrade", "--install", f"raw{i}", str(chart), "-n", ns, "--wait",
                "--kubeconfig", str(kubeconfig), "--set", f"fullnameOverride=raw{i}",
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
            _, err = await proc.communicate()
            assert proc.returncode == 0, err.decode()

    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(count)))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--helm", default="helm", choices=["helm", "helm3"])
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="helmop-bench-"))
    subprocess.run([str(TOOLS / "helm"), "create", str(work / "src")], check=True, capture_output=True)
    repo = ChartRepo(work, work / "src", str(TOOLS / "helm"))
    repo.publish("bench", "1.0.0")
    calls = work / "helm-calls.log"
    wrapper = work / "helm"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {calls}\nexec {TOOLS / args.helm} "$@"\n')
    wrapper.chmod(0o755)
    with Sandbox(ready_delay=0.05) as sandbox:
        kc = sandbox.kubeconfig
        env = {**os.environ, "HELMOP_HELM": str(wrapper), "HELM_CACHE_HOME": str(work / "helm-cache")}
        operator = subprocess.Popen([sys.executable, "-m", "helmop.cli", "run", "--kubeconfig", str(kc),
                                     "--install-crds", "--cache-dir", str(work / "cache"),
                                     "--concurrency", str(args.concurrency)], env=env,
                                    stdout=subprocess.DEVNULL, stderr=open(work / "operator.log", "w"))  # noqa: SIM115
        try:
            for _ in range(100):
                if subprocess.run([str(TOOLS / "kubectl"), "--kubeconfig", str(kc), "get", "crd",
                                   "helmreleases.helmop.dev"], capture_output=True).returncode == 0:
                    break
                time.sleep(0.2)
            kubectl(kc, "create", "namespace", "bench")
            docs = [{"apiVersion": "helmop.dev/v1alpha1", "kind": "HelmRelease",
                     "metadata": {"name": f"hr{i}", "namespace": "bench"},
                     "spec": {"interval": "1h", "chart": {"repository": {"url": repo.url, "name": "bench",
                                                                         "version": "1.0.0"}},
                              "values": {"fullnameOverride": f"hr{i}"}}} for i in range(args.count)]
            start = time.perf_counter()
            kubectl(kc, "apply", "-f", "-", stdin=yaml.safe_dump_all(docs))
            while all_ready(kc, "bench", args.count) < args.count:
                time.sleep(0.5)
            took = time.perf_counter() - start
            actions = [line for line in calls.read_text().splitlines() if not line.startswith("version")]
            print(f"helmop: {args.count} HelmReleases Ready in {took:.1f}s ({args.helm}, concurrency "
                  f"{args.concurrency}); helm processes: {len(actions)}")

            before = len(calls.read_text().splitlines())
            start = time.perf_counter()
            kubectl(kc, "-n", "bench", "annotate", "hr", "--all", "--overwrite", "helmop.dev/requestedAt=resync")
            while all_ready(kc, "bench", args.count, "resync") < args.count:
                time.sleep(0.5)
            took = time.perf_counter() - start
            spawned = len(calls.read_text().splitlines()) - before
            print(f"no-op resync of {args.count} HelmReleases: {took:.1f}s, helm processes: {spawned}")
            status = Path(f"/proc/{operator.pid}/status").read_text()
            peak = next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM"))
            print(f"operator peak RSS: {int(peak) / 1024:.0f} MiB")
        finally:
            operator.terminate()
            operator.wait(30)
        kubectl(kc, "create", "namespace", "raw")
        took = asyncio.run(raw_helm(args.count, args.concurrency, args.helm, next(repo.dir.glob("*.tgz")), kc, "raw"))
        print(f"raw helm: {args.count} x `helm upgrade --install --wait` in {took:.1f}s at concurrency "
              f"{args.concurrency}")
    repo.close()


if __name__ == "__main__":
    main()
