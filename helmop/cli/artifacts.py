"""``helmop push artifact``, ``pull artifact`` and ``tag artifact``: a folder of config as an OCI artifact, with
the flags and format of Flux's CLI (``flux push artifact``), for an OCIRepository (helmop's or Flux's) to serve to
its ConfigSyncs or Kustomizations."""

from __future__ import annotations

import argparse
import asyncio
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Coroutine
from pathlib import Path

from helmop.sources import oci, tarballs
from helmop.sources.errors import SourceError
from helmop.sources.git import write_tree
from helmop.sources.ignore import VCS, Ignore
from helmop.sources.repositories import Credentials, Repositories

from .builds import read_repository
from .errors import Failed

# `flux push artifact`'s default --ignore-paths: version control and binary files
DEFAULT_IGNORED = (*VCS, "*.jpg", "*.jpeg", "*.gif", "*.png", "*.wmv", "*.flv", "*.tar.gz", "*.zip")
OK, ERROR = 0, 2
Work = Callable[[argparse.Namespace, Repositories], Coroutine[None, None, int]]


def add_verbs(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    push = _verb(verbs, "push", "push a folder as an OCI artifact (as flux push artifact)")
    push.add_argument("--path", required=True, help="the folder (or one file) to push")
    push.add_argument("--source", required=True, help="where it comes from (org.opencontainers.image.source)")
    push.add_argument("--revision", required=True, help="its revision, such as main@sha1:<commit> "
                                                        "(org.opencontainers.image.revision)")
    push.add_argument("--annotations", "-a", action="append", default=[], metavar="KEY=VALUE",
                      help="another annotation of the manifest (repeatable)")
    push.add_argument("--ignore-paths", action="append", metavar="PATTERN",
                      help="gitignore patterns left out (repeatable; replaces the default: version control files "
                           "and images and archives)")
    push.add_argument("--reproducible", action="store_true",
                      help="created time 1970-01-01: the same files, source and revision give the same digest")
    push.set_defaults(run=_run(_push))
    pull = _verb(verbs, "pull", "pull an OCI artifact's files into a folder (as flux pull artifact)")
    pull.add_argument("--output", "-o", required=True, help="an existing folder to write the files into")
    pull.set_defaults(run=_run(_pull))
    tag = _verb(verbs, "tag", "tag an OCI artifact again, without moving any blob (as flux tag artifact)")
    tag.add_argument("--tag", action="append", required=True, help="the new tag (repeatable)")
    tag.set_defaults(run=_run(_tag))


def _verb(verbs: argparse._SubParsersAction, name: str, what: str) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    sub = verbs.add_parser(name, help=what, description=what)
    kinds = sub.add_subparsers(dest="artifact_kind", required=True, metavar="KIND")
    verb: argparse.ArgumentParser = kinds.add_parser("artifact", help=what, description=what)
    verb.add_argument("url", metavar="oci://HOST/REPOSITORY[:TAG|@DIGEST]")
    verb.add_argument("--creds", default="", metavar="USER[:PASSWORD]", help="the registry's credentials "
                                                                              "(default: none)")
    verb.add_argument("--insecure-registry", action="store_true", help="plain HTTP to the registry")
    return verb


def _run(work: Work) -> Callable[[argparse.Namespace], int]:
    def verb(args: argparse.Namespace) -> int:
        try:
            with tempfile.TemporaryDirectory(prefix="helmop-oci-") as cache:
                return asyncio.run(work(args, Repositories(Path(cache))))
        except (SourceError, Failed) as exc:
            print(f"✗ {exc}", file=sys.stderr)
            return ERROR

    return verb


def _creds(text: str) -> Credentials:
    user, _, password = text.partition(":")
    return Credentials(username=user, password=password)


def _tree(path: Path, ignored: tuple[str, ...]) -> tarballs.Tree:
    """The files under ``path`` (or the one file it is), as the operator would read a repository; executable
    bits kept."""
    if path.is_file():
        files = {path.name: path.read_bytes()}
        return tarballs.Tree(files, frozenset({path.name} if os.access(path, os.X_OK) else ()))
    if not path.is_dir():
        raise Failed(f"{path} is neither a folder nor a file")
    root = path.resolve()
    rules = Ignore.exactly(ignored)
    files = {rel: data for rel, data in read_repository(root).items() if not rules.excludes(rel)}
    executable = frozenset(rel for rel in files if (root / rel).stat().st_mode & stat.S_IXUSR)
    return tarballs.Tree(files, executable)


async def _push(args: argparse.Namespace, repos: Repositories) -> int:
    target = oci.Reference.parse(args.url)
    pairs = [a.split("=", 1) for a in args.annotations]
    if any(len(p) != 2 or not p[0] for p in pairs):
        raise Failed("--annotations takes KEY=VALUE")
    tree = _tree(Path(args.path), tuple(args.ignore_paths) if args.ignore_paths else DEFAULT_IGNORED)
    manifest, config, layer = oci.build(tree, args.source, args.revision, dict(pairs), reproducible=args.reproducible)
    digest = await oci.push(repos, target, manifest, [config, layer], _creds(args.creds), args.insecure_registry)
    print(f"✔ pushed {len(tree.files)} files to {target}")
    print(f"{target.url}@{digest}")
    return OK


async def _pull(args: argparse.Namespace, repos: Repositories) -> int:
    output = Path(args.output)
    if not output.is_dir():
        raise Failed(f"{output} is not an existing folder")
    pulled = await oci.pull(repos, oci.Reference.parse(args.url), _creds(args.creds), args.insecure_registry)
    with tempfile.TemporaryDirectory(dir=output) as staging:  # written whole, or not at all
        write_tree(pulled.tree.files, Path(staging))
        for rel in pulled.tree.files:
            target = output / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(Path(staging) / rel, target)
            if rel in pulled.tree.executable:
                target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP)
    print(f"✔ source {pulled.annotations.get(oci.SOURCE, '')}")
    print(f"✔ revision {pulled.annotations.get(oci.REVISION, '')}")
    print(f"✔ pulled {len(pulled.tree.files)} files from {oci.Reference.parse(args.url).url}@{pulled.digest}")
    return OK


async def _tag(args: argparse.Namespace, repos: Repositories) -> int:
    source = oci.Reference.parse(args.url)
    digest = await oci.tag(repos, source, args.tag, _creds(args.creds), args.insecure_registry)
    for name in args.tag:
        print(f"✔ tagged {source.url}:{name} ({digest})")
    return OK

