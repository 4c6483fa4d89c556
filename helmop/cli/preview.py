"""``helmop preview``: what a change to a config repository (a pull request) would change. Offline, both revisions
are read from git into private folders (never the working tree), rendered as the operator would
(:mod:`helmop.helm.previews`), and compared object by object (:mod:`helmop.api.changes`); with ``--cluster`` the
head is compared with what the cluster holds instead (:mod:`.live`). Every Secret value is masked."""

from __future__ import annotations

import argparse
import asyncio
import posixpath
import secrets
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from helmop.api.settings import default_helm
from helmop.infra import confine
from helmop.infra.kube import KubeError
from helmop.sources.build import Builder
from helmop.sources.kustomize import Kustomize
from helmop.sources.repositories import Repositories

from . import builds, revisions, target
from .argtree import Verb, arg
from .errors import Failed, program

if TYPE_CHECKING:
    from helmop.api.rendered import Rendering
    from helmop.helm.previews import Builds, Inputs, Tree

OK, FAILED, ERROR = 0, 1, 2


class Unrendered(Failed):
    """A revision that does not build or render (exit code 1)."""


def run(args: argparse.Namespace) -> int:
    from helmop.api.changes import as_json, compare, markdown, unified

    if bool(args.base) == bool(args.cluster):
        print("✗ give either --base REF (another revision) or --cluster (what the cluster holds)", file=sys.stderr)
        return ERROR
    try:
        base, head = asyncio.run(_sides(args))
    except Failed as exc:
        print(f"✗ {exc}", file=sys.stderr)
        return FAILED if isinstance(exc, Unrendered) else ERROR
    except KubeError as exc:
        print(f"✗ the Kubernetes API said: {exc.message}", file=sys.stderr)
        return ERROR
    found = compare(base, head, max_lines=args.max_lines, max_objects=args.max_objects)
    base_ref = "the cluster" if args.cluster else args.base
    text = {"unified": unified, "markdown": markdown, "json": as_json}[args.output](found, base_ref, args.head)
    print(text, end="")
    for line in (line for u in found.unrendered for line in u.lines(base_ref, args.head)):
        print(f"✗ {line}", file=sys.stderr)
    return FAILED if found.unrendered else OK


_WHAT = "what a change to a config repository would change, object by object (as a pull request review)"
VERB = Verb(
    "preview", _WHAT, (
        arg("--base", metavar="REF", help="the revision merged into (main, a commit); or --cluster"),
        arg("--head", required=True, metavar="REF", help="the proposed revision (the pull request's)"),
        arg("--cluster", action="store_true", help="compare the head with what the cluster the kubeconfig names "
            "holds, instead of a base revision (a server-side dry run where the cluster takes one)"),
        arg("--path", action="append", metavar="DIR", help="a folder to build as a ConfigSync would (repeatable; "
            "default: the folders the tree's ConfigSyncs and Kustomizations name)"),
        arg("--repo", default=".", metavar="PATH", help="the git repository (default: the current one)"),
        arg("--output", "-o", choices=("unified", "markdown", "json"), default="unified",
            help="unified diffs (default), markdown (a pull-request comment), or json"),
        arg("--max-lines", type=int, default=500, metavar="N", help="lines of one object's diff shown"),
        arg("--max-objects", type=int, default=200, metavar="N", help="objects shown"),
        arg("--chart-mirror", action="append", metavar="FROM=TO", default=[],
            help="fetch charts whose URL starts with FROM from TO instead (repeatable)"),
        arg("--substitute", action="append", metavar="KEY=VALUE", help="a postBuild variable (repeatable)"),
        arg("--substitute-from-file", action="append", metavar="FILE", help="KEY=VALUE lines (repeatable)"),
        arg("--decrypt", action="append", metavar="KEYFILE",
            help="a SOPS age identity or armored OpenPGP key (repeatable); what it decrypts is masked"),
        *target.flags()),
    run=run,
    description=_WHAT + ": the revisions built and rendered as the operator would, Secrets masked, compared with "
                "another revision (--base, offline) or with what the cluster holds (--cluster); exit 0 when they "
                "render (whatever the diff), 1 when one does not (naming the file and why), 2 on an error (an unknown "
                "revision); a release whose chart cannot be fetched or rendered is named with why, the rest shown, "
                "exit 1")


async def _sides(args: argparse.Namespace) -> tuple[Rendering, Rendering]:
    """(base, head): two revisions rendered, or what the cluster holds and the head rendered."""
    # helm's client (pyhelm3, pydantic), loaded for this verb only
    from helmop.helm.engine import Engine
    from helmop.helm.previews import Inputs, Unbuildable, both, paths_of

    given_paths = [posixpath.normpath(p).strip("/") for p in args.path or []]
    with tempfile.TemporaryDirectory(prefix="helmop-preview-") as folder:
        work = Path(folder)
        given = Inputs(builds.variables(args.substitute or [], args.substitute_from_file or []),
                       builds.keys_of(args.decrypt or []), Engine.start(default_helm()),
                       Repositories(work / "charts", mirrors=_mirrors(args.chart_mirror)), _builder(work),
                       secrets.token_bytes(32))
        head = _checkout(Path(args.repo), args.head, work / "head")
        base = None if args.cluster else _checkout(Path(args.repo), args.base, work / "base")
        paths = paths_of(given_paths, head, *([base] if base else []))
        if not paths:
            raise Failed(f"no ConfigSync or Kustomization in {'the head' if base is None else 'either revision'}: "
                         "name the folders with --path")
        try:
            return await (both(base, head, paths, given) if base else _against_cluster(args, head, paths, given))
        except Unbuildable as exc:
            raise Unrendered(str(exc)) from None


async def _against_cluster(args: argparse.Namespace, head: Tree, paths: Mapping[str, Builds],
                           given: Inputs) -> tuple[Rendering, Rendering]:
    from helmop.helm.previews import render

    from .live import sides

    rendered = await render(head, paths, given)
    where = target.connect(args)
    try:
        return await sides(where.kube, rendered, where.namespace, given.salt)
    finally:
        await where.kube.close()


def _builder(work: Path) -> Builder:
    # confined where the kernel can (a pull request's repository is anyone's); elsewhere as kustomize itself would
    return Builder(Kustomize(program("kubectl"), work / "kustomize", confined=confine.landlock_abi() > 0))


def _checkout(repo: Path, ref: str, into: Path) -> Tree:
    """``ref``'s files under ``into``, read from git at once: a bad revision stops before anything renders."""
    from helmop.helm.previews import Tree

    into.mkdir()
    revisions.read_revision(repo, ref, into)
    return Tree(ref, into, builds.read_repository(into))


def _mirrors(given: list[str]) -> tuple[tuple[str, str], ...]:
    pairs = [tuple(m.split("=", 1)) for m in given]
    if any(len(m) != 2 or not all(m) for m in pairs):
        raise Failed("--chart-mirror takes FROM=TO (two URL prefixes)")
    return tuple((m[0], m[1]) for m in pairs)
