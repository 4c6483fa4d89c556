"""``helmop mcp`` driven by the MCP SDK's own client over stdio (the server a child process, as an assistant starts
it) and over streamable HTTP, against the operator: a failing release explained, writes refused without
--read-write and acting as the caller with it (a tenant's kubeconfig), a tenant's bearer token over HTTP reading
with its own rights (and no token, no answer), a release's diff, the docs searched, and no Secret's value in any
answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

import helmop.cli.mcp
from helmop.api import requests
from helmop.cli.mcp import documentation, reads, server
from tests.chartrepo import ChartRepo
from tests.clirun import run_cli
from tests.controllers.conftest import Operator, apply, condition, failing, get, hr, ready
from tests.tools import ROOT, TOOLS, Run

READS = {"list_objects", "get_object", "events", "why", "logs", "diff", "search_docs"}
WRITES = {"reconcile", "suspend", "resume", "rollback", "pin", "unpin", "approve"}
PASSWORD = "hunter2-TOPSECRET"


@asynccontextmanager
async def mcp(kubeconfig: Path, ns: str, *flags: str) -> AsyncIterator[ClientSession]:
    """A session with ``helmop mcp`` run as a child of this process, with ``kubeconfig``'s identity."""
    child = StdioServerParameters(command=sys.executable, cwd=str(ROOT), env={"HELMOP_HELM": str(TOOLS / "helm")},
                                  args=["-m", "helmop.cli", "mcp", "--kubeconfig", str(kubeconfig), "-n", ns, *flags])
    async with stdio_client(child) as (reading, writing), ClientSession(reading, writing) as session:
        await session.initialize()
        yield session


@contextmanager
def http_server(kubeconfig: Path, ns: str, *flags: str) -> Iterator[str]:
    """``helmop mcp --http --port 0`` as a child process until the block ends; its URL, as it printed it."""
    process = subprocess.Popen([sys.executable, "-m", "helmop.cli", "mcp", "--http", "--port", "0", "--kubeconfig",
                                str(kubeconfig), "-n", ns, *flags], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "HELMOP_HELM": str(TOOLS / "helm")})  # (its stderr: the test's)
    try:
        assert process.stdout is not None
        first = process.stdout.readline()  # (printed once its socket listens)
        assert first.startswith("helmop mcp: http://127.0.0.1:"), first
        yield first.split(": ", 1)[1].strip()
    finally:
        process.terminate()
        process.wait(10)


@asynccontextmanager
async def over_http(url: str, token: str) -> AsyncIterator[ClientSession]:
    client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"} if token else {}, timeout=60)
    async with client, streamable_http_client(url, http_client=client) as (reading, writing), \
            ClientSession(reading, writing) as session:
        await session.initialize()
        yield session


def post(url: str, headers: dict[str, str]) -> tuple[int, dict[str, str]]:
    """An MCP initialize request as any HTTP client sends it: the status and headers of the answer."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "curl", "version": "1"}}})
    request = urllib.request.Request(url, body.encode(), method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers)


def answer(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def text(result: CallToolResult) -> str:
    return json.dumps(result.model_dump(mode="json"))


def tenant_token(kube: Run, ns: str, account: str) -> str:
    """The token of a ServiceAccount that may edit what is in ``ns``, and nothing elsewhere."""
    kube("kubectl", "-n", ns, "create", "serviceaccount", account)
    kube("kubectl", "-n", ns, "create", "rolebinding", f"{account}-edit", "--clusterrole=edit",
         f"--serviceaccount={ns}:{account}")
    return kube("kubectl", "-n", ns, "create", "token", account).stdout.strip()


def tenant(kube: Run, ns: str, account: str, where: Path) -> Path:
    """A kubeconfig with :func:`tenant_token`'s token."""
    token = tenant_token(kube, ns, account)
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


