"""``helmop mcp`` driven by the MCP SDK's own client over stdio (the server a child process, as an assistant starts
it), against the operator: a failing release explained, writes refused without --read-write and acting as the
caller with it (a tenant's kubeconfig), and no Secret's value in any answer."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent

import helmop.cli.mcp
from helmop.api import requests
from helmop.cli.mcp import reads
from tests.chartrepo import ChartRepo
from tests.clirun import run_cli
from tests.controllers.conftest import Operator, apply, condition, failing, get, hr, ready
from tests.tools import ROOT, Run

READS = {"list_objects", "get_object", "events", "why", "logs"}
WRITES = {"reconcile", "suspend", "resume", "rollback", "pin", "unpin", "approve"}
PASSWORD = "hunter2-TOPSECRET"


@asynccontextmanager
async def mcp(kubeconfig: Path, ns: str, *flags: str) -> AsyncIterator[ClientSession]:
    """A session with ``helmop mcp`` run as a child of this process, with ``kubeconfig``'s identity."""
    server = StdioServerParameters(command=sys.executable, cwd=str(ROOT),
                                   args=["-m", "helmop.cli", "mcp", "--kubeconfig", str(kubeconfig), "-n", ns, *flags])
    async with stdio_client(server) as (reading, writing), ClientSession(reading, writing) as session:
        await session.initialize()
        yield session


