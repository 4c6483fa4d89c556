"""The MCP server of ``helmop mcp`` (the official ``mcp`` SDK, over stdio or streamable HTTP): its tools, its
prompts, who each request's caller is, and how an error reaches the client (the API server's words, or helmop's,
as the CLI says them; never a traceback)."""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, ParamSpec

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from helmop.api.errors import SpecError
from helmop.api.kinds import PREVIEW
from helmop.api.requests import Asked
from helmop.infra.kube import KubeError

from ..errors import Failed
from . import documentation, reads, writes
from .diffs import Diffs
from .reads import Caller

P = ParamSpec("P")
Answer = dict[str, Any]
CALLER: ContextVar[Caller] = ContextVar("helmop_mcp_caller")  # who asks, for the request being answered

INSTRUCTIONS = (
    "helmop delivers Helm releases and manifests from Kubernetes resources (helmop's kinds: hr, gitrepo, csync, "
    "...; and Flux's, named with their group: helmreleases.helm.toolkit.fluxcd.io). Every call reads and acts "
    "with the caller's own Kubernetes identity and rights. Start with list_objects (health=failed for what is "
    "failing), then get_object, why and events for one object.")
READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)

Kind = Annotated[str, Field(description="hr, gitrepo, csync, jk, proj, an app kind, or a Flux kind with its group "
                                        "(kustomizations.kustomize.toolkit.fluxcd.io)")]
Name = Annotated[str, Field(description="the object's name")]
Namespace = Annotated[str, Field(description="its namespace (default: the kubeconfig context's)")]
Reason = Annotated[str, Field(description="why: recorded with who asked (status.lastHandledRequest, an Event)")]
Wait = Annotated[float, Field(description="seconds to wait for the operator's outcome (at most 300)")]


def answering(tool: Callable[P, Awaitable[Answer]]) -> Callable[P, Awaitable[Answer]]:
    """The tool, its expected failures (what the CLI would print) said to the client as a tool error."""
    @functools.wraps(tool)
    async def answer(*args: P.args, **kwargs: P.kwargs) -> Answer:
        try:
            return await tool(*args, **kwargs)
        except (Failed, SpecError) as exc:
            raise ToolError(str(exc)) from None
        except KubeError as exc:
            raise ToolError(f"the Kubernetes API said: {exc.message}") from None
    return answer


