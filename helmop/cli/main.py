"""Entry point of the ``helmop`` command: argument parsing and dispatch to the verbs."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
import threading
from pathlib import Path

from helmop.api.apps import parse_apps
from helmop.controllers.operator import OperatorConfig
from helmop.controllers.operator import run as run_operator
from helmop.sandbox import Sandbox


def _sandbox(args: argparse.Namespace) -> int:
    with Sandbox(port=args.port, kubeconfig=args.kubeconfig, ready_delay=args.ready_delay) as sandbox:
        print(f"kubeconfig: {sandbox.kubeconfig}", flush=True)
        print(f"server: {sandbox.url}", flush=True)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
    return 0


def _run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)  # one line per handler call is noise
    cfg = OperatorConfig(kubeconfig=Path(args.kubeconfig) if args.kubeconfig else None,
                         namespaces=args.namespace or [], concurrency=args.concurrency,
                         install_crds=args.install_crds or args.sandbox)
    if args.cache_dir:
        cfg.cache_dir = Path(args.cache_dir)
    cfg.webhook_port = args.webhook_port
    cfg.metrics_port = args.metrics_port
    cfg.allow_file_git = args.allow_file_git
    if args.apps:
        cfg.apps = parse_apps(Path(args.apps).read_text(), args.apps)
    repository = cfg.jenkins_chart["repository"]
    cfg.jenkins_chart = {"repository": {**repository, "url": args.jenkins_chart_repository or repository["url"],
                                        "version": args.jenkins_chart_version or repository["version"]}}
    if not args.sandbox:
        asyncio.run(run_operator(cfg))
        return 0
    with Sandbox(kubeconfig=args.kubeconfig) as sandbox:
        print(f"kubeconfig: {sandbox.kubeconfig}", flush=True)
        cfg.kubeconfig = sandbox.kubeconfig
        asyncio.run(run_operator(cfg))
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="helmop", description="Helm releases from Kubernetes resources.")
    verbs = top.add_subparsers(dest="verb", required=True)
    sb = verbs.add_parser("sandbox", help="run the embedded Kubernetes API sandbox in the foreground")
    sb.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free port)")
    sb.add_argument("--kubeconfig", help="where to write the kubeconfig (default: a temporary file)")
    sb.add_argument("--ready-delay", type=float, default=0.2,
                    help="seconds before simulated workloads report ready (default 0.2)")
    sb.set_defaults(run=_sandbox)

    run = verbs.add_parser("run", help="run the operator against the current kubeconfig (or an embedded sandbox)")
    run.add_argument("--kubeconfig", help="kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, in-cluster); "
                                          "with --sandbox, where to write the sandbox's")
    run.add_argument("--sandbox", action="store_true",
                     help="start an embedded sandbox in this process, install the CRDs, run the operator on it")
    run.add_argument("--install-crds", action="store_true", help="create or update helmop's CRDs at start")
    run.add_argument("--namespace", "-n", action="append", help="watch this namespace (repeatable; default all)")
    run.add_argument("--concurrency", type=int, default=10, help="helm actions at once (default 10)")
    run.add_argument("--cache-dir", help="chart and helm caches (default ~/.cache/helmop)")
    run.add_argument("--webhook-port", type=int, help="serve git push webhooks on this port (default: off)")
    run.add_argument("--metrics-port", type=int, help="serve /metrics, /healthz and /readyz on this port")
    run.add_argument("--allow-file-git", action="store_true", help="allow file:// GitRepository URLs")
    run.add_argument("--apps", help="app kinds file: custom resources whose spec are a chart's values")
    run.add_argument("--jenkins-chart-repository", help="Helm repository of the Jenkins chart "
                                                        "(default https://charts.jenkins.io)")
    run.add_argument("--jenkins-chart-version", help="Jenkins chart version (default: the pinned one)")
    run.set_defaults(run=_run)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    result: int = args.run(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
