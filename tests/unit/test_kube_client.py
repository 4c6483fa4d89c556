"""The API client's retry policy and credential rotation, against a small HTTP server on loopback that
answers what a troubled API server would."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from helmop.infra import kube as kube_module
from helmop.infra.kube import Connection, Kube, KubeError, Unreachable

from .loopback_api import Server


def _status(code: int, **headers: str) -> web.Response:
    return web.json_response({"kind": "Status", "reason": "Busy", "message": "try later"}, status=code,
                             headers=headers)


def _kubeconfig(path: Path, server: str, token: str) -> Path:
    path.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{server}"}}}}]
users: [{{name: u, user: {{token: {token}}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
""")
    return path


async def test_transient_answers_are_retried(server: tuple[Server, str]) -> None:
    srv, url = server
    kube = Kube(Connection(url, token="t"))
    srv.answer = lambda request, n: _status(503) if n < 3 else web.json_response({"ok": n})
    assert await kube.request("GET", "/api/v1/namespaces/x") == {"ok": 3}
    srv.seen.clear()
    started = time.monotonic()
    srv.answer = lambda request, n: _status(429, **{"Retry-After": "1"}) if n == 1 else web.json_response({})
    await kube.request("PATCH", "/apis/x/v1/namespaces/a/things/b", {})
    assert time.monotonic() - started >= 1.0  # the server's Retry-After, not a shorter backoff
    # A conflict on a status write is retried; elsewhere it is an answer (the caller decides).
    srv.seen.clear()
    srv.answer = lambda request, n: _status(409) if n == 1 else web.json_response({})
    await kube.request("PATCH", "/apis/x/v1/namespaces/a/things/b/status", {})
    assert len(srv.seen) == 2
    srv.seen.clear()
    with pytest.raises(KubeError) as conflict:
        await kube.request("PUT", "/apis/x/v1/namespaces/a/things/b", {})
    assert conflict.value.status == 409 and len(srv.seen) == 1
    # Not found is not transient.
    srv.seen.clear()
    srv.answer = lambda request, n: _status(404)
    assert await kube.get("/api/v1/namespaces/gone") is None and len(srv.seen) == 1
    await kube.close()


async def test_an_unreachable_server_is_a_kube_error_after_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    kube = Kube(Connection("http://127.0.0.1:9", token="t"))  # nothing listens on port 9
    started = time.monotonic()
    with pytest.raises(Unreachable) as failed:
        await kube.request("GET", "/api")
    assert failed.value.status == 0 and not failed.value.sent and time.monotonic() - started > 0.5
    await kube.close()


async def test_rotated_credentials_are_read_again(server: tuple[Server, str], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    srv, url = server
    valid = {"Bearer one"}
    srv.answer = lambda request, n: (web.json_response({}) if request.headers.get("Authorization") in valid
                                     else _status(401))
    # A kubeconfig whose token changes (an exec plugin's, a token file's): re-read after a 401.
    config = _kubeconfig(tmp_path / "kubeconfig", url, "one")
    kube = Kube(Connection.from_kubeconfig(config))
    await kube.request("GET", "/api")
    valid = {"Bearer two"}
    _kubeconfig(config, url, "two")
    await kube.request("GET", "/api")
    assert [auth for _, _, auth in srv.seen] == ["Bearer one", "Bearer one", "Bearer two"]
    await kube.close()
    # An in-cluster token file rotates: read again once a minute (here: at once), no 401 needed.
    token = tmp_path / "token"
    token.write_text("three")
    valid = {"Bearer three", "Bearer four"}
    kube = Kube(Connection(url, token="three", token_file=str(token)))
    monkeypatch.setattr(kube_module, "TOKEN_REREAD", 0.0)
    token.write_text("four")
    srv.seen.clear()
    await kube.request("GET", "/api")
    assert srv.seen[-1][2] == "Bearer four"
    await kube.close()


def test_retry_rules() -> None:
    retryable: Any = kube_module._retryable
    assert retryable(Unreachable("x", sent=False), "POST", "/p")  # never reached the server
    assert not retryable(Unreachable("x", sent=True), "POST", "/p")  # may have created it
    assert retryable(Unreachable("x", sent=True), "GET", "/p")
    assert retryable(KubeError(500, "", ""), "POST", "/p") and not retryable(KubeError(422, "", ""), "PATCH", "/p")


async def test_a_servers_path_prefix_comes_before_every_request(server: tuple[Server, str]) -> None:
    """A proxy's prefix (Rancher's /k8s/clusters/<id>) as client-go puts it: before the API path, for requests and
    for streams alike."""
    srv, url = server
    kube = Kube(Connection(f"{url}/k8s/clusters/c-1/", token="t"))
    srv.answer = lambda request, n: web.json_response({"path": request.path})
    assert await kube.request("GET", "/api/v1/namespaces/x") == {"path": "/k8s/clusters/c-1/api/v1/namespaces/x"}
    assert [line async for line in kube.stream("/api/v1/pods", {})] == [
        b'{"path": "/k8s/clusters/c-1/api/v1/pods"}']
    await kube.close()
