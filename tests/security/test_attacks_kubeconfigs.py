"""Remote clusters (spec.kubeConfig) against tenants, in both tenancy modes (see conftest), for the four kinds that
take one (helmop's HelmRelease and ConfigSync, Flux's HelmRelease and Kustomization): a kubeconfig helmop cannot
build a client of, a workload identity (kubeConfig.configMapRef) naming a ServiceAccount that does not exist, and
one sending a ServiceAccount token to an address the tenant writes. Each is refused with a specific reason, a
server of the tenant's (a recorder on loopback) receives no token it was not allowed, and each object is deleted
within a bounded time although its remote cannot be built (what it installed left there, said in a Warning Event)
or never answers (one that installed nothing asks for no remote on deletion). Under lockdown a token is minted for
its address's audience only."""

from __future__ import annotations

import base64
import http.server
import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helmop_sandbox.tls import make_serving_cert

from tests.controllers.conftest import condition, get
from tests.tools import eventually

from .conftest import Target, configsync, flux, helmrelease, refused, settled

pytestmark = pytest.mark.timeout(600)
FLUX_HR, FLUX_KS = "helmreleases.helm.toolkit.fluxcd.io", "kustomizations.kustomize.toolkit.fluxcd.io"
KINDS = {"hr": "HelmRelease", "csync": "ConfigSync", FLUX_HR: "HelmRelease", FLUX_KS: "Kustomization"}
SKIPPED = {"hr": "UninstallSkipped", FLUX_HR: "UninstallSkipped", "csync": "PruneSkipped", FLUX_KS: "PruneSkipped"}


class Recorder:
    """A server of the tenant's on loopback (https with its own CA, or plain http) that writes down every request
    it gets, and answers as an empty cluster would: /version, empty lists, 404 for the rest."""

    def __init__(self, folder: Path, *, tls: bool) -> None:
        self.requests: list[tuple[str, str, str]] = []  # (method, path, Authorization header)
        recorded = self.requests

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                recorded.append((self.command, self.path, self.headers.get("Authorization", "")))
                status: int
                body: dict[str, Any]
                if self.path == "/version":
                    status, body = 200, {"major": "1", "minor": "31", "gitVersion": "v1.31.0"}
                elif self.command == "GET" and "labelSelector=" in self.path:
                    status, body = 200, {"kind": "List", "apiVersion": "v1", "metadata": {}, "items": []}
                else:
                    status, body = 404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                         "reason": "NotFound", "code": 404, "message": "not found"}
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.ca = ""
        if tls:
            cert = make_serving_cert()
            self.ca = cert.ca_pem.decode()
            self.server.socket = cert.context(folder).wrap_socket(self.server.socket, server_side=True)
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def tokens(self) -> list[str]:
        return [auth for _, _, auth in self.requests if auth]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def recorders(tmp_path: Path) -> Iterator[tuple[Recorder, Recorder]]:
    secure, plain = Recorder(tmp_path, tls=True), Recorder(tmp_path, tls=False)
    yield secure, plain
    secure.close()
    plain.close()


