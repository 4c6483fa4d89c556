"""Entry point of the ``helmop`` command: argument parsing and dispatch to the verbs.

Exit codes: 0 ok; 1 a failed outcome (a reconcile that did not end Ready, a namespace that is not
confined, a render with errors) or differences (``diff``, as ``kubectl diff``); 2 a usage error
(argparse's own) or an error (not found, the API refused, no kubeconfig).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helmop.api import k8syaml, validation
from helmop.api.apps import AppKind, parse_apps
from helmop.api.durations import parse_duration
from helmop.api.errors import SpecError
from helmop.api.kinds import BUILTIN, IMAGES, Kind
from helmop.api.redaction import redact, redact_data
from helmop.api.settings import default_helm
from helmop.infra.kube import KubeError
from helmop.sources.errors import SourceError
from helmop.views.cells import LOCAL
from helmop.views.remotes import Reach
from helmop.views.tree import Node, tree

from . import (
    argtree,
    artifacts,
    builds,
    completion,
    control,
    convert,
    create,
    explore,
    images,
    mcp,
    operate,
    operator_logs,
    preview,
    projects,
    runflags,
    show,
    target,
    tenancy,
    trying,
    uiauth,
    verbs,
    why,
)
from .argtree import Arg, arg, explained
from .errors import Failed, missing_tool

if TYPE_CHECKING:
    from helmop.helm.engine import Engine

    from .releases import ReleaseDiff

OK, FAILED, ERROR = 0, 1, 2
Work = Callable[[argparse.Namespace, target.Target], Awaitable[int]]


def _duration(text: str) -> float:
    """A duration (90s, 5m, 1h30m), or a number of seconds as before durations were taken."""
    try:
        return float(text)
    except ValueError:
        return parse_duration(text)


def _cluster(work: Work) -> Callable[[argparse.Namespace], int]:
    """Run an async verb against the cluster the flags name; an error is a message and exit code 2."""

    def verb(args: argparse.Namespace) -> int:
        async def main() -> int:
            where = target.connect(args)
            try:
                return await work(args, where)
            finally:
                await where.kube.close()

        try:
            return asyncio.run(main())
        except (Failed, SpecError) as exc:
            print(f"✗ {exc}", file=sys.stderr)
        except KubeError as exc:
            print(f"✗ the Kubernetes API said: {exc.message}", file=sys.stderr)
        except KeyboardInterrupt:  # --watch, --follow: interrupted is how they end
            return OK
        return ERROR

    return verb


async def _kinds(where: target.Target, text: str | None) -> list[Kind]:
    """KIND, KIND,KIND, or none / all (every namespaced helmop kind)."""
    if not text or text == "all":
        return [k for k in BUILTIN if k.namespaced]
    if text == "images":  # Flux's `get images`: the three kinds
        return list(IMAGES)
    return [await verbs.resolve_kind(where.kube, part) for part in text.split(",") if part]


async def _get(args: argparse.Namespace, where: target.Target) -> int:
    kinds = await _kinds(where, args.kind)
    if args.watch and len(kinds) != 1:
        raise Failed("--watch takes one kind")
    version = await show.version_now(where, kinds[0]) if args.watch else ""
    listed = await show.get(where, kinds, args.names, output=args.output or "", selector=args.selector or "",
                            cluster_name=args.cluster or "")
    if args.watch:
        await show.watch(where, kinds[0], args.names, version, output=args.output or "",
                         selector=args.selector or "", cluster_name=args.cluster or "", clusters=listed.clusters)
    return OK if listed.complete else ERROR


async def _export(args: argparse.Namespace, where: target.Target) -> int:
    complete = await show.export(where, await _kinds(where, args.kind), args.names, args.selector or "")
    return OK if complete else ERROR


async def _reconcile(args: argparse.Namespace, where: target.Target) -> int:
    kind = await verbs.resolve_kind(where.kube, args.kind)
    if (args.reset or args.force) and kind.kind != "HelmRelease":
        raise Failed("--reset and --force apply to HelmReleases (hr)")
    ok = await verbs.reconcile(where.kube, kind, where.namespace, args.name, with_source=args.with_source,
                               timeout=args.timeout, reset=args.reset, force=args.force, reason=args.reason or "")
    return OK if ok else FAILED


async def _suspend(args: argparse.Namespace, where: target.Target) -> int:
    kind = verbs.kind_of(args.kind)  # helmop's own kinds: an app resource's spec is its chart's values
    print(await verbs.set_suspended(where.kube, kind, where.namespace, args.name, args.verb == "suspend",
                                    reason=args.reason or ""))
    return OK


async def _tree_of(args: argparse.Namespace, where: target.Target) -> Node:
    """The tree under the object KIND NAME names (Failed when it does not exist)."""
    node = await tree(where.kube, await verbs.reference(where.kube, args.kind, where.namespace, args.name))
    if node.obj is None:
        raise Failed(f"{node.title} not found")
    return node


def _reach(args: argparse.Namespace) -> Reach:
    return Reach(allow_exec=args.insecure_kubeconfig_exec, allow_insecure_tls=args.insecure_kubeconfig_tls)


async def _tree(args: argparse.Namespace, where: target.Target) -> int:
    ref = await verbs.reference(where.kube, args.kind, where.namespace, args.name)
    print(await explore.tree_of(where.kube, ref, _reach(args)))
    return OK


async def _trace(args: argparse.Namespace, where: target.Target) -> int:
    ref = await verbs.reference(where.kube, args.kind, where.namespace, args.name)
    print(await explore.trace(where.kube, ref, args.cluster or LOCAL, _reach(args)))
    return OK


async def _why(args: argparse.Namespace, where: target.Target) -> int:
    kind, name = why.split(args.kind, args.name)
    print(await why.run(where.kube, kind, where.namespace, name, args.output))
    return OK


async def _events(args: argparse.Namespace, where: target.Target) -> int:
    if bool(args.kind) != bool(args.name):
        raise Failed("give KIND NAME (the object's Events and those of what it manages), or neither")
    if args.kind:
        node = await _tree_of(args, where)
        about = {(n.ref[1], n.ref[2], n.ref[3]) for n in node.walk()}
        # Events of cluster-scoped objects are kept in the default namespace
        namespaces: list[str | None] = [*sorted({n.ref[2] or "default" for n in node.walk()})]
        text = await explore.events(where.kube, namespaces, about)
    else:
        text = await explore.events(where.kube, [where.scope], None)
    print(text or "No events found.", file=sys.stdout if text else sys.stderr)
    return OK


async def _logs(args: argparse.Namespace, where: target.Target) -> int:
    if bool(args.kind) != bool(args.name):
        raise Failed("give KIND NAME (the lines about that object), or neither (every line)")
    kind = (await verbs.reference(where.kube, args.kind, where.namespace, args.name))[1] if args.kind else ""
    await operator_logs.logs(where.kube, kind=kind, namespace=where.namespace, name=args.name or "",
                             log_file=args.log_file, follow=args.follow, tail=args.tail,
                             operator_namespace=args.operator_namespace)
    return OK


async def _ui(args: argparse.Namespace, where: target.Target) -> int:
    if args.auth == "kubeconfig" and args.address not in ("127.0.0.1", "localhost"):
        raise Failed("--auth kubeconfig serves with the kubeconfig's rights: it listens on 127.0.0.1 only "
                     "(give --auth token or oidc to serve others, each with their own rights)")
    uiauth.refuse_stray(args)
    auth = uiauth.oidc_settings(args) if args.auth == "oidc" else args.auth
    from helmop import ui  # its pages and Jinja2: for this verb only (the operator's process never needs them)

    await ui.serve(where.kube, auth=auth, address=args.address, port=args.port, actions=args.actions,
                   namespace=where.namespace, operator_namespace=args.operator_namespace, log_file=args.log_file,
                   announce=lambda url: print(f"helmop ui: {url}", flush=True))
    return OK


async def _create(args: argparse.Namespace, where: target.Target) -> int:
    if args.create == "project":
        obj = _project(args)
        print(await projects.create(where.kube, obj))
        return OK
    kind, obj = create.manifest(args.create, args, where.namespace)
    print(await create.apply(where.kube, kind, obj))
    return OK


def _project(args: argparse.Namespace) -> dict[str, Any]:
    return projects.manifest(args.name, members=args.member or [], quota=args.quota or [], sync=args.sync,
                             branch=args.branch, path=args.path, jenkins=args.jenkins, isolate=args.isolate)


def _create_or_export(args: argparse.Namespace) -> int:
    if not args.export:
        return _cluster(_create)(args)
    try:
        if args.create == "project":
            print(projects.export(_project(args)), end="")
        else:  # no cluster needed: the namespace is -n's, or the kubeconfig context's when it can be read
            namespace = args.namespace or _context_namespace(args)
            print(projects.export(create.manifest(args.create, args, namespace)[1]), end="")
    except Failed as exc:
        print(f"✗ {exc}", file=sys.stderr)
        return ERROR
    return OK


def _context_namespace(args: argparse.Namespace) -> str:
    try:
        return target.connect(args).namespace
    except Failed:
        return "default"


async def _check_tenancy(args: argparse.Namespace, where: target.Target) -> int:
    report, confined = await tenancy.check(where.kube, where.namespace, args.default_service_account)
    print(report)
    return OK if confined else FAILED


def _apps(args: argparse.Namespace) -> list[AppKind]:
    return parse_apps(Path(args.apps).read_text(), args.apps) if args.apps else []


async def _diff(args: argparse.Namespace, where: target.Target) -> int:
    from helmop.helm.engine import Engine

    from . import releases  # with helm's client (pyhelm3, pydantic): for diff and render only

    engine = Engine.start(default_helm(), Path(args.kubeconfig) if args.kubeconfig else None)
    masked: list[str] = []  # what was decrypted
    if args.filename:
        if args.kind or args.name:
            raise Failed("give either -f FILE|DIR or a HelmRelease (hr NAME), not both")
        found, masked = await _diff_files(args, where, engine)
    else:
        if not args.name or verbs.kind_of(args.kind or "").kind != "HelmRelease":
            raise Failed("diff needs -f FILE|DIR, or hr NAME")
        found = await releases.diff_live(where.kube, engine, verbs.temp_cache(), where.namespace, args.name)
    return _print_diff(found, masked, args.output_format)


async def _diff_files(args: argparse.Namespace, where: target.Target,
                      engine: Engine) -> tuple[list[ReleaseDiff], list[str]]:
    """The diffs of the releases in the -f manifests, kustomize overlays built first; and what was decrypted."""
    from . import releases

    paths, keys = [Path(f) for f in args.filename], builds.keys_of(args.decrypt or [])
    overlays = [await builds.build(path, _variables(args), verbs.temp_cache(), keys=keys) for path in paths
                if builds.is_overlay(path)]
    found = await releases.diff_files(where.kube, engine, verbs.temp_cache(),
                                      [p for p in paths if not builds.is_overlay(p)], _apps(args), where.namespace,
                                      built=[item for overlay in overlays for item in overlay.objects])
    return found, [text for overlay in overlays for text in overlay.plaintexts]


def _print_diff(found: list[ReleaseDiff], masked: list[str], output_format: str) -> int:
    """The diffs as unified text or JSON, what was decrypted masked; exit 1 when anything differs."""
    changed = any(d.objects for d in found)
    if output_format == "json":
        print(redact(json.dumps({"changed": changed, "releases": [d.json() for d in found]}, indent=2), masked))
    else:
        text = redact("".join(d.text() for d in found), masked)
        print(text or "no changes", end="" if text else "\n")
    return FAILED if changed else OK


def _variables(args: argparse.Namespace) -> dict[str, str]:
    return builds.variables(args.substitute or [], args.substitute_from_file or [])


def _build(args: argparse.Namespace) -> int:
    """``render`` of a kustomize overlay: the objects a ConfigSync over it would apply, as YAML."""
    try:
        built = asyncio.run(builds.build(Path(args.path), _variables(args), verbs.temp_cache(),
                                         keys=builds.keys_of(args.decrypt or [])))
    except (Failed, SourceError) as exc:
        print(f"✗ {exc}", file=sys.stderr)
        return FAILED
    # what was decrypted is masked, in every encoding: the output goes to terminals and CI logs
    text = k8syaml.dump_all([redact_data(item.obj, built.plaintexts) for item in built.objects])
    if args.output_dir:
        Path(args.output_dir).mkdir(parents=True, exist_ok=True)
        (Path(args.output_dir) / "build.yaml").write_text(text)
    else:
        print(text, end="")
    return OK


def _render(args: argparse.Namespace) -> int:
    if builds.is_overlay(Path(args.path)):
        return _build(args)
    from helmop.helm.engine import Engine

    from . import releases

    try:
        apps = _apps(args)
        if args.validate and _schema_problems(args.path):
            return FAILED
        engine = Engine.start(default_helm())
        ok = asyncio.run(releases.render(Path(args.path), [Path(p) for p in args.values_dir or []], engine,
                                         verbs.temp_cache(), apps, Path(args.output_dir) if args.output_dir else None))
    except (Failed, SpecError) as exc:
        print(f"✗ {exc}", file=sys.stderr)
        return ERROR
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        # A resource of a type the API server would refuse (a string where a number goes, say): the schema
        # names its file and line, as --validate does; a traceback would not.
        if not _schema_problems(args.path):
            print(f"✗ {type(exc).__name__}: {exc}", file=sys.stderr)
        return FAILED
    return OK if ok else FAILED


def _convert(args: argparse.Namespace) -> int:
    try:
        ok = convert.run(args.filename, args.to == "flux", args.output_dir, sys.stdout, sys.stderr)
    except Failed as exc:
        print(f"✗ {exc}", file=sys.stderr)
        return ERROR
    return OK if ok else FAILED


def _schema_problems(path: str) -> bool:
    """Print the tree's problems against the CRD schemas (file:line); whether there were any."""
    from . import releases

    problems = validation.tree(releases.read_tree([Path(path)]))
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return bool(problems)


