"""Shell completion (bash, zsh, fish) with argcomplete: verbs and flags come from the argparse parser
itself, so they cannot drift from it; kinds, names and namespaces are read from the cluster the
command line points at (``--kubeconfig``, ``--context``, ``-n``).

argcomplete rather than a move to click/typer: the CLI is argparse (as kopf's and kubectl-style
tools in Python are), argcomplete completes an argparse parser as it is, is maintained, and costs one
small pure-Python dependency; a framework move would rewrite every verb for the same result.
``helmop completion bash|zsh|fish`` prints the script to source (it calls helmop back for candidates).
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from typing import Any

import argcomplete
from argcomplete.shell_integration import shellcode

from helmop.infra.kube import Kube, KubeError

from . import target
from .errors import Failed
from .verbs import ALIASES, resolve_kind

SHELLS = ("bash", "zsh", "fish")
KINDS = sorted({k.short_names[0] for k in ALIASES.values() if k.short_names}
               | {k.kind.lower() for k in ALIASES.values()})


def _ask(parsed: argparse.Namespace, work: Callable[[Kube, str], Any]) -> list[str]:
    """Run ``work(kube, namespace)`` against the cluster the command line names; nothing on any failure
    (a completion never prints an error into the user's line)."""
    async def main() -> list[str]:
        where = target.connect(parsed)
        try:
            found: list[str] = await asyncio.wait_for(work(where.kube, where.namespace), 5)
            return found
        finally:
            await where.kube.close()

    try:
        return asyncio.run(main())
    except (Failed, KubeError, TimeoutError, OSError):
        return []


def kinds(**_: Any) -> list[str]:
    return KINDS


def names(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    """Names of the objects of the kind already on the line, in its namespace."""
    text = getattr(parsed_args, "kind", None)
    if not text:
        return []

    async def listed(kube: Kube, namespace: str) -> list[str]:
        kind = await resolve_kind(kube, str(text).split(",")[0])
        return [str(o["metadata"]["name"]) for o in await kube.list(kind.path(namespace))]

    return [name for name in _ask(parsed_args, listed) if name.startswith(prefix)]


def namespaces(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    async def listed(kube: Kube, _namespace: str) -> list[str]:
        return [str(o["metadata"]["name"]) for o in await kube.list("/api/v1/namespaces")]

    return [name for name in _ask(parsed_args, listed) if name.startswith(prefix)]


def attach(parser: argparse.ArgumentParser) -> None:
    """Give every ``kind``, ``name`` and ``--namespace`` argument of the parser's verbs its completer."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                attach(sub)
        elif action.dest == "kind" and not action.choices:
            action.completer = kinds  # type: ignore[attr-defined]
        elif action.dest in ("name", "names"):
            action.completer = names  # type: ignore[attr-defined]
        elif action.dest == "namespace":
            action.completer = namespaces  # type: ignore[attr-defined]


def complete(parser: argparse.ArgumentParser) -> None:
    """Answer the shell's completion request, when this run is one (argcomplete exits then)."""
    attach(parser)
    argcomplete.autocomplete(parser)


def script(shell: str) -> str:
    return shellcode(["helmop"], shell=shell)