async def test_over_http_each_request_acts_as_its_bearer_token(
        operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo) -> None:
    apply(kube, ns, hr("web", chart_repo, version="0.1.0"))
    elsewhere = f"{ns}-other"
    kube("kubectl", "create", "namespace", elsewhere)
    apply(kube, elsewhere, hr("theirs", chart_repo, version="0.1.0"))
    token = tenant_token(kube, ns, "alice")
    # the server's own account (the sandbox's admin) asks TokenReview and impersonates; -n default is not alice's
    with http_server(Path(kube.kubeconfig), "default", "--auth", "token") as url:
        status, headers = post(url, {})
        assert status == 401 and headers.get("www-authenticate", "").startswith("Bearer")
        assert post(url, {"Authorization": "Bearer not-a-token"})[0] == 401
        async with over_http(url, token) as session:
            tools = {tool.name for tool in (await session.list_tools()).tools}
            assert tools == READS - {"diff"}  # (helm would act as this server: no diff with a caller per request)
            got = answer(await session.call_tool("get_object", {"kind": "hr", "name": "web"}))  # alice's namespace
            assert (got["namespace"], got["name"]) == (ns, "web")
            refused = await session.call_tool("get_object", {"kind": "hr", "name": "theirs", "namespace": elsewhere})
            assert refused.is_error and "forbidden" in text(refused) and f"{ns}:alice" in text(refused)
            listed = answer(await session.call_tool("list_objects", {"kind": "hr", "all_namespaces": True}))
            assert listed["items"] == [] and any("forbidden" in r for r in listed["refused"])


def test_over_http_the_kubeconfig_s_rights_stay_on_loopback() -> None:
    said = run_cli(["mcp", "--http", "--address", "0.0.0.0"], {})
    assert said.returncode == 2 and "127.0.0.1 only" in said.stderr and "--auth token" in said.stderr


async def test_a_release_s_diff_and_the_docs(operator: Operator, kube: Run, ns: str, chart_repo: ChartRepo) -> None:
    apply(kube, ns, hr("diffed", chart_repo, version="0.1.0", values={"replicaCount": 1}))
    ready(kube, ns, "diffed")
    with http_server(Path(kube.kubeconfig), ns) as url:  # (--auth kubeconfig: no token asked on loopback)
        async with over_http(url, "") as session:
            same = answer(await session.call_tool("diff", {"name": "diffed"}))
            assert same == {"helmRelease": f"{ns}/diffed", "changed": False, "objects": []}
            # suspended in the same change: the operator leaves the new values unapplied, the diff shows them
            kube("kubectl", "-n", ns, "patch", "hr", "diffed", "--type=merge",
                 "-p", '{"spec": {"suspend": true, "values": {"replicaCount": 3}}}')
            changed = answer(await session.call_tool("diff", {"name": "diffed"}))
            assert changed["changed"] is True
            assert [(o["kind"], o["name"], o["change"]) for o in changed["objects"]] == [
                ("Deployment", "diffed", "update")]
            diff = changed["objects"][0]["diff"]
            assert "-  replicas: 1" in diff and "+  replicas: 3" in diff
            missing = await session.call_tool("diff", {"name": "ghost"})
            assert missing.is_error and f"HelmRelease {ns}/ghost not found" in text(missing)

            found = answer(await session.call_tool("search_docs", {"words": "streamable HTTP bearer token"}))
            pages = {page["page"]: page for page in found["pages"]}
            assert "guides/mcp.md" in pages and len(found["pages"]) <= 5
            assert any("--auth token" in excerpt for excerpt in pages["guides/mcp.md"]["excerpts"])
            assert all(len(e) <= documentation.EXCERPT + len(reads.CUT) for p in found["pages"] for e in p["excerpts"])
    assert get(kube, ns, "deploy", "diffed")["spec"]["replicas"] == 1  # nothing applied


async def test_without_the_docs_the_docs_tool_is_not_offered(tmp_path: Path) -> None:
    assert documentation.installed() == documentation.DOCS  # (a checkout: the pages are there)
    assert documentation.installed(tmp_path) is None  # (a wheel: no docs/ beside the package)
    for docs, offered in ((tmp_path, False), (documentation.DOCS, True)):
        built = server.build(lambda _: pytest.fail("no call"), read_write=False, docs=documentation.installed(docs))
        assert ("search_docs" in {tool.name for tool in await built.list_tools()}) is offered