def _completion(args: argparse.Namespace) -> int:
    print(completion.script(args.shell), end="")
    return OK


def _run_verb(run: argparse.ArgumentParser) -> None:
    """``helmop run``: the process's own flags, then every setting's (generated from the settings)."""
    run.add_argument("--sandbox", action="store_true",
                     help="start an embedded sandbox in this process, install the CRDs, run the operator on it")
    run.add_argument("--log-format", choices=["text", "json"], default="text", help="log lines as text or JSON")
    run.add_argument("--log-file", default=operator_logs.log_file_default(), metavar="PATH",
                     help=f"also write JSON log lines here, rotated at 10 MiB (default ${operator_logs.LOG_FILE_ENV}; "
                          "what `helmop logs` reads for an operator that is not a pod)")
    runflags.add(run)
    run.set_defaults(run=operate.run)


def _positional(dest: str, given: str, **options: Any) -> tuple[Arg, ...]:
    """KIND or NAME when a verb takes it (``[...]``: optional, as its help says)."""
    return (arg(dest, nargs="?" if given.startswith("[") else None, metavar=dest.upper(), **options),) if given else ()


def _on_cluster(name: str, what: str, work: Work, *args: Arg, all_namespaces: bool = False, kind: str = "",
                name_arg: str = "") -> argtree.Verb:
    """A verb acting on the cluster the flags name (its help also its description): the cluster's flags, KIND and
    NAME when it takes them, then its own."""
    flags = (*target.flags(all_namespaces=all_namespaces), *_positional("kind", kind, help=kind),
             *_positional("name", name_arg), *args)
    return argtree.Verb(name, what, flags, run=_cluster(work), description=what)


