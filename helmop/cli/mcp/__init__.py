"""``helmop mcp``: a Model Context Protocol server over stdio, for an assistant to read (and, with ``--read-write``,
act on) helmop's and Flux's objects as the person running it: every call with the kubeconfig's identity and
rights, never the operator's. Read-only by default; no Secret's value in any answer; every answer bounded.

The SDK (``mcp``, with its HTTP stack) is an extra (``helmop[mcp]``): the operator's image does not carry it, and
this verb says how to install it when it is missing."""

from __future__ import annotations

import argparse
import asyncio
import sys

from .. import argtree, operator_logs, target
from ..argtree import arg
from ..errors import Failed

INSTALL = "helmop mcp needs the MCP SDK: pip install 'helmop[mcp]' (or: pip install 'mcp>=2.3')"
_WHAT = "serve the Model Context Protocol over stdio: tools to list, get, why, events and logs (read-only unless " \
        "--read-write), as the kubeconfig's user"


def _serve(args: argparse.Namespace) -> int:
    try:
        from . import server
        from .reads import Caller
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] != "mcp":
            raise
        print(f"✗ {INSTALL}", file=sys.stderr)
        return 2
    try:
        where = target.connect(args)
    except Failed as exc:
        print(f"✗ {exc}", file=sys.stderr)
        return 2
    caller = Caller(where.kube, where.namespace, args.log_file, args.operator_namespace)

    async def main() -> None:
        try:
            await server.build(caller, read_write=args.read_write).run_stdio_async()
        finally:
            await caller.cel.close()
            await where.kube.close()

    asyncio.run(main())
    return 0


VERB = argtree.Verb(
    "mcp", _WHAT, (
        *target.flags(),
        arg("--read-write", action="store_true",
            help="also offer the tools that act: reconcile, suspend, resume, rollback, pin, unpin and approve (with "
                 "the kubeconfig's rights; default: read-only)"),
        arg("--log-file", default_from=operator_logs.log_file_default, metavar="PATH",
            help=f"the log file of an operator run with --log-file, for its log lines (default "
                 f"${operator_logs.LOG_FILE_ENV}); without it, the operator's pods"),
        arg("--operator-namespace", metavar="NAMESPACE", help="where the operator's pods run, for their log lines "
                                                              "(default: any namespace)")),
    run=_serve,
    description=f"{_WHAT}. Configure an MCP client to run `helmop mcp` (with --kubeconfig/--context/-n as kubectl "
                "takes them); each call reads and acts with that identity. Needs the extra helmop[mcp].")