def answer(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def text(result: CallToolResult) -> str:
    return json.dumps(result.model_dump(mode="json"))


def tenant(kube: Run, ns: str, account: str, where: Path) -> Path:
    """A kubeconfig with the token of a ServiceAccount that may edit what is in ``ns``, and nothing elsewhere."""
    kube("kubectl", "-n", ns, "create", "serviceaccount", account)
    kube("kubectl", "-n", ns, "create", "rolebinding", f"{account}-edit", "--clusterrole=edit",
         f"--serviceaccount={ns}:{account}")
    token = kube("kubectl", "-n", ns, "create", "token", account).stdout.strip()
    config = yaml.safe_load(Path(kube.kubeconfig).read_text())
    config["users"][0]["user"] = {"token": token}
    path = where / f"{account}.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


async def test_a_failing_release_is_explained_and_writes_are_not_offered(
        operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo) -> None:
    apply(kube, ns, hr("bad", chart_repo, chart="broken", version="0.1.0"))
    failing(kube, ns, "bad", "RenderFailed")
    async with mcp(Path(kube.kubeconfig), ns) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert set(tools) == READS  # read-only: nothing that acts is offered
        assert all(tool.annotations and tool.annotations.read_only_hint for tool in tools.values())

        listed = answer(await session.call_tool("list_objects", {"kind": "hr", "health": "failed"}))
        assert [(i["name"], i["ready"]["reason"]) for i in listed["items"]] == [("bad", "RenderFailed")]
        got = answer(await session.call_tool("get_object", {"kind": "hr", "name": "bad"}))
        assert got["health"] == "failed" and got["ready"]["reason"] == "RenderFailed"
        assert "deliberately broken" in got["ready"]["message"]
        assert {c["type"]: c["status"] for c in got["status"]["conditions"]}["Ready"] == "False"
        why = answer(await session.call_tool("why", {"kind": "hr", "name": "bad"}))
        assert why["object"]["state"] == "Failed" and why["object"]["reason"] == "RenderFailed"
        causes = [(c["kind"], c["name"], c["reason"]) for c in why["rootCauses"]]
        assert causes == [("HelmRelease", "bad", "RenderFailed")]
        said = answer(await session.call_tool("events", {"kind": "hr", "name": "bad"}))
        assert any(e["reason"] == "RenderFailed" and e["object"] == f"HelmRelease/{ns}/bad" for e in said["events"])

        said_first = (await session.get_prompt("failing", {"namespace": ns})).messages[0].content
        assert isinstance(said_first, TextContent)  # the failing objects, read when asked, and what to do
        assert '"name": "bad"' in said_first.text and "deliberately broken" in said_first.text
        assert "`why`" in said_first.text

        refused = await session.call_tool("reconcile", {"kind": "hr", "name": "bad"})
        assert refused.is_error and "reconcile" in text(refused)
        missing = await session.call_tool("get_object", {"kind": "hr", "name": "nothere"})
        assert missing.is_error and f"HelmRelease {ns}/nothere not found" in text(missing)
    assert requests.ASKED not in (get(kube, ns, "hr", "bad")["metadata"].get("annotations") or {})


async def test_writes_act_as_the_caller_and_only_where_it_may(
        operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo, tmp_path: Path) -> None:
    apply(kube, ns, hr("web", chart_repo, version="0.1.0"))
    ready(kube, ns, "web")
    elsewhere = f"{ns}-other"
    kube("kubectl", "create", "namespace", elsewhere)
    apply(kube, elsewhere, hr("web", chart_repo, version="0.1.0"))
    alice = tenant(kube, ns, "alice", tmp_path)
    async with mcp(alice, ns, "--read-write") as session:
        tools = {tool.name for tool in (await session.list_tools()).tools}
        assert tools == READS | WRITES
        done = answer(await session.call_tool("reconcile", {"kind": "hr", "name": "web", "reason": "checking"}))
        assert done["handled"] and done["ready"]["status"] == "True"
        handled = get(kube, ns, "hr", "web")["status"]["lastHandledRequest"]
        assert handled["action"] == "reconcile" and handled["by"] == f"system:serviceaccount:{ns}:alice"
        assert handled["reason"] == "checking"

        refused = await session.call_tool("reconcile", {"kind": "hr", "name": "web", "namespace": elsewhere})
        assert refused.is_error and "forbidden" in text(refused)
        refused = await session.call_tool("suspend", {"kind": "hr", "name": "web", "namespace": elsewhere})
        assert refused.is_error and "forbidden" in text(refused)
    other = get(kube, elsewhere, "hr", "web")
    assert not other["spec"].get("suspend") and requests.ASKED not in (other["metadata"].get("annotations") or {})


async def test_no_secret_value_in_any_answer(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo) -> None:
    kube("kubectl", "-n", ns, "create", "secret", "generic", "creds", f"--from-literal=password={PASSWORD}")
    # the chart fails saying the password it was given; the value is also copied, by hand, into the spec
    apply(kube, ns, hr("sec", chart_repo, chart="secretive", version="0.1.0", values={"copied": PASSWORD},
                       valuesFrom=[{"kind": "Secret", "name": "creds", "valuesKey": "password",
                                    "targetPath": "password"}]))
    assert "bad password ***" in condition(failing(kube, ns, "sec", "RenderFailed"))["message"]
    about = {"kind": "hr", "name": "sec"}
    async with mcp(Path(kube.kubeconfig), ns) as session:
        got = await session.call_tool("get_object", about)
        secret = await session.call_tool("get_object", {"kind": "secret", "name": "creds"})
        shown = [text(got), text(secret)] + [text(await session.call_tool(tool, arguments)) for tool, arguments in (
            ("list_objects", {}), ("events", about), ("why", about), ("why", {"kind": "secret", "name": "creds"}))]
        shown += [text(await session.get_prompt(prompt.name, {"number": "1"} if prompt.name == "pull_request" else {}))
                  for prompt in (await session.list_prompts()).prompts]
    assert all(PASSWORD not in one for one in shown), [one for one in shown if PASSWORD in one]
    spec = yaml.safe_load(answer(got)["spec"])
    assert spec["values"]["copied"] == "***"  # the copy masked where it is, not left out
    assert "bad password ***" in answer(got)["ready"]["message"]
    assert secret.is_error and "unknown kind 'secret'" in text(secret)  # a Secret is not a kind read whole


def test_without_the_sdk_it_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in sys.modules if name.partition(".")[0] == "mcp"]:
        monkeypatch.setitem(sys.modules, name, None)  # `import mcp...` fails, as where it is not installed
    monkeypatch.delitem(sys.modules, "helmop.cli.mcp.server", raising=False)
    monkeypatch.delattr(helmop.cli.mcp, "server", raising=False)  # (imported by this process's earlier tests)
    said = run_cli(["mcp"], {})
    assert said.returncode == 2 and "pip install 'helmop[mcp]'" in said.stderr


def test_answers_are_bounded() -> None:
    cut = reads.bounded({"events": [{"message": "x" * 10_000}] * 250, "lines": ["ok"]})
    assert len(cut["events"]) == reads.MAX_ITEMS + 1 and cut["events"][-1] == f"{reads.CUT}: 150 more"
    assert cut["events"][0]["message"] == "x" * reads.MAX_TEXT + reads.CUT and cut["lines"] == ["ok"]