# `tree` and `trace` reach remote clusters with their kubeconfigs, as the operator does
_REMOTE = (arg("--insecure-kubeconfig-exec", action="store_true",
               help="let a remote cluster's kubeconfig run its exec credential plugin (refused by default, as the "
                    "operator's flag of the same name)"),
           arg("--insecure-kubeconfig-tls", action="store_true",
               help="let a remote cluster's kubeconfig skip TLS verification (as the operator's flag)"))
# `render` and `diff` build kustomize overlays as a ConfigSync does
_OVERLAY = (arg("--substitute", action="append", metavar="KEY=VALUE",
                help="a ConfigSync's postBuild variable, for a kustomize overlay (repeatable)"),
            arg("--substitute-from-file", action="append", metavar="FILE",
                help="KEY=VALUE lines, as --substitute (repeatable; --substitute wins)"),
            arg("--decrypt", action="append", metavar="KEYFILE",
                help="decrypt a kustomize overlay's SOPS-encrypted files with this age identity file or armored "
                     "OpenPGP private key (repeatable); decrypted values are masked in the output"))

_REASON = arg("--reason", metavar="TEXT", help="why, recorded with who asked (status.lastHandledRequest, an Event)")
_CONTROL_TIMEOUT = arg("--timeout", type=explained(_duration), default=300.0, metavar="DURATION",
                       help="how long to wait for the operator to act (default 5m)")
