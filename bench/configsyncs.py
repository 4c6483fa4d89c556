"""ConfigSyncs at Flux's benchmark scale: N ConfigSyncs, each applying one small folder of a git repository
(served on loopback by `git http-backend`) until all are Ready, then a no-op resync (every ConfigSync asked to
reconcile, nothing changed in git or the cluster).

    .venv/bin/python bench/configsyncs.py [--count 1000] [--concurrency 10] [--sources 1] [--kustomize]

Each ConfigSync is shaped as one of Flux's benchmark Kustomizations (fluxcd/flux-benchmark, flux-ks-bench): the
folder holds a Deployment scaled to zero, a ServiceAccount, a Service and an Ingress named by a postBuild variable
(``${INDEX}``), applied into the ConfigSyncs' own namespace (as Flux's), with ``wait: true`` and ``prune: true``.
``--sources K``: K GitRepositories of the same repository (ConfigSync ``i`` reads the ``i % K``-th; Flux's
benchmark has one OCIRepository per Kustomization); ``--kustomize``: the folder carries a kustomization.yaml, so
every build runs kustomize (as Flux always does, in its process), where a folder of plain manifests is read as it
is.

A fresh sandbox in this process, the operator as `helmop run` in a child process (its memory, CPU and loop lag its
own). Prints the figures, then one JSON line (keys: count, sources, kustomize, concurrency, helmop_s, cpu_s (the
operator's), children_cpu_s (its git and kustomize processes'), sandbox_cpu_s (this process's: the sandbox),
others_cpu_s (the rest of the machine's meanwhile: other work sharing it), peak_rss_mib, max_loop_lag_ms,
api_requests_per_sync, noop_s, noop_cpu_s, noop_api_requests, noop_applied_objects (requests on the applied
objects by verb: an apply is a patch, dry run or not), git_requests, noop_git_requests). Not a test: it prints
numbers.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml
from helmop_sandbox import Sandbox
from helmreleases import Ours, cpu_seconds, idle, metric, metric_sum, noop, own_cpu_seconds, peak_rss_mib, wait_all
from operator_process import TOOLS, kubectl, start_operator

from tests.gitserver import GitServer, Repo

APP = {  # Flux's benchmark app, as its OCI artifact holds it: names from the INDEX variable
    "deployment.yaml": """apiVersion: apps/v1
kind: Deployment
metadata: {name: "app-${INDEX}", labels: {app: "app-${INDEX}"}}
spec:
  replicas: 0
  selector: {matchLabels: {app: "app-${INDEX}"}}
  template:
    metadata: {labels: {app: "app-${INDEX}"}}
    spec:
      serviceAccountName: "app-${INDEX}"
      containers:
      - name: app
        image: ghcr.io/stefanprodan/podinfo:6.7.0
        ports: [{name: http, containerPort: 9898}]
        resources: {requests: {cpu: 1m, memory: 16Mi}}
""",
    "serviceaccount.yaml": """apiVersion: v1
kind: ServiceAccount
metadata: {name: "app-${INDEX}"}
""",
    "service.yaml": """apiVersion: v1
kind: Service
metadata: {name: "app-${INDEX}"}
spec:
  selector: {app: "app-${INDEX}"}
  ports: [{name: http, port: 9898, targetPort: http}]
""",
    "ingress.yaml": """apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: "app-${INDEX}"}
spec:
  rules:
  - host: "app-${INDEX}.example.com"
    http:
      paths:
      - path: /
        pathType: Prefix
        backend: {service: {name: "app-${INDEX}", port: {name: http}}}
""",
}
APPLIED = ("deployments", "serviceaccounts", "services", "ingresses")
KUSTOMIZATION = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [%s]\n"


class Fetches:
    """The git server's requests for what a fetch asks (``git-upload-pack``), counted."""

    def __init__(self, server: GitServer) -> None:
        self.count = 0
        served = server.http.RequestHandlerClass
        fetches = self

        class Counting(served):  # type: ignore[valid-type,misc]
            def _serve(self) -> None:
                if "git-upload-pack" in self.path:
                    fetches.count += 1
                super()._serve()

            do_GET = _serve
            do_POST = _serve

        server.http.RequestHandlerClass = Counting


def repository(work: Path, kustomize: bool) -> tuple[GitServer, Repo]:
    (work / "git").mkdir()
    server = GitServer(work / "git")
    repo = Repo(server, "apps", work / "clone")
    files = {f"app/{name}": text for name, text in APP.items()}
    if kustomize:
        files["app/kustomization.yaml"] = KUSTOMIZATION % ", ".join(sorted(APP))
    repo.commit(files, "the benchmark's app")
    return server, repo


