"""``helmop try PATH|GIT_URL``: a config repository tried on an embedded sandbox, no cluster needed. The revision is
served to the operator from a private copy (:mod:`.repository`); the cluster folder's objects are applied as ``flux
bootstrap`` applies them (:mod:`.plan`); ``helmop run --sandbox`` runs as a child process (:mod:`.processes`, with
``--flux-api`` when the tree holds Flux's kinds); every object helmop reconciles is followed until all are Ready or
stuck or failing alike for a while (:mod:`.cluster`, :mod:`.states`), live, then reported (:mod:`.report`). Exit
codes: 0 everything Ready; 1 not (a Stalled or failing object, the cluster folder does not build, the time ran out);
2 an error before anything was tried (no such folder or revision, helm missing, the sandbox did not start)."""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from helmop.api.durations import parse_duration
from helmop.api.manifests import Manifest
from helmop.infra.kube import Connection, Kube, KubeError

from .. import builds
from ..argtree import Verb, arg, explained
from ..errors import Failed
from . import cluster, plan, processes, repository
from .report import Live, Result, as_json, as_table
from .states import PATIENCE, Tracked

OK, FAILED, ERROR = 0, 1, 2


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _checked(args: argparse.Namespace) -> None:
    if any(len(m.split("=", 1)) != 2 or not all(m.split("=", 1)) for m in args.chart_mirror):
        raise Failed("--chart-mirror takes FROM=TO (two URL prefixes)")
    tools = {"git": "git", "helm": os.environ.get("HELMOP_HELM", "helm"),
             "kubectl": os.environ.get("HELMOP_KUBECTL", "kubectl")}
    missing = [name for name, tool in tools.items() if shutil.which(tool) is None]
    if missing:
        raise Failed(f"{' and '.join(missing)} not found on the PATH (scripts/setup installs them in .tools/bin)")
    for key in args.decrypt:
        if not Path(key).is_file():
            raise Failed(f"--decrypt {key}: no such file")


def _terminated(number: int, _frame: object) -> None:
    raise SystemExit(128 + number)  # as a shell reports it, once the children are stopped and the files gone


def run(args: argparse.Namespace) -> int:
    work = Path(tempfile.mkdtemp(prefix="helmop-try-"))
    children = processes.Children(work)
    kept = False
    main = threading.current_thread() is threading.main_thread()  # (signal handlers are the main thread's)
    before = signal.signal(signal.SIGTERM, _terminated) if main else None  # `kill`: the finally below still runs
    try:
        _checked(args)
        result = _try(args, children)
        if args.keep and children.processes:
            kept = True
            result.kept = {"kubeconfig": str(children.kubeconfig), "log": str(work / "operator.log"),
                           "logFile": str(children.log_file), "stop": str(children.stop_script())}
        print(as_json(result) if args.output == "json" else as_table(result) + _kept(result), end="")
        return OK if result.converged else FAILED
    except Failed as exc:
        print(f"✗ {exc}", file=sys.stderr)
        return ERROR
    except KeyboardInterrupt:
        print("✗ interrupted", file=sys.stderr)
        return FAILED
    finally:
        if main:
            signal.signal(signal.SIGTERM, before)
        if not kept:
            children.stop()
            shutil.rmtree(work, ignore_errors=True)


_WHAT = "try a config repository on an embedded sandbox, no cluster needed"
VERB = Verb(
    "try", _WHAT, (
        arg("source", metavar="PATH|GIT_URL", help="a local folder (a git working tree, a bare repository or a plain "
            "folder) or a git URL"),
        arg("--path", metavar="DIR", help="the cluster folder to apply (default: the folder given inside a working "
            "tree; else the one a Kustomization or ConfigSync in it applies, as flux bootstrap lays out; else the one "
            "folder under clusters/; else the root)"),
        arg("--ref", metavar="REF", help="the branch, tag or commit to try (default: a URL's default branch; a "
            "working tree as it is, uncommitted changes included)"),
        arg("--timeout", type=explained(parse_duration), default=600.0, metavar="DURATION",
            help="how long to wait for everything to be Ready (default 10m)"),
        arg("--patience", type=explained(parse_duration), default=PATIENCE, metavar="DURATION",
            help="how long an object may fail with the same reason before nothing is expected of it (default 1m, or "
                 "two of its retryIntervals when longer): once every object not Ready has, or waits for one that "
                 "has, try ends"),
        arg("--wait-for-transient", action="store_true",
            help="wait the whole --timeout even when nothing can progress (instead of ending once every object not "
                 "Ready has failed with the same reason for its --patience, or waits for one that has)"),
        arg("--output", "-o", choices=("table", "json"), default="table", help="the report's form"),
        arg("--chart-mirror", action="append", metavar="FROM=TO", default=[],
            help="fetch charts whose URL starts with FROM from TO instead (repeatable; the operator's flag)"),
        arg("--decrypt", action="append", metavar="KEYFILE", default=[],
            help="a SOPS age identity or armored OpenPGP private key (repeatable): the operator's "
                 "--decryption-keys, and the Secret each spec.decryption.secretRef names"),
        arg("--ui", action="store_true", help="also serve the web UI on the sandbox, and print its URL"),
        arg("--keep", action="store_true", help="leave the sandbox and the operator (and the UI) running, and print "
            "the KUBECONFIG to use and how to stop them")),
    run=run,
    description=_WHAT + ": the sandbox and the operator started, the repository served to it from a private copy, "
                "the cluster folder's objects applied, and everything followed until Ready, stuck, or failing alike "
                "for a minute; exit 0 when all is Ready, 1 when not, 2 on an error before anything was tried")