def build(who: Callable[[Any], Caller], *, read_write: bool, diffs: Diffs | None = None,
          docs: Path | None = None) -> MCPServer:
    """The server; ``who`` names the caller of each request from the HTTP request that carried it (None over
    stdio). ``diffs``: the diff tool (left out where helm could not act as the caller); ``docs``: the folder the
    docs tool searches (left out where the docs are not installed)."""
    async def acting(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        # the caller of this request, for the tool or prompt it runs (in this task: a context variable reaches it)
        token = CALLER.set(who(ctx.request))
        try:
            return await call_next(ctx)
        finally:
            CALLER.reset(token)

    server = MCPServer("helmop", instructions=INSTRUCTIONS, log_level="WARNING", middleware=[acting])
    _read_tools(server)
    _more_tools(server, diffs, docs)
    if read_write:  # read-only by default: without --read-write, no tool that acts is even offered
        _write_tools(server)
    _prompts(server)
    return server


def current() -> Caller:
    return CALLER.get()


def _read_tools(server: MCPServer) -> None:
    @server.tool(annotations=READ)
    @answering
    async def list_objects(kind: Annotated[str, Field(description="a kind, several (hr,csync), or all")] = "all",
                           namespace: Namespace = "", all_namespaces: bool = False,
                           selector: Annotated[str, Field(description="label selector (app=web,tier!=db)")] = "",
                           health: Annotated[str, Field(description="only these: failed, progressing, ready or "
                                                                    "suspended")] = "",
                           limit: int = reads.MAX_ITEMS) -> Answer:
        """List helmop's and Flux's objects with their health, Ready condition, revision, source and cluster."""
        return await reads.list_objects(current(), kind, namespace, all_namespaces, selector, health, limit)

    @server.tool(annotations=READ)
    @answering
    async def get_object(kind: Kind, name: Name, namespace: Namespace = "") -> Answer:
        """One object: its conditions, status (history, inventory, pin, approvals, the last request and who made
        it), spec, and what it manages with each one's health."""
        return await reads.get_object(current(), kind, namespace, name)

    @server.tool(annotations=READ)
    @answering
    async def events(kind: Kind, name: Name, namespace: Namespace = "", limit: int = 50) -> Answer:
        """The Events of an object and of everything it manages, oldest first."""
        return await reads.events(current(), kind, namespace, name, limit)

    @server.tool(annotations=READ)
    @answering
    async def why(kind: Kind, name: Name, namespace: Namespace = "") -> Answer:
        """What an object waits for (dependsOn, its source, a suspension, an unreachable cluster), each with its
        state, reason and message, down to the root causes."""
        return await reads.why_not_ready(current(), kind, namespace, name)

    @server.tool(annotations=READ)
    @answering
    async def logs(kind: Kind, name: Name, namespace: Namespace = "", tail: int = 50) -> Answer:
        """The operator's last log lines about one object."""
        return await reads.logs(current(), kind, namespace, name, tail)


def _more_tools(server: MCPServer, diffs: Diffs | None, docs: Path | None) -> None:
    if diffs is not None:
        @server.tool(annotations=READ)
        @answering
        async def diff(name: Name, namespace: Namespace = "") -> Answer:
            """What a HelmRelease's spec would change in its release now, object by object (a server-side dry
            run, as `helmop diff hr NAME`; nothing is applied)."""
            return await diffs.diff(current(), namespace, name)

    if docs is not None:
        @server.tool(annotations=READ)
        @answering
        async def search_docs(words: Annotated[str, Field(description="what to look for (all words count)")],
                              limit: Annotated[int, Field(description="pages at most")] = 5) -> Answer:
            """Search helmop's documentation (guides, reference, operations): the pages that match best, with
            the passages that match."""
            return await documentation.search(docs, words, limit)


def _write_tools(server: MCPServer) -> None:
    @server.tool(annotations=WRITE)
    @answering
    async def reconcile(kind: Kind, name: Name, namespace: Namespace = "", reason: Reason = "",
                        reset: Annotated[bool, Field(description="HelmRelease: count failures afresh")] = False,
                        force: Annotated[bool, Field(description="HelmRelease: one forced upgrade")] = False,
                        wait: Wait = 60.0) -> Answer:
        """Ask the operator to reconcile an object now, and wait for its outcome."""
        return await writes.reconcile(current(), kind, namespace, name, reason=reason, reset=reset, force=force,
                                      wait=wait)

    @server.tool(annotations=WRITE)
    @answering
    async def suspend(kind: Kind, name: Name, namespace: Namespace = "", reason: Reason = "") -> Answer:
        """Stop the operator acting on an object."""
        return await writes.set_suspended(current(), kind, namespace, name, True, reason=reason)

    @server.tool(annotations=WRITE)
    @answering
    async def resume(kind: Kind, name: Name, namespace: Namespace = "", reason: Reason = "") -> Answer:
        """Let the operator act on a suspended object again."""
        return await writes.set_suspended(current(), kind, namespace, name, False, reason=reason)

    @server.tool(annotations=WRITE)
    @answering
    async def rollback(name: Name, namespace: Namespace = "", kind: Kind = "hr",
                       revision: Annotated[int, Field(description="the helm revision to go back to (0: the one "
                                                                  "deployed before the current one)", ge=0)] = 0,
                       reason: Reason = "", wait: Wait = 60.0) -> Answer:
        """Roll a HelmRelease's release back and pin it there until its desired state changes or unpin."""
        return await writes.held(current(), kind, namespace, name, Asked.ROLLBACK, reason=reason,
                                 revision=str(revision) if revision else "", wait=wait)

    @server.tool(annotations=WRITE)
    @answering
    async def pin(kind: Kind, name: Name, namespace: Namespace = "", reason: Reason = "",
                  wait: Wait = 60.0) -> Answer:
        """Hold a HelmRelease, ConfigSync or Kustomization where it is until its desired state changes or unpin."""
        return await writes.held(current(), kind, namespace, name, Asked.PIN, reason=reason, revision="", wait=wait)

    @server.tool(annotations=WRITE)
    @answering
    async def unpin(kind: Kind, name: Name, namespace: Namespace = "", reason: Reason = "",
                    wait: Wait = 60.0) -> Answer:
        """End a pin: the object reconciles toward its spec again."""
        return await writes.held(current(), kind, namespace, name, Asked.UNPIN, reason=reason, revision="", wait=wait)

    @server.tool(annotations=WRITE)
    @answering
    async def approve(kind: Kind, name: Name, namespace: Namespace = "", reason: Reason = "",
                      revision: Annotated[str, Field(description="the revision to approve (default: the one "
                                                                 "waiting, status.pendingRevision)")] = "",
                      now: Annotated[bool, Field(description="also outside the deployment windows, once")] = False,
                      wait: Wait = 60.0) -> Answer:
        """Let the change that waits for an approval go (needs RBAC's verb approve on the object)."""
        return await writes.held(current(), kind, namespace, name, Asked.APPROVE_NOW if now else Asked.APPROVE,
                                 reason=reason, revision=revision, wait=wait)


def _prompts(server: MCPServer) -> None:
    @server.prompt(title="What is failing, and why")
    async def failing(namespace: str = "") -> str:
        """What is failing (in a namespace, or every one the caller may read), and the root causes."""
        found = await _facts(reads.list_objects(current(), "all", namespace, not namespace, "", "failed", 20))
        return (f"These of helmop's and Flux's objects are failing{' in ' + namespace if namespace else ''} "
                f"(read just now, with my rights):\n{found}\n\nFor each, find out why: call `why` for the chain of "
                "what it waits for and its root causes, `get_object` for its conditions, history and inventory, "
                "`events` and `logs` for what the operator said. Then tell me, object by object, what fails, the "
                "root cause, and what would fix it. Change nothing.")

    @server.prompt(title="What will this pull request change")
    async def pull_request(number: int, namespace: str = "") -> str:
        """What a config repository's pull request would change, as helmop's Previews rendered it."""
        found = await _facts(reads.list_objects(current(), PREVIEW.plural, namespace, not namespace, "", "", 20))
        return (f"Pull request #{number}: helmop's Previews (read just now) render each open pull request of a "
                f"config repository against its base and post what would change:\n{found}\n\nCall `get_object` "
                f"for each Preview above and read status.pullRequests for number {number}: the head and base "
                "commits, how many objects are added, changed and removed, and the result. Then, for the "
                "releases it concerns, call `get_object` for what runs now. Tell me what the pull request would "
                "change and what could go wrong; if no Preview covers it, say so (`helmop diff -f` on a checkout "
                "shows the same offline).")


async def _facts(reading: Awaitable[Answer]) -> str:
    """What a prompt shows of the cluster; what the caller may not read said as such, not raised."""
    try:
        return json.dumps(await reading, indent=1)
    except (Failed, KubeError, SpecError) as exc:
        return f"(not read: {exc.message if isinstance(exc, KubeError) else exc})"
