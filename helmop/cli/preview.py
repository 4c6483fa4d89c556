"""``helmop preview``: what a change to a config repository (a pull request) would change, offline. Both
revisions are read from git into private folders (never the working tree), rendered as the operator would
(helmop.cli.rendering), and compared object by object (helmop.cli.changes); every Secret value is masked."""

from __future__ import annotations

import argparse
import asyncio
import json
import posixpath
import re
import secrets
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from helmop.sources.repositories import Repositories

from . import builds
from .errors import Failed

if TYPE_CHECKING:
    from .changes import Changes

OK, FAILED, ERROR = 0, 1, 2


def add_verb(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    what = "what a change to a config repository would change, object by object (offline, as a pull request review)"
    sub = verbs.add_parser("preview", help=what, description=what + ": both revisions built and rendered as the "
                           "operator would, Secrets masked; exit 0 when both render (whatever the diff), 1 when one "
                           "does not (naming the file and why), 2 on an error (an unknown revision)")
    sub.add_argument("--base", required=True, metavar="REF", help="the revision merged into (main, a commit)")
    sub.add_argument("--head", required=True, metavar="REF", help="the proposed revision (the pull request's)")
    sub.add_argument("--path", action="append", metavar="DIR", help="a folder to build as a ConfigSync would "
                     "(repeatable; default: the folders the tree's ConfigSyncs and Kustomizations name)")
    sub.add_argument("--repo", default=".", metavar="PATH", help="the git repository (default: the current one)")
    sub.add_argument("--output", "-o", choices=("unified", "markdown", "json"), default="unified",
                     help="unified diffs (default), markdown (a pull-request comment), or json")
    sub.add_argument("--max-lines", type=int, default=500, metavar="N", help="lines of one object's diff shown")
    sub.add_argument("--max-objects", type=int, default=200, metavar="N", help="objects shown")
    sub.add_argument("--chart-mirror", action="append", metavar="FROM=TO", default=[],
                     help="fetch charts whose URL starts with FROM from TO instead (repeatable)")
    sub.add_argument("--substitute", action="append", metavar="KEY=VALUE", help="a postBuild variable (repeatable)")
    sub.add_argument("--substitute-from-file", action="append", metavar="FILE", help="KEY=VALUE lines (repeatable)")
    sub.add_argument("--decrypt", action="append", metavar="KEYFILE",
                     help="a SOPS age identity or armored OpenPGP key (repeatable); what it decrypts is masked")
    sub.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    # helm's client (pyhelm3, pydantic), loaded for this verb only
    from helmop.helm.engine import Engine, default_executable

    from .changes import compare
    from .rendering import Inputs, Unbuildable, both, checkout

    try:
        with tempfile.TemporaryDirectory(prefix="helmop-preview-") as work:
            given = Inputs(builds.variables(args.substitute or [], args.substitute_from_file or []),
                           builds.keys_of(args.decrypt or []), Engine.start(default_executable()),
                           Repositories(Path(work) / "charts", mirrors=_mirrors(args.chart_mirror)),
                           Path(work), secrets.token_bytes(32))
            base = checkout(Path(args.repo), args.base, Path(work) / "base")
            head = checkout(Path(args.repo), args.head, Path(work) / "head")
            rendered = asyncio.run(both(base, head, [posixpath.normpath(p).strip("/") for p in args.path or []], given))
    except Unbuildable as exc:
        print(f"✗ {exc}", file=sys.stderr)
        return FAILED
    except Failed as exc:
        print(f"✗ {exc}", file=sys.stderr)
        return ERROR
    found = compare(*rendered, max_lines=args.max_lines, max_objects=args.max_objects)
    text = {"unified": unified, "markdown": markdown, "json": as_json}[args.output](found, args.base, args.head)
    print(text, end="")
    return OK


def _mirrors(given: list[str]) -> tuple[tuple[str, str], ...]:
    pairs = [tuple(m.split("=", 1)) for m in given]
    if any(len(m) != 2 or not all(m) for m in pairs):
        raise Failed("--chart-mirror takes FROM=TO (two URL prefixes)")
    return tuple((m[0], m[1]) for m in pairs)


def _summary(found: Changes) -> list[str]:
    counts = found.counts
    lines = [f"{counts['added']} added, {counts['changed']} changed, {counts['removed']} removed"]
    lines += [f"{release.group}: {release.change}" for release in found.releases]
    return lines + ([f"… {found.left_out} more objects"] if found.left_out else [])


def unified(found: Changes, base: str, head: str) -> str:
    out = [f"# {c.group}: {c.object} ({c.change})\n{c.diff}" for c in found.objects]
    return "".join(out) + "".join(f"# {line}\n" for line in [f"{base}..{head}", *_summary(found)])


def _fence(text: str) -> str:
    """A code fence longer than any run of backticks in ``text``."""
    return "`" * max([3, *(len(run) + 1 for run in re.findall(r"`+", text))])


def markdown(found: Changes, base: str, head: str) -> str:
    counts = found.counts
    out = [f"### helmop preview: `{base}` → `{head}`\n\n| added | changed | removed |\n|---|---|---|\n"
           f"| {counts['added']} | {counts['changed']} | {counts['removed']} |\n"]
    if found.releases:
        out.append("\n**Releases whose chart or values change**\n\n" + "".join(
            f"- `{release.group}`: {release.change}\n" for release in found.releases))
    group = ""
    for change in found.objects:
        if change.group != group:
            group = change.group
            out.append(f"\n#### {group}\n")
        fence = _fence(change.diff)
        out.append(f"\n<details><summary>{change.change}: <code>{change.object}</code></summary>\n\n"
                   f"{fence}diff\n{change.diff}{fence}\n</details>\n")
    if found.left_out:
        out.append(f"\n… {found.left_out} more objects\n")
    return "".join(out)


def as_json(found: Changes, base: str, head: str) -> str:
    return json.dumps({"base": base, "head": head, **found.json()}, indent=2) + "\n"
