"""The MCP server of ``helmop mcp`` (the official ``mcp`` SDK, over stdio): its tools, its prompts, and how an
error reaches the client (the API server's words, or helmop's, as the CLI says them; never a traceback)."""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, ParamSpec

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from helmop.api.errors import SpecError
from helmop.api.kinds import PREVIEW
from helmop.api.requests import Asked
from helmop.infra.kube import KubeError

from ..errors import Failed
from . import reads, writes
from .reads import Caller

P = ParamSpec("P")
Answer = dict[str, Any]

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


def build(caller: Caller, *, read_write: bool) -> MCPServer:
    server = MCPServer("helmop", instructions=INSTRUCTIONS, log_level="WARNING")
    _read_tools(server, caller)
    if read_write:  # read-only by default: without --read-write, no tool that acts is even offered
        _write_tools(server, caller)
    _prompts(server, caller)
    return server


def _read_tools(server: MCPServer, caller: Caller) -> None:
    @server.tool(annotations=READ)
    @answering
    async def list_objects(kind: Annotated[str, Field(description="a kind, several (hr,csync), or all")] = "all",
                           namespace: Namespace = "", all_namespaces: bool = False,
                           selector: Annotated[str, Field(description="label selector (app=web,tier!=db)")] = "",
                           health: Annotated[str, Field(description="only these: failed, progressing, ready or "
                                                                    "suspended")] = "",
                           limit: int = reads.MAX_ITEMS) -> Answer:
        """List helmop's and Flux's objects with their health, Ready condition, revision, source and cluster."""
        return await reads.list_objects(caller, kind, namespace, all_namespaces, selector, health, limit)

    @server.tool(annotations=READ)
    @answering
    async def get_object(kind: Kind, name: Name, namespace: Namespace = "") -> Answer:
        """One object: its conditions, status (history, inventory, pin, approvals, the last request and who made
        it), spec, and what it manages with each one's health."""
        return await reads.get_object(caller, kind, namespace, name)

    @server.tool(annotations=READ)
    @answering
    async def events(kind: Kind, name: Name, namespace: Namespace = "", limit: int = 50) -> Answer:
        """The Events of an object and of everything it manages, oldest first."""
        return await reads.events(caller, kind, namespace, name, limit)

    @server.tool(annotations=READ)
    @answering
    async def why(kind: Kind, name: Name, namespace: Namespace = "") -> Answer:
        """What an object waits for (dependsOn, its source, a suspension, an unreachable cluster), each with its
        state, reason and message, down to the root causes."""
        return await reads.why_not_ready(caller, kind, namespace, name)

    @server.tool(annotations=READ)
    @answering
    async def logs(kind: Kind, name: Name, namespace: Namespace = "", tail: int = 50) -> Answer:
        """The operator's last log lines about one object."""
        return await reads.logs(caller, kind, namespace, name, tail)


def _write_tools(server: MCPServer, caller: Caller) -> None:
    @server.tool(annotations=WRITE)
    @answering
    async def reconcile(kind: Kind, name: Name, namespace: Namespace = "", reason: Reason = "",
                        reset: Annotated[bool, Field(description="HelmRelease: count failures afresh")] = False,
                        force: Annotated[bool, Field(description="HelmRelease: one forced upgrade")] = False,
                        wait: Wait = 60.0) -> Answer:
        """Ask the operator to reconcile an object now, and wait for its outcome."""
        return await writes.reconcile(caller, kind, namespace, name, reason=reason, reset=reset, force=force,
                                      wait=wait)

    @server.tool(annotations=WRITE)
    @answering
    async def suspend(kind: Kind, name: Name, namespace: Namespace = "", reason: Reason = "") -> Answer:
        """Stop the operator acting on an object."""
        return await writes.set_suspended(caller, kind, namespace, name, True, reason=reason)

    @server.tool(annotations=WRITE)
    @answering
    async def resume(kind: Kind, name: Name, namespace: Namespace = "", reason: Reason = "") -> Answer:
        """Let the operator act on a suspended object again."""
        return await writes.set_suspended(caller, kind, namespace, name, False, reason=reason)

    @server.tool(annotations=WRITE)
    @answering
    async def rollback(name: Name, namespace: Namespace = "", kind: Kind = "hr",
                       revision: Annotated[int, Field(description="the helm revision to go back to (0: the one "
                                                                  "deployed before the current one)", ge=0)] = 0,
                       reason: Reason = "", wait: Wait = 60.0) -> Answer:
        """Roll a HelmRelease's release back and pin it there until its desired state changes or unpin."""
        return await writes.held(caller, kind, namespace, name, Asked.ROLLBACK, reason=reason,
                                 revision=str(revision) if revision else "", wait=wait)

    @server.tool(annotations=WRITE)
    @answering
    async def pin(kind: Kind, name: Name, namespace: Namespace = "", reason: Reason = "",
                  wait: Wait = 60.0) -> Answer:
        """Hold a HelmRelease, ConfigSync or Kustomization where it is until its desired state changes or unpin."""
        return await writes.held(caller, kind, namespace, name, Asked.PIN, reason=reason, revision="", wait=wait)

    @server.tool(annotations=WRITE)
    @answering
    async def unpin(kind: Kind, name: Name, namespace: Namespace = "", reason: Reason = "",
                    wait: Wait = 60.0) -> Answer:
        """End a pin: the object reconciles toward its spec again."""
        return await writes.held(caller, kind, namespace, name, Asked.UNPIN, reason=reason, revision="", wait=wait)

    @server.tool(annotations=WRITE)
    @answering
    async def approve(kind: Kind, name: Name, namespace: Namespace = "", reason: Reason = "",
                      revision: Annotated[str, Field(description="the revision to approve (default: the one "
                                                                 "waiting, status.pendingRevision)")] = "",
                      now: Annotated[bool, Field(description="also outside the deployment windows, once")] = False,
                      wait: Wait = 60.0) -> Answer:
        """Let the change that waits for an approval go (needs RBAC's verb approve on the object)."""
        return await writes.held(caller, kind, namespace, name, Asked.APPROVE_NOW if now else Asked.APPROVE,
                                 reason=reason, revision=revision, wait=wait)


def _prompts(server: MCPServer, caller: Caller) -> None:
    @server.prompt(title="What is failing, and why")
    async def failing(namespace: str = "") -> str:
        """What is failing (in a namespace, or every one the caller may read), and the root causes."""
        found = await _facts(reads.list_objects(caller, "all", namespace, not namespace, "", "failed", 20))
        return (f"These of helmop's and Flux's objects are failing{' in ' + namespace if namespace else ''} "
                f"(read just now, with my rights):\n{found}\n\nFor each, find out why: call `why` for the chain of "
                "what it waits for and its root causes, `get_object` for its conditions, history and inventory, "
                "`events` and `logs` for what the operator said. Then tell me, object by object, what fails, the "
                "root cause, and what would fix it. Change nothing.")

    @server.prompt(title="What will this pull request change")
    async def pull_request(number: int, namespace: str = "") -> str:
        """What a config repository's pull request would change, as helmop's Previews rendered it."""
        found = await _facts(reads.list_objects(caller, PREVIEW.plural, namespace, not namespace, "", "", 20))
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
