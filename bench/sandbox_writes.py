"""The sandbox's write path under helm and kubectl: its own CPU for a fixed load in one namespace.

    .venv/bin/python bench/sandbox_writes.py [--releases 40] [--objects 300] [--concurrency 4] [--profile OUT]

The load: ``--releases`` helm installs (``upgrade --install --wait``) of `helm create`'s chart with a ConfigMap
added (a Deployment, a Service, a ServiceAccount and a ConfigMap each), all in one namespace, then an upgrade of
each (a changed value: a new ReplicaSet, the old one scaled down), then one ``kubectl apply --server-side`` of
``--objects`` ConfigMaps, Services and Deployments there and a second apply of them changed. Prints the wall time of
each phase and the CPU this process took (the sandbox's: helm and kubectl are children, not counted; the bench's own
thread only waits for them), one JSON line at the end.
``--profile OUT``: cProfile of the sandbox's thread, its stats written to OUT (``python -m pstats OUT``); it makes
Python calls about three times as dear, so its shares overstate the Python code against the I/O.
Not a test: it prints numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import resource
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from helmop_sandbox import Sandbox

TOOLS = Path(__file__).resolve().parent.parent / ".tools" / "bin"
NAMESPACE = "load"
CONFIGMAP = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "src.fullname" . }}
data:
  release: {{ .Release.Name | quote }}
  tag: {{ .Values.image.tag | default "latest" | quote }}
"""


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def make_chart(work: Path) -> Path:
    subprocess.run([str(TOOLS / "helm"), "create", str(work / "src")], check=True, capture_output=True)
    (work / "src" / "templates" / "configmap.yaml").write_text(CONFIGMAP)
    return work / "src"


async def helm_all(kubeconfig: Path, chart: Path, count: int, concurrency: int, tag: str) -> None:
    slots = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with slots:
            proc = await asyncio.create_subprocess_exec(
                str(TOOLS / "helm"), "upgrade", "--install", f"r{i}", str(chart), "-n", NAMESPACE, "--wait",
                "--kubeconfig", str(kubeconfig), "--set", f"fullnameOverride=r{i}", "--set", f"image.tag={tag}",
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
            _, err = await proc.communicate()
            assert proc.returncode == 0, err.decode()

    await asyncio.gather(*(one(i) for i in range(count)))


def manifests(count: int, version: str) -> str:
    """``count`` objects, a third each ConfigMaps, Services and Deployments, as one kubectl apply takes them."""
    docs: list[dict[str, Any]] = []
    for i in range(count):
        labels = {"app": f"a{i}", "version": version}
        if i % 3 == 0:
            docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}", "labels": labels},
                         "data": {"k": version * 50}})
        elif i % 3 == 1:
            docs.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"s{i}", "labels": labels},
                         "spec": {"selector": {"app": f"a{i - 1}"}, "ports": [{"port": 80, "targetPort": 8080}]}})
        else:
            container = {"name": "c", "image": f"nginx:{version}", "ports": [{"containerPort": 8080}]}
            docs.append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"d{i}", "labels": labels},
                         "spec": {"replicas": 1, "selector": {"matchLabels": {"app": f"a{i - 2}"}},
                                  "template": {"metadata": {"labels": {"app": f"a{i - 2}"}},
                                               "spec": {"containers": [container]}}}})
    return yaml.safe_dump_all(docs)


def kubectl_apply(kubeconfig: Path, text: str) -> None:
    subprocess.run([str(TOOLS / "kubectl"), "--kubeconfig", str(kubeconfig), "apply", "-n", NAMESPACE,
                    "--server-side", "-f", "-"], input=text.encode(), check=True, capture_output=True)


def run(args: argparse.Namespace, work: Path) -> dict[str, float]:
    chart = make_chart(work)
    figures: dict[str, float] = {}
    with Sandbox(ready_delay=0.05) as sandbox:
        kc = sandbox.kubeconfig
        subprocess.run([str(TOOLS / "kubectl"), "--kubeconfig", str(kc), "create", "namespace", NAMESPACE],
                       check=True, capture_output=True)
        profile = cProfile.Profile() if args.profile else None
        if profile is not None:
            assert sandbox._loop is not None
            sandbox._loop.call_soon_threadsafe(profile.enable)  # cProfile profiles the thread that enables it
        texts = manifests(args.objects, "v1"), manifests(args.objects, "v2")  # written before: not the sandbox's CPU
        start_cpu = cpu()
        phases = (("install", lambda: asyncio.run(helm_all(kc, chart, args.releases, args.concurrency, "1.0"))),
                  ("upgrade", lambda: asyncio.run(helm_all(kc, chart, args.releases, args.concurrency, "1.1"))),
                  ("apply", lambda: kubectl_apply(kc, texts[0])),
                  ("reapply", lambda: kubectl_apply(kc, texts[1])))
        for name, phase in phases:
            cpu0, wall0 = cpu(), time.perf_counter()
            phase()
            figures[f"{name}_s"] = round(time.perf_counter() - wall0, 2)
            figures[f"{name}_cpu_s"] = round(cpu() - cpu0, 2)
            print(f"{name}: {figures[f'{name}_s']} s, sandbox CPU {figures[f'{name}_cpu_s']} s", flush=True)
        time.sleep(1)  # the controllers' last turns (rollouts, endpoints) belong to the load
        figures["sandbox_cpu_s"] = round(cpu() - start_cpu, 2)
        if profile is not None:
            assert sandbox._loop is not None
            sandbox._loop.call_soon_threadsafe(profile.disable)
            time.sleep(0.2)
            profile.dump_stats(args.profile)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--releases", type=int, default=40)
    parser.add_argument("--objects", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--profile", help="write the sandbox thread's cProfile stats here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sandbox-writes-") as work:
        figures = run(args, Path(work))
    print(f"sandbox CPU for the whole load: {figures['sandbox_cpu_s']} s")
    print(json.dumps({"releases": args.releases, "objects": args.objects, **figures}))


if __name__ == "__main__":
    main()