class Blackhole:
    """A tenant's address that takes connections and never answers (a TLS handshake waits for ever)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"https://127.0.0.1:{self.listener.getsockname()[1]}"
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                self.held.append(self.listener.accept()[0])
            except OSError:  # closed
                return

    def close(self) -> None:
        self.listener.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def blackhole() -> Iterator[Blackhole]:
    hole = Blackhole()
    yield hole
    hole.close()


def remote_objects(name: str, kube_config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """One object of each kind that takes a spec.kubeConfig, by the name kubectl knows its kind by. The syncs
    prune (their deletion would clean up on the remote); none of their sources exists: the remote is judged
    first."""
    chart = {"spec": {"chart": "tiny", "version": "0.1.0", "sourceRef": {"kind": "HelmRepository", "name": "none"}}}
    return {
        "hr": helmrelease(name, {"repository": {"url": "https://charts.invalid", "name": "tiny", "version": "0.1.0"}},
                          kubeConfig=kube_config),
        "csync": configsync(name, "none", "apps", prune=True, kubeConfig=kube_config),
        FLUX_HR: flux("HelmRelease", name, chart=chart, kubeConfig=kube_config),
        FLUX_KS: flux("Kustomization", name, sourceRef={"kind": "GitRepository", "name": "none"}, path="./apps",
                      prune=True, kubeConfig=kube_config),
    }


def failing(target: Target, ns: str, kind: str, name: str, reason: str) -> str:
    """The message of Ready False with ``reason`` (stalled or not), and its Warning Event."""
    obj = settled(target, ns, kind, name)
    ready = condition(obj)
    assert (ready.get("status"), ready.get("reason")) == ("False", reason), (kind, name, ready)
    eventually(lambda: any(e["reason"] == reason and e["type"] == "Warning" and e["involvedObject"]["name"] == name
                           for e in get(target.kube, ns, "events")["items"]), timeout=15)
    return str(ready["message"])


def deleted_within(target: Target, ns: str, objects: dict[str, list[str]], seconds: float = 60) -> None:
    """Every object (by kind) gone with `kubectl delete --wait` within ``seconds`` in all: its finalizer was let
    go (a finalizer that stays fails the command at its timeout)."""
    deadline = time.monotonic() + seconds
    for kind, names in objects.items():
        left = max(1, int(deadline - time.monotonic()))
        target.kube("kubectl", "-n", ns, "delete", kind, *names, "--wait=true", f"--timeout={left}s")
    assert time.monotonic() < deadline
    for kind, names in objects.items():
        for name in names:
            assert not get(target.kube, ns, kind, name), (kind, name)


def left_on_the_remote(target: Target, ns: str, kind: str, name: str) -> str:
    """The Warning Event of a deleted object whose remote could not be built (its objects left there)."""
    found = eventually(lambda: [e for e in get(target.kube, ns, "events")["items"]
                                if e["involvedObject"]["name"] == name and e["involvedObject"]["kind"] == KINDS[kind]
                                and e["reason"] == SKIPPED[kind] and e["type"] == "Warning"], timeout=15)
    return str(found[0]["message"])


def as_if_installed(target: Target, ns: str, kind: str, name: str) -> None:
    """The status of an object that installed or applied something on its remote before its kubeconfig broke (a
    release recorded, an inventory): its deletion has something to clean up there, so it asks for its remote."""
    status: dict[str, Any] = {
        "hr": {"releaseName": name, "lastAttemptedReleaseAction": "install",
               "history": [{"revision": 1, "status": "deployed", "chartName": "tiny", "chartVersion": "0.1.0"}]},
        FLUX_HR: {"lastAttemptedReleaseAction": "install"},
        "csync": {"inventory": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "namespace": ns}]},
        FLUX_KS: {"inventory": {"entries": [{"id": f"{ns}_c__ConfigMap", "v": "v1"}]}},
    }[kind]
    target.kube("kubectl", "-n", ns, "patch", kind, name, "--subresource=status", "--type=merge", "-p",
                json.dumps({"status": status}))


def nothing_said_left(target: Target, ns: str, kind: str, name: str) -> None:
    """A deleted object that had nothing on its remote got no "left on the remote cluster" Warning (posted, when
    it is, before the finalizer goes)."""
    assert not [e for e in get(target.kube, ns, "events")["items"] if e["involvedObject"]["name"] == name
                and e["involvedObject"]["kind"] == KINDS[kind] and e["reason"] == SKIPPED[kind]]


def kubeconfig(server: str, *, token: str = "", **cluster: Any) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "c",
                           "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
                           "clusters": [{"name": "k", "cluster": {"server": server, **cluster}}],
                           "users": [{"name": "u", "user": {"token": token}}]})


def tokens_minted(target: Target, ns: str) -> list[str]:
    """Who asked the management cluster for a ServiceAccount token of ``ns`` (TokenRequest)."""
    return [who for who, attrs in target.sandbox.audit if attrs.namespace == ns and attrs.resource == "serviceaccounts"
            and attrs.subresource == "token"]


def test_a_kubeconfig_helmop_cannot_build_a_client_of_is_refused_and_deletable(
        target: Target, recorders: tuple[Recorder, Recorder]) -> None:
    """A server with a path that is no plain prefix (aiohttp refused to build a client of any path: ReconcileError,
    and a finalizer that never went), files of the operator's, a CA that is no certificate TLS loads, a URL of no
    host: InvalidKubeConfig, naming the Secret and its key, and nothing reaches the tenant's server."""
    secure, _ = recorders
    ns = target.namespace("kubeconfigs")
    token = f"tenant-token-{uuid.uuid4().hex}"
    garbage = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n").decode()
    ca = base64.b64encode(secure.ca.encode()).decode()
    variants = {
        "path": (kubeconfig(f"{secure.url}/k8s/../etc/passwd", token=token, **{"certificate-authority-data": ca}),
                 "not a plain prefix"),
        "ca-file": (kubeconfig(secure.url, token=token, **{
            "certificate-authority": "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"}), "names a file"),
        "garbage-ca": (kubeconfig(secure.url, token=token, **{"certificate-authority-data": garbage}),
                       "cannot be used"),
        "no-host": (kubeconfig("https:///etc/passwd", token=token), "not an http(s) URL of a host"),
    }
    for variant, (text, _) in variants.items():
        target.kube("kubectl", "-n", ns, "create", "secret", "generic", variant, f"--from-literal=value={text}")
    made: dict[str, list[str]] = {kind: [] for kind in KINDS}
    for variant in variants:
        # every variant as a helmop HelmRelease; the two that reached the client's code, as every kind
        kinds = KINDS if variant in ("path", "garbage-ca") else ["hr"]
        for kind, obj in remote_objects(variant, {"secretRef": {"name": variant}}).items():
            if kind in kinds:
                target.apply(ns, obj)
                made[kind].append(variant)
    for kind, names in made.items():
        for variant in names:
            message = refused(target, ns, kind, variant, "InvalidKubeConfig")
            assert f"Secret {ns}/{variant} (key 'value')" in message and variants[variant][1] in message, message
            assert token not in message
    assert not secure.requests, "the tenant's server was never asked"
    for kind in KINDS:  # "path" of each kind as if it had installed there before its kubeconfig broke
        as_if_installed(target, ns, kind, "path")
    deleted_within(target, ns, made)
    for kind in KINDS:
        said = left_on_the_remote(target, ns, kind, "path")
        assert "left on the remote cluster" in said and token not in said, said
        nothing_said_left(target, ns, kind, "garbage-ca")  # never installed: nothing left, none asked for
    assert not secure.requests
    assert "base_url" not in target.log(), "no error of the HTTP client's"