_CONTROLLED_KIND = "KIND/NAME (or KIND NAME): hr/NAME, csync/NAME, or Flux's kinds"

_CLUSTER_VERBS = (
    _on_cluster(
        "get", "list helmop resources (kubectl's columns and -o forms)", _get,
        arg("names", nargs="*", metavar="NAME"),
        arg("--output", "-o", choices=show.OUTPUTS, help="wide, json, yaml or name (default: a table)"),
        arg("--watch", "-w", action="store_true", help="after the listing, print each change"),
        arg("--selector", "-l", help="label selector (app=web,tier!=db)"),
        arg("--cluster", metavar="NAME", help="only the HelmReleases, ConfigSyncs and Kustomizations that deliver to "
                                              "this cluster, named as the CLUSTER column names it (local: the "
                                              "operator's own)"),
        all_namespaces=True, kind="[hr|gitrepo|csync|jk|proj|images|an app kind, or several: hr,csync] (default: all)"),
    _on_cluster(
        "export", "print resources as clean YAML to apply elsewhere (no status or server fields)", _export,
        arg("names", nargs="*", metavar="NAME"),
        arg("--selector", "-l", help="label selector"),
        all_namespaces=True, kind="[KIND] (default: all)"),
    _on_cluster(
        "reconcile", "reconcile a resource now and wait for the outcome (exit 1 if not Ready)", _reconcile,
        arg("--with-source", action="store_true", help="fetch its GitRepository first"),
        arg("--timeout", type=explained(_duration), default=300.0, metavar="DURATION",
            help="how long to wait (a duration: 90s, 5m; or seconds; default 5m)"),
        arg("--reset", action="store_true",
            help="HelmRelease: count failures afresh, one more try after RetriesExceeded (helmop.dev/resetAt)"),
        arg("--force", action="store_true",
            help="HelmRelease: one forced upgrade, even when up to date (helmop.dev/forceAt)"),
        _REASON,
        kind="hr, gitrepo, csync, jk, or an app kind (such as webapps)", name_arg="NAME"),
    _on_cluster("suspend", "stop acting on a resource", _suspend, _REASON, kind="hr, gitrepo, csync or jk",
                name_arg="NAME"),
    _on_cluster("resume", "act on a suspended resource again", _suspend, _REASON, kind="hr, gitrepo, csync or jk",
                name_arg="NAME"),
    _on_cluster(
        "rollback", "roll a HelmRelease's release back with helm and pin it there: no upgrade, remediation or drift "
                    "correction toward the spec until its desired state changes (the fix landed) or `unpin`",
        control.rollback,
        arg("--to-revision", type=int, metavar="N", help="the helm revision to go back to (default: the one "
                                                         "deployed before the current one)"),
        _REASON, _CONTROL_TIMEOUT, kind=_CONTROLLED_KIND, name_arg="[NAME]"),
    _on_cluster(
        "pin", "hold a HelmRelease, ConfigSync or Kustomization where it is (its release revision, its applied source "
               "revision) until its desired state changes or `unpin`", control.pin,
        _REASON, _CONTROL_TIMEOUT, kind=_CONTROLLED_KIND, name_arg="[NAME]"),
    _on_cluster("unpin", "end a pin: the object reconciles toward its spec again", control.unpin,
                _REASON, _CONTROL_TIMEOUT, kind=_CONTROLLED_KIND, name_arg="[NAME]"),
    _on_cluster(
        "approve", "let the change that waits for an approval go (spec.approval.required): exactly that revision; "
                   "needs RBAC's verb approve on the object", control.approve,
        arg("--revision", metavar="DIGEST", help="the revision to approve (default: the one waiting, "
                                                 "status.pendingRevision)"),
        arg("--now", action="store_true", help="also outside the deployment windows, once (for that revision)"),
        _REASON, _CONTROL_TIMEOUT, kind=_CONTROLLED_KIND, name_arg="[NAME]"),
    _on_cluster(
        "diff", "what an upgrade would change, object by object: the live release against a HelmRelease's spec, or "
                "against local manifests (-f, validated as render --validate); exit 0 same, 1 different, 2 error",
        _diff,
        arg("--filename", "-f", action="append",
            help="manifests (file or directory, repeatable) holding HelmReleases or app resources, or a kustomize "
                 "overlay (built as a ConfigSync builds it); valuesFrom is read from the cluster"),
        arg("--apps", help="app kinds file, to diff app resources too"),
        arg("--output-format", choices=["unified", "json"], default="unified",
            help="unified diffs under a header per object (default), or JSON for CI"),
        *_OVERLAY,
        kind="[hr] (with a NAME: the HelmRelease's spec in the cluster)", name_arg="[NAME]"),
    _on_cluster(
        "check", "check a namespace's tenancy: the ServiceAccounts helmop acts as there may not grant themselves more "
                 "or reach outside it; exit 0 confined, 1 not", _check_tenancy,
        arg("what", choices=["tenancy"]),
        arg("--default-service-account", metavar="NAME", default="",
            help="the operator's --default-service-account (resources naming no ServiceAccount act as it)")),
    _on_cluster(
        "tree", "what a resource manages, down to each release's objects, with their health (on the remote cluster a "
                "spec.kubeConfig names, read with its kubeconfig Secret)", _tree,
        *_REMOTE,
        kind="hr, csync, gitrepo, jk, proj, or any kind", name_arg="NAME"),
    _on_cluster(
        "trace", "for any object: which release or ConfigSync manages it, from which source revision, chart version "
                 "and values digest", _trace,
        arg("--cluster", metavar="NAME", help="the object is on this remote cluster (as `get` names it), reached "
                                              "with the kubeconfig of a resource delivering there"),
        *_REMOTE,
        kind="any kind (deploy, cm, hr, ...)", name_arg="NAME"),
    _on_cluster(
        "why", "what an object waits for (dependsOn, its source, a suspension, an unreachable cluster), each with "
               "its state, reason and message, down to the root causes", _why,
        arg("--output", "-o", choices=why.OUTPUTS, default="table", help="table (drawn as a tree) or json"),
        kind="KIND/NAME (or KIND NAME): hr/app, csync/infra, any kind", name_arg="[NAME]"),
    _on_cluster("events", "Events of helmop's resources, or of one and everything it manages, in time order", _events,
                all_namespaces=True, kind="[KIND]", name_arg="[NAME]"),
    _on_cluster(
        "logs", "the operator's log lines (about one object, when named): from its pods, or from its --log-file",
        _logs,
        arg("--follow", "-f", action="store_true", help="keep printing new lines"),
        arg("--log-file", default_from=operator_logs.log_file_default, metavar="PATH",
            help=f"the file of an operator run with --log-file (default ${operator_logs.LOG_FILE_ENV}); without it, "
                 "the operator's pods"),
        arg("--tail", type=int, default=-1, metavar="N", help="the last N lines only"),
        arg("--operator-namespace", metavar="NAMESPACE", help="where the operator's pods run (default: any "
                                                              "namespace)"),
        kind="[KIND]", name_arg="[NAME]"),
    _on_cluster(
        "ui", "serve the web UI: every resource's state, history, tree and events, live; locally with the "
              "kubeconfig's rights (127.0.0.1), in a cluster with each viewer's token or single sign-on", _ui,
        arg("--port", type=int, default=9080, help="port to listen on (default %(default)s; 0: any free one)"),
        arg("--address", default="127.0.0.1", help="address to listen on (default %(default)s; another needs --auth "
                                                   "token or oidc)"),
        arg("--auth", choices=("kubeconfig", "token", "oidc"), default="kubeconfig",
            help="kubeconfig: the viewer is the kubeconfig's user; token: each viewer's bearer token (Authorization "
                 "header or the login page), checked with TokenReview and impersonated; oidc: each viewer signs in "
                 "with the --oidc-issuer, and the user and groups its ID token's claims map to are impersonated"),
        arg("--actions", action="store_true", help="allow reconcile, suspend, resume, rollback, pin, unpin and approve "
                                                   "from the pages (default: read-only)"),
        arg("--operator-namespace", metavar="NAMESPACE", help="where the operator's pods run, for their log lines "
                                                              "(default: any namespace)"),
        arg("--log-file", default_from=operator_logs.log_file_default, metavar="PATH",
            help="the log file of an operator run with --log-file, for its log lines (default "
                 f"${operator_logs.LOG_FILE_ENV}); without it, the operator's pods"),
        *uiauth.FLAGS),
)

