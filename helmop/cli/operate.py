"""The verbs that run helmop's processes: ``helmop run`` (the operator, against a cluster or an embedded
sandbox) and ``helmop sandbox`` (the helmop-sandbox distribution's server). The only CLI module that
imports the operator's controllers or the sandbox; every other verb works through the API client, helm
and the api models."""

from __future__ import annotations

import argparse
import asyncio
import asyncio.sslproto
import os
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from helmop.api.settings import Settings
from helmop.infra.kubeconfig import KubeconfigError, in_cluster_namespace

from . import logsetup, runflags


def sandbox_verb(parser: argparse.ArgumentParser) -> None:
    """``helmop sandbox``: the helmop-sandbox distribution's server, when it is installed (set-up installs it
    for tests and the demo; the operator's image does not have it)."""
    try:
        from helmop_sandbox import __main__ as standalone
    except ImportError:
        parser.set_defaults(run=lambda _args: _no_sandbox())
        return
    standalone.add_arguments(parser)
    parser.set_defaults(run=standalone.serve)


def _no_sandbox() -> int:
    print("helmop: the sandbox is not installed: pip install ./sandbox (scripts/setup does)", file=sys.stderr)
    return 2


def _tune_process() -> None:
    """This process's settings for running the operator, made before anything imports kopf or starts a loop."""
    # kopf imports the `kubernetes` client whenever it is installed, only to recognise that client's objects,
    # which helmop never hands it: 12 MiB of the operator's memory. helmop does not depend on it (the sandbox's
    # client tests do); marked absent here, this process runs as it does in the operator's image.
    sys.modules.setdefault("kubernetes", None)  # type: ignore[arg-type]  # None: "not importable", per importlib
    if sys.version_info < (3, 12) and hasattr(os, "pidfd_open"):
        # helm processes are waited for through pidfds on the event loop, as Python 3.12 does by default: 3.11
        # starts a thread per child process, and waiting for each to start stalled the loop under load.
        asyncio.set_child_watcher(asyncio.PidfdChildWatcher())
    # asyncio gives every TLS connection a 256 KiB read buffer, allocated and zeroed whole: with a pool of API
    # requests and a watch per kind and namespace, the largest part of the operator's memory under load. What the
    # API server sends (watch events, list pages) is read as fast 64 KiB at a time.
    asyncio.sslproto.SSLProtocol.max_size = 64 * 1024


def run(args: argparse.Namespace) -> int:
    _tune_process()
    # The operator (kopf, the controllers) is imported by the verb that runs it, not by every CLI command.
    from helmop.controllers.operator import run as run_operator

    if args.shards == "auto" and args.leader_elect:
        print("helmop: --shards auto and --leader-elect exclude each other: hash shards all act", file=sys.stderr)
        return 2
    logsetup.setup(args.log_format, args.log_file)
    settings = _placed(runflags.built(args), args)
    if (problem := _unwritable(settings.helm.cache_dir)) is not None:
        print(f"helmop: the cache directory {settings.helm.cache_dir} is not writable ({problem}): it must be, for "
              "helm, charts and git mirrors (--cache-dir, or mount a volume there: an emptyDir in Kubernetes)",
              file=sys.stderr)
        return 2
    if not args.sandbox:
        try:
            asyncio.run(run_operator(settings))
        except KubeconfigError as exc:
            print(f"helmop: {exc}", file=sys.stderr)
            return 2
        return 0
    try:
        from helmop_sandbox import Sandbox
    except ImportError:
        return _no_sandbox()
    with Sandbox(kubeconfig=args.kubeconfig) as sandbox:
        print(f"kubeconfig: {sandbox.kubeconfig}", flush=True)
        asyncio.run(run_operator(replace(settings, kubeconfig=sandbox.kubeconfig)))
    return 0


def _placed(settings: Settings, args: argparse.Namespace) -> Settings:
    """The defaults that depend on where the operator runs: with --sandbox, its CRDs installed and its servers on
    loopback (a sandbox is local); in a pod, leader election on and the Lease in the pod's namespace."""
    # In a cluster the probes and webhooks must be reachable from outside the pod.
    address = args.bind_address or ("127.0.0.1" if args.sandbox else "0.0.0.0")
    return replace(settings, install_crds=settings.install_crds or args.sandbox,
                   servers=replace(settings.servers, address=address),
                   leadership=replace(settings.leadership, election=_leader_election(args),
                                      namespace=args.leader_election_namespace or _own_namespace()))


def _unwritable(directory: Path) -> str | None:
    """Why a file cannot be made in ``directory`` (made first if missing), or None. Asked before anything runs
    there: on a read-only root filesystem without its volume, helm's first run would end in a traceback."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=directory).close()
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def _leader_election(args: argparse.Namespace) -> bool:
    """--leader-elect / --no-leader-elect, else on in a pod (KUBERNETES_SERVICE_HOST, as client-go tells): two
    replicas of an unflagged operator must not both act."""
    if args.leader_elect is not None:
        return bool(args.leader_elect)
    # replicas that split the work by hash all act: no leader
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and not args.sandbox and args.shards != "auto"


def _own_namespace() -> str:
    """The pod's namespace (downward API variable, or the service account's), else "default"."""
    return os.environ.get("POD_NAMESPACE") or in_cluster_namespace() or "default"
