"""``python -m helmop_sandbox`` (or ``helmop sandbox``): the sandbox in the foreground until SIGTERM or ^C."""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys
import threading


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free port)")
    parser.add_argument("--kubeconfig", help="where to write the kubeconfig (default: a temporary file)")
    parser.add_argument("--ready-delay", type=float, default=0.2,
                        help="seconds before simulated workloads report ready (default 0.2)")
    parser.add_argument("--state-dir", help="keep objects, resourceVersions, the CA, tokens and the port here "
                                            "across restarts (default: nothing survives the process)")
    parser.add_argument("--faults", metavar="SPEC", help="inject API faults, e.g. 'seed=7,error=0.05,"
                                                         "conflict=0.05,latency=0.1:0.5,drop=0.1'")
    parser.add_argument("--no-cluster-network", dest="cluster_network", action="store_false",
                        help="no webhook named by a Service is reachable (default: a Service that selects a "
                             "workload the sandbox reports Ready answers, allowing without changes)")


def serve(args: argparse.Namespace) -> int:
    from .embedded import Sandbox  # here: parsing the flags (helmop's parser does) needs none of the server

    try:
        sandbox = Sandbox(port=args.port, kubeconfig=args.kubeconfig, ready_delay=args.ready_delay,
                          state_dir=args.state_dir, faults=args.faults, cluster_network=args.cluster_network)
    except ValueError as exc:  # a bad --faults spec
        print(f"sandbox: {exc}", file=sys.stderr)
        return 2
    # Each injected fault and each webhook answered without running it is logged, so a run can be read afterwards.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("aiohttp").setLevel(logging.WARNING)
    with sandbox:
        print(f"kubeconfig: {sandbox.kubeconfig}", flush=True)
        print(f"server: {sandbox.url}", flush=True)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="helmop-sandbox", description=__doc__)
    add_arguments(parser)
    return serve(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