def objects(count: int, sources: int, url: str) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [
        {"apiVersion": "helmop.dev/v1alpha1", "kind": "GitRepository", "metadata": {"name": f"apps-{k}"},
         "spec": {"url": url, "interval": "60m", "ref": {"branch": "main"}}} for k in range(sources)]
    docs += [{"apiVersion": "helmop.dev/v1alpha1", "kind": "ConfigSync", "metadata": {"name": f"app-{i}"},
              "spec": {"sourceRef": {"name": f"apps-{i % sources}"}, "path": "app", "interval": "60m",
                       "retryInterval": "2m", "timeout": "5m", "prune": True, "wait": True,
                       "targetNamespace": "bench", "postBuild": {"substitute": {"INDEX": f"{i}app"}}}}
             for i in range(count)]
    return docs


def builds(port: int) -> dict[str, int]:
    """kustomize builds so far: run, and reused (the same files, folder and build fields built before)."""
    return {"run": int(metric_sum(port, "helmop_cache_requests_total", 'cache="kustomize-builds",result="miss"')),
            "reused": int(metric_sum(port, "helmop_cache_requests_total", 'cache="kustomize-builds",result="hit"'))}


def measure(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    server, repo = repository(work, args.kustomize)
    fetches = Fetches(server)
    try:
        with Sandbox(ready_delay=0.05) as sandbox:
            kc = sandbox.kubeconfig
            operator, port = start_operator(kc, work / "operator.log", "--cache-dir", str(work / "cache"),
                                            "--concurrency", str(args.concurrency), helm=TOOLS / "helm")
            try:
                kubectl(kc, "create", "namespace", "bench")
                cpu0, served, git0 = cpu_seconds(operator.pid), sandbox.requests_served, fetches.count
                kids0, ours, own0 = cpu_seconds(operator.pid, children=True), Ours(), own_cpu_seconds()
                start = time.perf_counter()
                kubectl(kc, "-n", "bench", "apply", "-f", "-",
                        stdin=yaml.safe_dump_all(objects(args.count, args.sources, repo.url)))
                wait_all(kc, args.count, kind="configsync")
                figures: dict[str, Any] = {
                    "count": args.count, "sources": args.sources, "kustomize": args.kustomize,
                    "concurrency": args.concurrency, "helmop_s": round(time.perf_counter() - start, 1),
                    "cpu_s": round(cpu_seconds(operator.pid) - cpu0, 1),
                    "children_cpu_s": round(cpu_seconds(operator.pid, children=True) - kids0, 1),
                    "sandbox_cpu_s": round(own_cpu_seconds() - own0, 1),
                    "api_requests_per_sync": round((sandbox.requests_served - served) / args.count, 1),
                    "git_requests": fetches.count - git0}
                figures["others_cpu_s"] = round(ours.others() - figures["cpu_s"] - figures["children_cpu_s"])
                figures["builds"] = builds(port)
                idle([port])
                cpu0, served, git0 = cpu_seconds(operator.pid), sandbox.requests_served, fetches.count
                figures["noop_s"] = round(noop(kc, ["bench"], args.count, kind="configsync"), 1)
                asked = list(sandbox.audit)[-(sandbox.requests_served - served):]
                figures.update({
                    "noop_cpu_s": round(cpu_seconds(operator.pid) - cpu0, 1),
                    "noop_api_requests": sandbox.requests_served - served,
                    "noop_applied_objects": dict(Counter(a.verb for _, a in asked if a.resource in APPLIED)),
                    "noop_git_requests": fetches.count - git0,
                    "noop_builds": {k: n - figures["builds"][k] for k, n in builds(port).items()},
                    "peak_rss_mib": round(peak_rss_mib(operator.pid), 1),
                    "max_loop_lag_ms": round(1000 * metric(port, "helmop_event_loop_lag_max_seconds"))})
                return figures
            finally:
                operator.terminate()
                operator.wait(30)
    finally:
        server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--sources", type=int, default=1, help="GitRepositories the ConfigSyncs share (default 1)")
    parser.add_argument("--kustomize", action="store_true", help="a kustomization.yaml in the folder: kustomize runs")
    args = parser.parse_args()
    figures = measure(args, Path(tempfile.mkdtemp(prefix="helmop-configsyncs-")))
    f = figures
    print(f"{args.count} ConfigSyncs ({args.sources} GitRepositor{'y' if args.sources == 1 else 'ies'}"
          f"{', kustomize' if args.kustomize else ''}): all Ready in {f['helmop_s']} s; CPU: the operator "
          f"{f['cpu_s']} s, its children {f['children_cpu_s']} s, the sandbox {f['sandbox_cpu_s']} s, other work "
          f"{f['others_cpu_s']} s; peak RSS {f['peak_rss_mib']} MiB, {f['api_requests_per_sync']} API requests each; "
          f"kustomize builds {f['builds']}")
    print(f"no-op: {f['noop_s']} s, CPU {f['noop_cpu_s']} s, {f['noop_api_requests']} API requests (on the applied "
          f"objects, by verb: {f['noop_applied_objects']}), {f['noop_git_requests']} git fetches, kustomize builds "
          f"{f['noop_builds']}; max loop lag "
          f"{f['max_loop_lag_ms']} ms")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
