"""``helmop mcp``: a Model Context Protocol server, for an assistant to read (and, with ``--read-write``, act on)
helmop's and Flux's objects as the person asking: over stdio (or ``--http`` on loopback) every call with the
kubeconfig's identity and rights, over ``--http --auth token`` with each request's bearer token's (impersonated);
never the operator's. Read-only by default; no Secret's value in any answer; every answer bounded.

The SDK (``mcp``, with its HTTP stack) is an extra (``helmop[mcp]``): the operator's image does not carry it, and
this verb says how to install it when it is missing."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .. import argtree, operator_logs, target
from ..argtree import arg
from ..errors import Failed

if TYPE_CHECKING:
    from .reads import Caller

INSTALL = "helmop mcp needs the MCP SDK: pip install 'helmop[mcp]' (or: pip install 'mcp>=2.3')"
_WHAT = "serve the Model Context Protocol over stdio or streamable HTTP: tools to list, get, why, events, logs, " \
        "diff and search the docs (read-only unless --read-write), as the caller"


def _serve(args: argparse.Namespace) -> int:
    try:
        from . import server  # noqa: F401 (the SDK, there or not)
        from .reads import Caller
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] != "mcp":
            raise
        print(f"✗ {INSTALL}", file=sys.stderr)
        return 2
    try:
        if args.http and args.auth == "kubeconfig" and args.address not in ("127.0.0.1", "localhost"):
            raise Failed("--auth kubeconfig serves with the kubeconfig's rights: it listens on 127.0.0.1 only (give "
                         "--auth token to serve others, each with their own rights)")
        where = target.connect(args)
    except Failed as exc:
        print(f"✗ {exc}", file=sys.stderr)
        return 2
    caller = Caller(where.kube, where.namespace, args.log_file, args.operator_namespace)
    asyncio.run(_run(args, caller))
    return 0


async def _run(args: argparse.Namespace, caller: Caller) -> None:
    from helmop.ui.access import TokenAccess

    from . import documentation, http, server
    from .diffs import Diffs

    token_auth = args.http and args.auth == "token"
    if args.context:  # helm (the diff tool's) reads the kubeconfig itself: the same context as the client's
        os.environ["HELM_KUBECONTEXT"] = args.context
    # with a token, each request has its own caller, whom helm (a process with the server's kubeconfig) cannot be
    diffs = None if token_auth else Diffs(Path(args.kubeconfig) if args.kubeconfig else None)
    built = server.build(http.caller_of(caller, token_auth), read_write=args.read_write, diffs=diffs,
                         docs=documentation.installed())
    access = TokenAccess(caller.kube) if token_auth else None
    try:
        if args.http:
            await http.serve(built, address=args.address, port=args.port, access=access, base=caller,
                             announce=lambda url: print(f"helmop mcp: {url}", flush=True))
        else:
            await built.run_stdio_async()
    finally:
        if diffs is not None:
            diffs.close()
        await caller.cel.close()
        await caller.kube.close()


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
                                                              "(default: any namespace)"),
        arg("--http", action="store_true", help="serve streamable HTTP (at /mcp) instead of stdio"),
        arg("--address", default="127.0.0.1", help="with --http: the address to listen on (default %(default)s; "
                                                   "another needs --auth token)"),
        arg("--port", type=int, default=9081, help="with --http: the port (default %(default)s; 0: any free one)"),
        arg("--auth", choices=("kubeconfig", "token"), default="kubeconfig",
            help="with --http: kubeconfig, every request is the kubeconfig's user's (loopback only); token, each "
                 "request's bearer token, checked with TokenReview and impersonated")),
    run=_serve,
    description=f"{_WHAT}. Configure an MCP client to run `helmop mcp` (with --kubeconfig/--context/-n as kubectl "
                "takes them), or to connect to `helmop mcp --http`; each call reads and acts with the kubeconfig's "
                "identity, or with --auth token the caller's bearer token's. Needs the extra helmop[mcp].")
