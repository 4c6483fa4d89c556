"""Kubeconfigs read as kubectl reads them: merged $KUBECONFIG files, relative paths, *-data fields, token
files, exec credential plugins (run for real, their token sent to a server on loopback), the in-cluster
account, and a specific reason for each way a kubeconfig cannot be used."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path

import pytest
import yaml
from aiohttp import web

from helmop.infra import kubeconfig
from helmop.infra.kube import Connection, Kube
from helmop.infra.kubeconfig import KubeconfigError

from .loopback_api import Server


def _write(path: Path, clusters: dict[str, dict[str, object]], users: dict[str, dict[str, object]],
           contexts: dict[str, dict[str, object]], current: str = "") -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": current,
        "clusters": [{"name": k, "cluster": v} for k, v in clusters.items()],
        "users": [{"name": k, "user": v} for k, v in users.items()],
        "contexts": [{"name": k, "context": v} for k, v in contexts.items()]}))
    return path


def _plugin(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


@pytest.fixture(autouse=True)
def _no_ambient_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Neither the machine's kubeconfig nor a pod's account leaks into a case."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(kubeconfig, "SERVICE_ACCOUNT", tmp_path / "no-pod")


def test_kubeconfig_files_merge_as_kubectl_merges_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = _write(tmp_path / "a" / "config", {"one": {"server": "https://one", "certificate-authority": "ca.pem"}},
                   {"me": {"token": "first"}}, {"work": {"cluster": "one", "user": "me", "namespace": "team"}},
                   current="work")
    second = _write(tmp_path / "b" / "config", {"one": {"server": "https://shadowed"},
                                                "two": {"server": "https://two", "insecure-skip-tls-verify": True}},
                    {"me": {"token": "second"}, "other": {"client-certificate": "crt.pem", "client-key": "/abs/k"}},
                    {"play": {"cluster": "two", "user": "other"}}, current="play")
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(tmp_path / "missing"), str(first), str(second)]))
    work = kubeconfig.load()
    assert (work.server, work.token, work.namespace) == ("https://one", "first", "team")  # the first file wins
    assert work.ca_file == str(tmp_path / "a" / "ca.pem")  # relative to the file that names it
    play = kubeconfig.load(context="play")
    assert (play.server, play.insecure, play.token, play.namespace) == ("https://two", True, "", "")
    assert (play.cert_file, play.key_file) == (str(tmp_path / "b" / "crt.pem"), "/abs/k")
    connection = Connection.from_kubeconfig(context="play")
    assert (connection.server, connection.context, connection.kubeconfig) == ("https://two", "play", "")


def test_data_fields_are_private_files_and_token_files_rotate(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("from-file\n")
    config = _write(tmp_path / "config", {"c": {"server": "https://c",
                                                "certificate-authority-data": base64.b64encode(b"CA PEM").decode()}},
                    {"u": {"tokenFile": "token", "client-certificate-data": base64.b64encode(b"CERT").decode(),
                           "client-key-data": base64.b64encode(b"KEY").decode()}},
                    {"x": {"cluster": "c", "user": "u"}}, current="x")
    creds = kubeconfig.load(config)
    assert [Path(f).read_bytes() for f in (creds.ca_file, creds.cert_file, creds.key_file)] == [b"CA PEM", b"CERT",
                                                                                                 b"KEY"]
    assert all(stat.S_IMODE(Path(f).stat().st_mode) == 0o600 for f in (creds.ca_file, creds.key_file))
    assert (creds.token, creds.token_file) == ("from-file", str(token))
    token.write_text("rotated")
    assert Connection.from_kubeconfig(config).with_token_file().token == "rotated"


async def test_an_exec_plugin_s_credential_is_sent_and_run_again_after_a_401(
        server: tuple[Server, str], tmp_path: Path) -> None:
    srv, url = server
    issued = tmp_path / "issued"
    issued.write_text("one")
    # The plugin sees its args, its env entries and the ExecCredential request (cluster info asked for).
    _plugin(tmp_path / "bin-plugin", """
test "$1" = --region && test "$2" = north && test "$GREETING" = hello || exit 3
echo "$KUBERNETES_EXEC_INFO" > "$(dirname "$0")/request"
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}' \
  "$(cat "$(dirname "$0")/issued")"