def _kept(result: Result) -> str:
    if not result.kept:
        return ""
    kept = result.kept
    return (f"\nLeft running (operator output: {kept['log']}). In your shell:\n"
            f"export KUBECONFIG={kept['kubeconfig']} HELMOP_LOG_FILE={kept['logFile']}\n"
            f"Stop it all with: {kept['stop']}\n")


def _try(args: argparse.Namespace, children: processes.Children) -> Result:
    started = time.monotonic()
    work = children.work
    served = repository.prepare(args.source, args.ref, work)
    _say(f"▶ trying {served.label}")
    found = plan.tree_objects(served.tree)
    path = plan.cluster_folder(found, served.tree, args.path, served.subfolder)
    result = Result(served.label, served.commit, path, False, "broken", 0.0, patience=args.patience)
    try:
        objects, planned = _planned(args, served, found, path, work)
    except plan.Broken as exc:
        result.broken, result.seconds = str(exc), time.monotonic() - started
        return result
    result.flux, result.made, result.left_out = planned.flux, planned.made, planned.left_out
    result.lockdown = planned.lockdown
    _say(f"▶ the cluster folder {path or '.'}: {len(objects)} objects; the sandbox and the operator"
         f"{' (--flux-api: the tree holds Flux kinds)' if planned.flux else ''} starting")
    processes.start_operator(children, processes.Options(planned.flux, args.chart_mirror, planned.git_mirrors,
                                                         plan.key_entries(args.decrypt), planned.lockdown))
    if args.ui:
        processes.start_ui(children)
        result.ui = children.ui
        _say(f"▶ the web UI: {children.ui}")
    _say(f"▶ applying, then following (at most {args.timeout:.0f}s); KUBECONFIG={children.kubeconfig}")
    try:
        result.table, result.verdict = asyncio.run(_follow(children.kubeconfig, planned, args.timeout,
                                                           None if args.wait_for_transient else args.patience))
    except Failed as exc:  # the sandbox went away: what the operator's process said last
        raise Failed(f"{exc}\n{children.tail('operator')}") from None
    result.seconds = time.monotonic() - started
    return result


def _planned(args: argparse.Namespace, served: repository.Served, found: list[Manifest], path: str,
             work: Path) -> tuple[list[Manifest], plan.Plan]:
    """The cluster folder built and planned, the revision published; when Flux's install is left out, from a
    private commit whose cluster folder deletes it, built again to be sure it does."""
    keys = builds.keys_of(args.decrypt)
    objects = asyncio.run(plan.build(served.tree, path, work / "build", keys))
    planned = plan.plan(served, found, path, objects, plan.key_entries(args.decrypt))
    commit = repository.amend(served, planned.copy) if planned.copy else ""
    if commit:
        rebuilt = {plan.title(item) for item in asyncio.run(plan.build(served.tree, path, work / "build", keys))}
        if rebuilt & set(planned.left_out):
            raise plan.Broken(f"{path or '.'}: its kustomization did not leave out "
                              f"{', '.join(sorted(rebuilt & set(planned.left_out)))} (Flux's install)")
    repository.publish(served, planned.branches, planned.tags, planned.refs, commit)
    return objects, planned


async def _follow(kubeconfig: Path, planned: plan.Plan, timeout: float,
                  patience: float | None) -> tuple[dict[str, Tracked], str]:
    kube = Kube(Connection.from_kubeconfig(str(kubeconfig), None))
    try:
        started = time.monotonic()
        refused = await cluster.apply(kube, planned.applied)
        return await cluster.follow(kube, cluster.followed_kinds(planned.flux), refused, started, timeout,
                                    Live(sys.stderr), patience)
    except KubeError as exc:
        raise Failed(f"the sandbox's API said: {exc.message}") from None
    finally:
        await kube.close()
