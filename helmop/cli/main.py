"""Entry point of the ``helmop`` command: argument parsing and dispatch to the verbs."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading

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


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="helmop", description="Helm releases from Kubernetes resources.")
    verbs = top.add_subparsers(dest="verb", required=True)
    sb = verbs.add_parser("sandbox", help="run the embedded Kubernetes API sandbox in the foreground")
    sb.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free port)")
    sb.add_argument("--kubeconfig", help="where to write the kubeconfig (default: a temporary file)")
    sb.add_argument("--ready-delay", type=float, default=0.2,
                    help="seconds before simulated workloads report ready (default 0.2)")
    sb.set_defaults(run=_sandbox)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    result: int = args.run(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