def workload_identity(target: Target, ns: str, name: str, address: str, ca: str, service_account: str) -> None:
    data = {"provider": "generic", "address": address, "serviceAccountName": service_account, **(
        {"ca.crt": ca} if ca else {})}
    target.kube("kubectl", "apply", "-f", "-", stdin=json.dumps(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": data}))


def test_a_workload_identity_of_a_missing_service_account_is_deletable(
        target: Target, recorders: tuple[Recorder, Recorder]) -> None:
    """kubeConfig.configMapRef naming a ServiceAccount that does not exist: no token (TokenRequestFailed, tried
    again: the account may come), or, under lockdown, none asked for (no address is allowed); one whose name
    would bend the TokenRequest's path: InvalidKubeConfig. Every kind is deleted all the same, and the tenant's
    server gets nothing."""
    secure, _ = recorders
    ns = target.namespace("identity")
    workload_identity(target, ns, "far", secure.url, secure.ca, "nobody")
    objects = remote_objects("ghost", {"configMapRef": {"name": "far"}})
    target.apply(ns, *objects.values())
    reason = "TokenRequestFailed" if target.mode == "default" else "TokenAddressNotAllowed"
    for kind in objects:
        message = failing(target, ns, kind, "ghost", reason)
        assert f"ConfigMap {ns}/far" in message or f"{ns}/nobody" in message, message
    if target.mode == "lockdown":
        assert not tokens_minted(target, ns), "no token asked for an address not allowed"
    # a name that would bend the TokenRequest's path (into another namespace's ServiceAccount)
    workload_identity(target, ns, "bent", secure.url, secure.ca, "../../kube-system/serviceaccounts/default")
    target.apply(ns, remote_objects("bent", {"configMapRef": {"name": "bent"}})["hr"])
    assert "is not an object name" in refused(target, ns, "hr", "bent", "InvalidKubeConfig")
    assert not [who for who, attrs in target.sandbox.audit if attrs.subresource == "token"
                and attrs.namespace == "kube-system"]
    for kind in objects:
        as_if_installed(target, ns, kind, "ghost")
    deleted_within(target, ns, {**{kind: ["ghost"] for kind in objects}, "hr": ["ghost", "bent"]})
    for kind in objects:
        assert "left on the remote cluster" in left_on_the_remote(target, ns, kind, "ghost")
    nothing_said_left(target, ns, "hr", "bent")
    assert not secure.requests


def test_a_service_account_token_goes_only_where_an_administrator_allows(
        target: Target, recorders: tuple[Recorder, Recorder]) -> None:
    """A tenant's ServiceAccount (it exists: a token could be minted) and an address the tenant writes. Over plain
    http never (as Flux: https only); under lockdown to no address an administrator did not list
    (--kubeconfig-token-addresses), refused before a token is minted. Without lockdown, Flux's default: the token
    goes to the address written (shown here: the recorder would see a token sent)."""
    secure, plain = recorders
    ns = target.namespace("lender")
    target.kube("kubectl", "-n", ns, "create", "serviceaccount", "deployer")
    workload_identity(target, ns, "plain", plain.url, "", "deployer")
    workload_identity(target, ns, "secure", secure.url, secure.ca, "deployer")
    target.apply(ns, helmrelease("plain", {"repository": {"url": target.charts.url, "name": "tiny",
                                                           "version": "0.1.0"}},
                                 kubeConfig={"configMapRef": {"name": "plain"}}, targetNamespace=ns))
    assert "must use https" in refused(target, ns, "hr", "plain", "InvalidKubeConfig")
    lent = remote_objects("lent", {"configMapRef": {"name": "secure"}})
    lent["hr"]["spec"].update(chart={"repository": {"url": target.charts.url, "name": "tiny", "version": "0.1.0"}},
                              targetNamespace=ns)
    target.apply(ns, *lent.values())
    if target.mode == "lockdown":
        for kind in lent:
            message = refused(target, ns, kind, "lent", "TokenAddressNotAllowed")
            assert f"ConfigMap {ns}/secure" in message and "--kubeconfig-token-addresses" in message, message
        assert not tokens_minted(target, ns), "refused before any token was minted"
        assert not secure.requests
    else:  # the recorder works: Flux's default lends the token to the address written
        eventually(lambda: secure.tokens(), timeout=60)
        assert all(token.startswith("Bearer ") for token in secure.tokens())
        assert condition(settled(target, ns, "hr", "lent")).get("status") == "False"
    assert not plain.requests, "nothing in the clear"
    deleted_within(target, ns, {"hr": ["plain"], **{kind: ["lent"] for kind in lent}})
    assert not plain.requests
    if target.mode == "lockdown":
        assert not secure.requests and not tokens_minted(target, ns)


def test_an_address_that_never_answers_holds_no_deletion(target: Target, recorders: tuple[Recorder, Recorder],
                                                         blackhole: Blackhole) -> None:
    """A kubeconfig naming an address the policy allows that takes connections and never answers: every kind is
    ClusterUnreachable (so its remote was asked), never installs nor applies anything, and is deleted within a
    bounded time all the same, as is a suspended HelmRelease whose status records a release there (Flux: nothing
    to clean up when suspended, never installed or with no inventory; no cluster is asked)."""
    secure, _ = recorders
    ns = target.namespace("blackhole")
    text = kubeconfig(blackhole.url, token=f"tenant-token-{uuid.uuid4().hex}",
                      **{"certificate-authority-data": base64.b64encode(secure.ca.encode()).decode()})
    target.kube("kubectl", "-n", ns, "create", "secret", "generic", "hole", f"--from-literal=value={text}")
    objects = remote_objects("hole", {"secretRef": {"name": "hole"}})
    quiet = remote_objects("quiet", {"secretRef": {"name": "hole"}})["hr"]
    quiet["spec"]["suspend"] = True
    target.apply(ns, *objects.values(), quiet)
    for kind in objects:
        message = failing(target, ns, kind, "hole", "ClusterUnreachable")
        assert blackhole.url.removeprefix("https://") in message, message
    assert blackhole.held, "the operator did connect to it"
    # the suspended one, as if it had installed there before it was suspended: its finalizer is on
    eventually(lambda: get(target.kube, ns, "hr", "quiet").get("metadata", {}).get("finalizers"), timeout=30)
    as_if_installed(target, ns, "hr", "quiet")
    deleted_within(target, ns, {**{kind: ["hole"] for kind in objects}, "hr": ["hole", "quiet"]}, seconds=45)
    assert not secure.requests


def test_a_token_for_another_audience_is_not_minted_under_lockdown(
        target: Target, recorders: tuple[Recorder, Recorder]) -> None:
    """A workload identity asking a token for the management cluster's own API audience, to be sent to the
    tenant's address: under lockdown refused before a token is minted (TokenAudienceNotAllowed, specific; one
    whose audience is its address goes on to the address check). Without lockdown, Flux's behaviour: minted for
    the audiences written and sent."""
    secure, _ = recorders
    ns = target.namespace("audience")
    target.kube("kubectl", "-n", ns, "create", "serviceaccount", "deployer")
    for name, audiences in (("foreign", "https://kubernetes.default.svc\n"), ("own", f"{secure.url}\n")):
        target.kube("kubectl", "apply", "-f", "-", stdin=json.dumps({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
            "data": {"provider": "generic", "address": secure.url, "ca.crt": secure.ca,
                     "serviceAccountName": "deployer", "audiences": audiences}}))
    chart = {"repository": {"url": target.charts.url, "name": "tiny", "version": "0.1.0"}}
    target.apply(ns, helmrelease("foreign", chart, kubeConfig={"configMapRef": {"name": "foreign"}},
                                 targetNamespace=ns),
                 helmrelease("own", chart, kubeConfig={"configMapRef": {"name": "own"}}, targetNamespace=ns))
    if target.mode == "lockdown":
        message = refused(target, ns, "hr", "foreign", "TokenAudienceNotAllowed")
        assert f"ConfigMap {ns}/foreign" in message and "https://kubernetes.default.svc" in message, message
        refused(target, ns, "hr", "own", "TokenAddressNotAllowed")  # its audience passes; no address is allowed
        assert not tokens_minted(target, ns), "refused before any token was minted"
        assert not secure.requests
    else:
        eventually(lambda: secure.tokens(), timeout=60)
        assert len(tokens_minted(target, ns)) >= 1
    deleted_within(target, ns, {"hr": ["foreign", "own"]})
    if target.mode == "lockdown":
        assert not secure.requests and not tokens_minted(target, ns)