_CREATE = "create a resource from flags (or print it with --export)"
_PROJECT = argtree.Verb(
    "project", "a Project (cluster-scoped)", (
        *target.flags(), arg("name"),
        arg("--member", action="append", metavar="KIND:NAME:ROLE",
            help="user:alice:edit, group:devs:view, serviceaccount:ns/name:admin (repeatable)"),
        arg("--quota", action="append", metavar="RESOURCE=QUANTITY", help="pods=20 (repeatable)"),
        arg("--sync", metavar="URL", help="the project's config repository"),
        arg("--branch", default="main", help="its branch (default main)"),
        arg("--path", default="", help="the folder of its manifests (default the root)"),
        arg("--jenkins", action="store_true", help="a Jenkins for the project"),
        arg("--isolate", action="store_true", help="a NetworkPolicy isolating the project namespace"),
        arg("--export", action="store_true", help="print the YAML instead of applying it")),
    aliases=("proj",), defaults={"create": "project"})

_RENDER = argtree.Verb(
    "render", "render the releases of a config-repository tree offline", (
        arg("path", help="a config-repository directory, or a kustomize overlay in one"),
        arg("--values-dir", action="append", help="more directories with ConfigMaps/Secrets"),
        arg("--output-dir", "-o", help="write <namespace>/<name>.yaml files here (default: stdout)"),
        arg("--apps", help="app kinds file, to render app resources too"),
        arg("--validate", action="store_true", help="first check every helmop resource in the tree against the CRD "
                                                    "schemas (offline); errors name file:line"),
        *_OVERLAY),
    run=_render,
    description="Find every HelmRelease (and Jenkins / app kind) under PATH, merge values (ConfigMaps/Secrets from "
                "the tree), render with helm template. A kustomize overlay (a folder with a kustomization.yaml) is "
                "built as a ConfigSync builds it, and the objects it would apply are printed.")

