"""Entry point of the ``helmop`` command: argument parsing and dispatch to the verbs.

Exit codes: 0 ok, 1 failed, 2 usage (argparse's own); ``diff`` follows ``kubectl diff``: 0 no
differences, 1 differences, 2 error.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any, TypeVar

from helmop.api import settings, validation
from helmop.api.apps import AppKind, parse_apps
from helmop.api.durations import parse_duration, parse_size
from helmop.api.errors import SpecError
from helmop.api.kinds import BUILTIN
from helmop.helm.engine import Engine, default_executable
from helmop.infra.kube import KubeError

from . import operate, projects, releases, tenancy, verbs
from .errors import Failed

T = TypeVar("T")


def _argument(parse: Callable[[str], T]) -> Callable[[str], T]:
    """An argparse type from a parser whose ValueError says what is wrong (argparse shows that message)."""
    def convert(text: str) -> T:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


def _namespace(args: argparse.Namespace) -> str | None:
    if getattr(args, "all_namespaces", False):
        return None
    return args.namespace or os.environ.get("HELMOP_NAMESPACE") or "default"


def _with_kube(work: Callable[[Any], Awaitable[int]], failed: int = 1) -> Callable[[argparse.Namespace], int]:
    """Run an async verb with an API client, turning failures into a message and exit code ``failed``."""

    def verb(args: argparse.Namespace) -> int:
        async def main() -> int:
            kube = verbs.connect(args.kubeconfig)
            try:
                return await work((args, kube))
            finally:
                await kube.close()

        try:
            return asyncio.run(main())
        except (Failed, SpecError) as exc:
            print(f"✗ {exc}", file=sys.stderr)
        except KubeError as exc:
            print(f"✗ the Kubernetes API said: {exc.message}", file=sys.stderr)
        return failed

    return verb


async def _get(pair: Any) -> int:
    args, kube = pair
    kinds = [await verbs.resolve_kind(kube, args.kind)] if args.kind else [k for k in BUILTIN if k.namespaced]
    print(await verbs.get(kube, kinds, _namespace(args)))
    return 0


async def _reconcile(pair: Any) -> int:
    args, kube = pair
    kind = await verbs.resolve_kind(kube, args.kind)
    if (args.reset or args.force) and kind.kind != "HelmRelease":
        raise Failed("--reset and --force apply to HelmReleases (hr)")
    ok = await verbs.reconcile(kube, kind, _namespace(args) or "default", args.name, with_source=args.with_source,
                               timeout=args.timeout, reset=args.reset, force=args.force)
    return 0 if ok else 1


async def _suspend(pair: Any) -> int:
    args, kube = pair
    kind = verbs.kind_of(args.kind)  # helmop's own kinds: an app resource's spec is its chart's values
    print(await verbs.set_suspended(kube, kind, _namespace(args) or "default", args.name, args.verb == "suspend"))
    return 0


def _project(args: argparse.Namespace) -> dict[str, Any]:
    return projects.manifest(args.name, members=args.member or [], quota=args.quota or [], sync=args.sync,
                             branch=args.branch, path=args.path, jenkins=args.jenkins, isolate=args.isolate)


async def _create_project(pair: Any) -> int:
    args, kube = pair
    print(await projects.create(kube, _project(args)))
    return 0


def _create(args: argparse.Namespace) -> int:
    if not args.export:
        return _with_kube(_create_project)(args)
    try:
        print(projects.export(_project(args)), end="")
    except Failed as exc:
        print(f"✗ {exc}", file=sys.stderr)
        return 1
    return 0


async def _tree(pair: Any) -> int:
    args, kube = pair
    kind = await verbs.resolve_kind(kube, args.kind)
    if kind.kind != "Project":
        raise Failed("tree shows Projects (proj) for now")
    print(await projects.tree(kube, args.name))
    return 0


async def _check_tenancy(pair: Any) -> int:
    args, kube = pair
    report, confined = await tenancy.check(kube, _namespace(args) or "default", args.default_service_account)
    print(report)
    return 0 if confined else 1


def _engine() -> Engine:
    return Engine.start(default_executable())


def _apps(args: argparse.Namespace) -> list[AppKind]:
    return parse_apps(Path(args.apps).read_text(), args.apps) if args.apps else []


async def _diff(pair: Any) -> int:
    args, kube = pair
    engine = Engine.start(default_executable(), Path(args.kubeconfig) if args.kubeconfig else None)
    if args.filename:
        if args.kind or args.name:
            raise Failed("give either -f FILE|DIR or a HelmRelease (hr NAME), not both")
        text = await releases.diff_files(kube, engine, verbs.temp_cache(), [Path(f) for f in args.filename],
                                         _apps(args), _namespace(args) or "default")
    else:
        if not args.name or verbs.kind_of(args.kind or "").kind != "HelmRelease":
            raise Failed("diff needs -f FILE|DIR, or hr NAME")
        text = await releases.diff_live(kube, engine, verbs.temp_cache(), _namespace(args) or "default", args.name)
    print(text or "no changes", end="" if text else "\n")
    return 1 if text else 0


def _render(args: argparse.Namespace) -> int:
    try:
        apps = _apps(args)
        if args.validate and _schema_problems(args.path):
            return 1
        ok = asyncio.run(releases.render(Path(args.path), [Path(p) for p in args.values_dir or []], _engine(),
                                         verbs.temp_cache(), apps, Path(args.output_dir) if args.output_dir else None))
    except (Failed, SpecError) as exc:
        print(f"✗ {exc}", file=sys.stderr)
        return 1
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        # A resource of a type the API server would refuse (a string where a number goes, say): the schema
        # names its file and line, as --validate does; a traceback would not.
        if not _schema_problems(args.path):
            print(f"✗ {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0 if ok else 1


def _schema_problems(path: str) -> bool:
    """Print the tree's problems against the CRD schemas (file:line); whether there were any."""
    problems = validation.tree(releases.read_tree([Path(path)]))
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return bool(problems)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="helmop", description="Helm releases from Kubernetes resources.")
    top.add_argument("--version", action="version", version=f"helmop {version('helmop')}")
    verbs_ = top.add_subparsers(dest="verb", required=True)

    sb = verbs_.add_parser("sandbox", help="run the embedded Kubernetes API sandbox in the foreground")
    operate.sandbox_verb(sb)

    run = verbs_.add_parser("run", help="run the operator against the current kubeconfig (or an embedded sandbox)")
    run.add_argument("--kubeconfig", help="kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, in-cluster); "
                                          "with --sandbox, where to write the sandbox's")
    run.add_argument("--sandbox", action="store_true",
                     help="start an embedded sandbox in this process, install the CRDs, run the operator on it")
    run.add_argument("--install-crds", action="store_true", help="create or update helmop's CRDs at start")
    run.add_argument("--namespace", "-n", action="append", help="watch this namespace (repeatable; default all)")
    run.add_argument("--all-namespaces", "-A", action="store_true", help="watch all namespaces (the default)")
    run.add_argument("--concurrency", type=int, default=settings.CONCURRENCY,
                     help="helm actions at once (default %(default)s)")
    run.add_argument("--cache-dir", help="chart and helm caches (default ~/.cache/helmop)")
    run.add_argument("--webhook-port", type=int, help="serve git push webhooks on this port (default: off)")
    run.add_argument("--metrics-port", type=int, help="serve /metrics, /healthz and /readyz on this port")
    run.add_argument("--bind-address", help="address the webhook and metrics servers listen on (default: all "
                                            "interfaces; 127.0.0.1 with --sandbox)")
    run.add_argument("--log-format", choices=["text", "json"], default="text", help="log lines as text or JSON")
    run.add_argument("--allow-file-git", metavar="DIR", action="append", default=[],
                     help="allow file:// GitRepository URLs under DIR (repeatable; never helmop's cache)")
    run.add_argument("--default-service-account", metavar="NAME",
                     help="resources that name no ServiceAccount act as this ServiceAccount of their own namespace "
                          "(multi-tenancy lockdown; default: the operator's own rights)")
    run.add_argument("--no-cross-namespace-refs", action="store_true",
                     help="refuse every reference from a resource into another namespace (sourceRef, ...)")
    run.add_argument("--leader-elect", action="store_true",
                     help="run as one of several replicas: only the holder of the Lease helmop-leader[-SHARD] acts")
    run.add_argument("--leader-election-namespace", metavar="NAMESPACE",
                     help="namespace of the leader Lease (default: $POD_NAMESPACE, the pod's own, or default)")
    run.add_argument("--shard", metavar="NAME",
                     help="handle only resources labelled helmop.dev/shard=NAME (default: only those without it)")
    run.add_argument("--helm-cache-ttl", type=_argument(parse_duration), default=settings.HELM_CACHE_TTL,
                     metavar="DURATION", help="how long a chart repository's index is used before it is asked "
                                              "again (default %(default)ss; `helmop reconcile` asks at once)")
    run.add_argument("--helm-index-max-size", type=_argument(parse_size), default=settings.HELM_INDEX_MAX_SIZE,
                     metavar="SIZE", help="largest repository index read (default %(default)s bytes); over it: "
                                          "IndexTooLarge")
    run.add_argument("--helm-chart-max-size", type=_argument(parse_size), default=settings.HELM_CHART_MAX_SIZE,
                     metavar="SIZE", help="largest chart archive downloaded (default %(default)s bytes); over it: "
                                          "ChartTooLarge")
    run.add_argument("--apps", help="app kinds file: custom resources whose spec are a chart's values")
    run.add_argument("--jenkins-chart-repository", help="Helm repository of the Jenkins chart "
                                                        "(default https://charts.jenkins.io)")
    run.add_argument("--jenkins-chart-version", help="Jenkins chart version (default: the pinned one)")
    run.set_defaults(run=operate.run)

    def cluster_verb(name: str, description: str, work: Callable[[Any], Awaitable[int]],
                     failed: int = 1) -> argparse.ArgumentParser:
        sub = verbs_.add_parser(name, help=description, description=description)
        sub.add_argument("--kubeconfig", help="kubeconfig to use (default: $KUBECONFIG, ~/.kube/config)")
        sub.add_argument("--namespace", "-n", help="namespace (default: default)")
        sub.set_defaults(run=_with_kube(work, failed))
        return sub

    get = cluster_verb("get", "list helmop resources: name, revision, suspended, ready, message", _get)
    get.add_argument("kind", nargs="?", help="hr, gitrepo, csync or jenkins (default: all)")
    get.add_argument("--all-namespaces", "-A", action="store_true", help="in every namespace")

    rec = cluster_verb("reconcile", "reconcile a resource now and wait for the outcome", _reconcile)
    rec.add_argument("kind", help="hr, gitrepo, csync, jenkins, or an app kind (such as webapps)")
    rec.add_argument("name")
    rec.add_argument("--with-source", action="store_true", help="fetch its GitRepository first")
    rec.add_argument("--timeout", type=float, default=300, help="seconds to wait (default 300)")
    rec.add_argument("--reset", action="store_true",
                     help="HelmRelease: count failures afresh, one more try after RetriesExceeded (helmop.dev/resetAt)")
    rec.add_argument("--force", action="store_true",
                     help="HelmRelease: one forced upgrade, even when up to date (helmop.dev/forceAt)")

    for name, what in (("suspend", "stop acting on a resource"), ("resume", "act on a suspended resource again")):
        sub = cluster_verb(name, what, _suspend)
        sub.add_argument("kind", help="hr, gitrepo, csync or jenkins")
        sub.add_argument("name")

    diff = cluster_verb("diff", "what an upgrade would change: the live release against a HelmRelease's spec, or "
                               "against local manifests (-f); exit 0 same, 1 different, 2 error", _diff, failed=2)
    diff.add_argument("kind", nargs="?", help="hr (with a NAME: the HelmRelease's spec in the cluster)")
    diff.add_argument("name", nargs="?")
    diff.add_argument("--filename", "-f", action="append",
                      help="manifests (file or directory, repeatable) holding HelmReleases or app resources; "
                           "valuesFrom is read from the cluster")
    diff.add_argument("--apps", help="app kinds file, to diff app resources too")

    check = cluster_verb("check", "check a namespace's tenancy: the ServiceAccounts helmop acts as there may not "
                                  "grant themselves more or reach outside it; exit 0 confined, 1 not", _check_tenancy)
    check.add_argument("what", choices=["tenancy"])
    check.add_argument("--default-service-account", metavar="NAME", default="",
                       help="the operator's --default-service-account (resources naming no ServiceAccount act as it)")

    tree = cluster_verb("tree", "what a Project holds: its parts, its Jenkins's and config repository's releases, "
                                "its environments", _tree)
    tree.add_argument("kind", help="proj")
    tree.add_argument("name")

    create = cluster_verb("create", "create a resource from flags (or print it with --export)", _create_project)
    create.add_argument("kind", choices=["project", "proj"])
    create.add_argument("name")
    create.add_argument("--member", action="append", metavar="KIND:NAME:ROLE",
                        help="user:alice:edit, group:devs:view, serviceaccount:ns/name:admin (repeatable)")
    create.add_argument("--quota", action="append", metavar="RESOURCE=QUANTITY", help="pods=20 (repeatable)")
    create.add_argument("--sync", metavar="URL", help="the project's config repository")
    create.add_argument("--branch", default="main", help="its branch (default main)")
    create.add_argument("--path", default="", help="the folder of its manifests (default the root)")
    create.add_argument("--jenkins", action="store_true", help="a Jenkins for the project")
    create.add_argument("--isolate", action="store_true", help="a NetworkPolicy isolating the project namespace")
    create.add_argument("--export", action="store_true", help="print the YAML instead of applying it")
    create.set_defaults(run=_create)

    render = verbs_.add_parser("render", help="render the releases of a config-repository tree offline",
                               description="Find every HelmRelease (and Jenkins / app kind) under PATH, merge "
                                           "values (ConfigMaps/Secrets from the tree), render with helm template.")
    render.add_argument("path", help="a config-repository directory")
    render.add_argument("--values-dir", action="append", help="more directories with ConfigMaps/Secrets")
    render.add_argument("--output-dir", "-o", help="write <namespace>/<name>.yaml files here (default: stdout)")
    render.add_argument("--apps", help="app kinds file, to render app resources too")
    render.add_argument("--validate", action="store_true",
                        help="first check every helmop resource in the tree against the CRD schemas (offline); "
                             "errors name file:line")
    render.set_defaults(run=_render)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    result: int = args.run(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