""")
    config = _write(tmp_path / "config", {"c": {"server": url}},
                    {"u": {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "./bin-plugin",
                                    "args": ["--region", "north"], "env": [{"name": "GREETING", "value": "hello"}],
                                    "provideClusterInfo": True, "interactiveMode": "Never"}}},
                    {"x": {"cluster": "c", "user": "u"}}, current="x")
    valid = {"Bearer one"}
    srv.answer = lambda request, n: (web.json_response({}) if request.headers.get("Authorization") in valid
                                     else web.json_response({"kind": "Status"}, status=401))
    kube = Kube(Connection.from_kubeconfig(config))
    await kube.request("GET", "/api")
    request = json.loads((tmp_path / "request").read_text())
    assert request["kind"] == "ExecCredential" and request["spec"] == {"interactive": False,
                                                                       "cluster": {"server": url}}
    issued.write_text("two")  # the credential expired: the server refuses it, the plugin issues a new one
    valid = {"Bearer two"}
    await kube.request("GET", "/api")
    assert [auth for _, _, auth in srv.seen] == ["Bearer one", "Bearer one", "Bearer two"]
    await kube.close()


def test_an_exec_plugin_s_client_certificate_is_used(tmp_path: Path) -> None:
    _plugin(tmp_path / "plugin", """printf '{"status":{"clientCertificateData":"CERT PEM",'
printf '"clientKeyData":"KEY PEM"}}'""")
    config = _write(tmp_path / "config", {"c": {"server": "https://c"}},
                    {"u": {"exec": {"command": str(tmp_path / "plugin")}}}, {"x": {"cluster": "c", "user": "u"}}, "x")
    creds = kubeconfig.load(config)
    assert (Path(creds.cert_file).read_text(), Path(creds.key_file).read_text()) == ("CERT PEM", "KEY PEM")


@pytest.mark.parametrize(("user", "plugin", "reason"), [
    ({"exec": {"command": "./plugin"}}, "echo 'token expired, log in again' >&2; exit 4",
     "the exec plugin plugin exited 4: token expired, log in again"),
    ({"exec": {"command": "./plugin"}}, "echo not-json", "did not print an ExecCredential"),
    ({"exec": {"command": "./absent"}}, "", "the exec plugin absent failed"),
    ({"auth-provider": {"name": "oidc"}}, "", "auth-provider 'oidc' is not supported"),
    ({"auth-provider": "oidc"}, "", "auth-provider '' is not supported"),
    ({"exec": {"command": "./plugin", "args": "--all"}}, "", "not a mapping with a list of args"),
    ({"exec": "./plugin"}, "", "not a mapping with a list of args"),
    ({"username": "admin", "password": "pw"}, "", "basic authentication"),
    ({"client-key-data": "%%%"}, "", "client-key-data is not base64"),
    ({"tokenFile": "absent"}, "", "tokenFile cannot be read"),
])
def test_an_unusable_user_is_named_with_its_reason(tmp_path: Path, user: dict[str, object], plugin: str,
                                                   reason: str) -> None:
    if plugin:
        _plugin(tmp_path / "plugin", plugin)
    config = _write(tmp_path / "config", {"c": {"server": "https://c"}}, {"u": user},
                    {"x": {"cluster": "c", "user": "u"}}, current="x")
    with pytest.raises(KubeconfigError, match=reason.replace("'", ".")) as failed:
        Connection.from_kubeconfig(config)
    assert str(config) in str(failed.value) and "pw" not in str(failed.value)


def test_missing_files_contexts_and_entries_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(KubeconfigError, match="kubeconfig /nowhere does not exist"):
        kubeconfig.load("/nowhere")
    monkeypatch.setenv("KUBECONFIG", "/nowhere:/elsewhere")
    with pytest.raises(KubeconfigError, match="KUBECONFIG names /nowhere, /elsewhere, which does not exist"):
        kubeconfig.load()
    monkeypatch.delenv("KUBECONFIG")
    config = _write(tmp_path / "config", {"c": {}}, {}, {"x": {"cluster": "c"}, "y": {"cluster": "gone"}})
    with pytest.raises(KubeconfigError, match="has no current-context"):
        kubeconfig.load(config)
    with pytest.raises(KubeconfigError, match="no context named 'z'"):
        kubeconfig.load(config, "z")
    with pytest.raises(KubeconfigError, match="no cluster named 'gone'"):
        kubeconfig.load(config, "y")
    with pytest.raises(KubeconfigError, match="cluster 'c' has no server"):
        kubeconfig.load(config, "x")
    (tmp_path / "list").write_text("- not a mapping\n")
    with pytest.raises(KubeconfigError, match="is not a mapping"):
        kubeconfig.load(tmp_path / "list")
    with pytest.raises(KubeconfigError, match=r"no kubeconfig: ~/\.kube/config does not exist"):
        kubeconfig.load()


def test_in_a_pod_the_service_account_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    account = tmp_path / "account"
    account.mkdir()
    (account / "token").write_text("pod-token\n")
    (account / "namespace").write_text("helmop-system")
    monkeypatch.setattr(kubeconfig, "SERVICE_ACCOUNT", account)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    conn = Connection.from_kubeconfig()
    assert (conn.server, conn.token, conn.namespace) == ("https://[fd00::1]:443", "pod-token", "helmop-system")
    assert (conn.token_file, conn.ca_file) == (str(account / "token"), str(account / "ca.crt"))
    with pytest.raises(KubeconfigError, match="context 'other': there is no kubeconfig"):
        Connection.from_kubeconfig(context="other")