_CONVERT = argtree.Verb(
    "convert", "convert Flux's manifests to helmop's kinds, or back (offline)", (
        arg("-f", "--filename", action="append", required=True, metavar="FILE|DIR|-",
            help="a manifest file, a directory of them, or - for stdin (repeatable)"),
        arg("--to", choices=("helmop", "flux"), default="helmop", help="the group to convert to (default "
                                                                       "%(default)s)"),
        arg("--output-dir", "-o", help="write each converted file here, at its path under -f (default: stdout)")),
    run=_convert,
    description="Rewrite Flux's HelmRelease, GitRepository, HelmRepository, OCIRepository and Kustomization as "
                "helmop's kinds (a Kustomization becomes a ConfigSync), or back with --to flux; every other document "
                "is kept as it is (comments inside a converted document are not). A field the other side does not "
                "have is named (file:line) and the exit status is 1.")

_COMPLETION = argtree.Verb(
    "completion", "print the shell completion script (bash, zsh or fish)", (arg("shell", choices=completion.SHELLS),),
    run=_completion,
    description="Completes verbs, flags, kinds, and names and namespaces from the cluster. bash: source <(helmop "
                "completion bash); zsh: the same in ~/.zshrc; fish: helmop completion fish | source")


def _create_verb(verbs_: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``create KIND``: a sub-verb for each kind :mod:`.create` writes, and ``project`` (:mod:`.projects`)."""
    made = argtree.add(verbs_, argtree.Verb("create", _CREATE, run=_create_or_export, description=_CREATE))
    kinds = made.add_subparsers(dest="create_kind", required=True, metavar="KIND")
    create.add_verbs(kinds)
    argtree.add(kinds, _PROJECT)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="helmop", description="Helm releases from Kubernetes resources.",
                                  epilog="Exit codes: 0 ok; 1 a failed outcome or differences; 2 a usage error or "
                                         "an error.")
    top.add_argument("--version", action="version", version=f"helmop {version('helmop')}")
    verbs_ = top.add_subparsers(dest="verb", required=True, metavar="VERB")
    operate.sandbox_verb(verbs_.add_parser("sandbox", help="run the embedded Kubernetes API sandbox in the "
                                                           "foreground"))
    _run_verb(verbs_.add_parser("run", help="run the operator against the current kubeconfig (or an embedded "
                                             "sandbox)"))
    for verb in _CLUSTER_VERBS:
        argtree.add(verbs_, verb)
    _create_verb(verbs_)
    for verb in (_RENDER, _CONVERT):
        argtree.add(verbs_, verb)
    artifacts.add_verbs(verbs_)
    for verb in (preview.VERB, trying.VERB, mcp.VERB, _COMPLETION):
        argtree.add(verbs_, verb)
    return top


def main(argv: list[str] | None = None) -> int:
    top = parser()
    completion.complete(top)
    args = top.parse_args(images.normalized(sys.argv[1:] if argv is None else argv))
    try:
        result: int = args.run(args)
    except FileNotFoundError as exc:  # whichever verb, wherever it starts helm, kubectl or git
        said = missing_tool(args.verb, exc)
        if said is None:
            raise
        print(said, file=sys.stderr)
        return ERROR
    return result


if __name__ == "__main__":
    sys.exit(main())
