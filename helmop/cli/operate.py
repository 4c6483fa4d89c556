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
from typing import TYPE_CHECKING

from helmop.api.addresses import Policy
from helmop.api.apps import parse_apps
from helmop.api.kubeconfigs import TokenAddresses
from helmop.api.tenancy import Tenancy
from helmop.infra.kubeconfig import KubeconfigError, in_cluster_namespace

from . import logsetup

if TYPE_CHECKING:  # the operator is imported by the verb that runs it
    from helmop.controllers.operator import OperatorConfig


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
    from helmop.controllers.operator import OperatorConfig
    from helmop.controllers.operator import run as run_operator

    if args.shards == "auto" and args.leader_elect:
        print("helmop: --shards auto and --leader-elect exclude each other: hash shards all act", file=sys.stderr)
        return 2
    logsetup.setup(args.log_format, args.log_file)
    # In a cluster the probes and webhooks must be reachable from outside the pod; a sandbox is local.
    address = args.bind_address or ("127.0.0.1" if args.sandbox else "0.0.0.0")
    cfg = OperatorConfig(kubeconfig=Path(args.kubeconfig) if args.kubeconfig else None,
                         namespaces=[] if args.all_namespaces else (args.namespace or []),
                         concurrency=args.concurrency, install_crds=args.install_crds or args.sandbox,
                         webhook_port=args.webhook_port, webhook_address=address, metrics_port=args.metrics_port,
                         metrics_address=address, allow_file_git=tuple(map(Path, args.allow_file_git)),
                         tenancy=Tenancy(args.default_service_account or "", args.no_cross_namespace_refs),
                         helm_cache_ttl=args.helm_cache_ttl, helm_index_max_size=args.helm_index_max_size,
                         helm_chart_max_size=args.helm_chart_max_size, shard=args.shard or "",
                         shards_auto=args.shards == "auto", leader_election=_leader_election(args),
                         leader_election_namespace=args.leader_election_namespace or _own_namespace())
    cfg.chart_mirrors = _mirrors(args.chart_mirror, "--chart-mirror")
    cfg.git_mirrors = _mirrors(args.git_mirror, "--git-mirror")
    cfg.flux_api = args.flux_api is not None
    if args.flux_api == "current":
        cfg.tunables = replace(cfg.tunables, flux_removed_versions=False)
    cfg.flux_namespace = args.flux_namespace
    if args.strict_substitution:
        cfg.tunables = replace(cfg.tunables, strict_substitution=True)
    _tenancy(args, cfg)
    if args.cache_dir:
        cfg.cache_dir = Path(args.cache_dir)
    if (problem := _unwritable(cfg.cache_dir)) is not None:
        print(f"helmop: the cache directory {cfg.cache_dir} is not writable ({problem}): it must be, for helm, charts "
              "and git mirrors (--cache-dir, or mount a volume there: an emptyDir in Kubernetes)", file=sys.stderr)
        return 2
    if args.apps:
        cfg.apps = parse_apps(Path(args.apps).read_text(), args.apps)
    repository = cfg.jenkins_chart["repository"]
    cfg.jenkins_chart = {"repository": {**repository, "url": args.jenkins_chart_repository or repository["url"],
                                        "version": args.jenkins_chart_version or repository["version"]}}
    if not args.sandbox:
        try:
            asyncio.run(run_operator(cfg))
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
        cfg.kubeconfig = sandbox.kubeconfig
        asyncio.run(run_operator(cfg))
    return 0


def _tenancy(args: argparse.Namespace, cfg: OperatorConfig) -> None:
    """What tenants' objects may reach through the operator: addresses notifications may go to, unconfined
    builds, its own SOPS keys (--decryption-keys and the namespaces they serve), remote clusters' kubeconfigs
    (exec plugins, TLS, where tokens may be sent). A flag that does not parse ends the process, naming it."""
    try:
        cfg.allow_notify_cidrs = tuple(str(Policy.notifications([c]).allowed[0]) for c in args.allow_notify_cidr)
    except ValueError as exc:
        raise SystemExit(f"helmop: --allow-notify-cidr: {exc}") from None
    cfg.unconfined_builds = args.unconfined_builds
    cfg.decryption_keys = Path(args.decryption_keys) if args.decryption_keys else None
    if args.decryption_keys_namespaces is not None:
        try:
            cfg.tenancy = replace(cfg.tenancy, decryption_keys_namespaces=Tenancy.namespaces(
                args.decryption_keys_namespaces))
        except ValueError as exc:
            raise SystemExit(f"helmop: --decryption-keys-namespaces: {exc}") from None
    cfg.kubeconfig_exec, cfg.kubeconfig_tls = args.insecure_kubeconfig_exec, args.insecure_kubeconfig_tls
    if args.kubeconfig_token_addresses is not None:
        try:
            cfg.kubeconfig_token_addresses = TokenAddresses.parse(args.kubeconfig_token_addresses)
        except ValueError as exc:
            raise SystemExit(f"helmop: --kubeconfig-token-addresses: {exc}") from None


def _unwritable(directory: Path) -> str | None:
    """Why a file cannot be made in ``directory`` (made first if missing), or None. Asked before anything runs
    there: on a read-only root filesystem without its volume, helm's first run would end in a traceback."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=directory).close()
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def _mirrors(given: list[str], flag: str) -> tuple[tuple[str, str], ...]:
    mirrors = [tuple(m.split("=", 1)) for m in given]
    if any(len(m) != 2 or not m[0] or not m[1] for m in mirrors):
        raise SystemExit(f"helmop: {flag} takes FROM=TO (two URL prefixes)")
    return tuple((m[0], m[1]) for m in mirrors)


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
