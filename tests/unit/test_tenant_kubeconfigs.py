"""What helmop accepts of a tenant's kubeconfig (spec.kubeConfig), and of the field naming it."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from helmop_sandbox.tls import make_serving_cert

from helmop.api.errors import HelmopError, SpecError
from helmop.api.kinds import HELMOP
from helmop.api.kubeconfigs import KubeConfigRef, TokenAddresses, check, check_audiences, parse_ref, token_server
from helmop.api.status.configsync import ConfigSyncStatus
from helmop.api.status.helmrelease import HelmReleaseStatus
from helmop.controllers import configsyncs, helmreleases
from helmop.controllers.context import Memory
from helmop.controllers.handlers import closing
from helmop.controllers.outcome import DONE, FAILED, Outcome
from helmop.controllers.registration import Controller
from helmop.infra.clusters import MAX_REMOTES, MAX_REMOTES_PER_NAMESPACE, Options, Remotes

PEM = make_serving_cert()
CA = base64.b64encode(PEM.ca_pem).decode()


def kubeconfig(cluster: dict[str, Any] | None = None, user: dict[str, Any] | None = None, **top: Any) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "c",
                           "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
                           "clusters": [{"name": "k", "cluster": cluster or {"server": "https://10.0.0.1:6443",
                                                                             "certificate-authority-data": CA}}],
                           "users": [{"name": "u", "user": user or {"token": "t"}}], **top})


def refusal(text: str, **allow: bool) -> str:
    with pytest.raises(SpecError) as caught:
        check(text, allow_exec=allow.get("exec", False), allow_insecure=allow.get("tls", False), where="Secret a/b")
    assert caught.value.reason == "InvalidKubeConfig"
    return str(caught.value)


def test_a_self_contained_kubeconfig_is_accepted() -> None:
    found = check(kubeconfig(), allow_exec=False, allow_insecure=False, where="Secret a/b")
    assert (found.server, found.host, found.port, found.exec_plugin) == ("https://10.0.0.1:6443", "10.0.0.1", 6443,
                                                                         False)
    # a proxy's path prefix (Rancher's), put before every request's path by the client
    proxied = kubeconfig({"server": "https://rancher.example/k8s/clusters/c-1/", "certificate-authority-data": CA})
    found = check(proxied, allow_exec=False, allow_insecure=False, where="Secret a/b")
    assert (found.server, found.host, found.port) == ("https://rancher.example/k8s/clusters/c-1", "rancher.example",
                                                      443)


@pytest.mark.parametrize(("cluster", "user", "said"), [
    ({"server": "https://k", "certificate-authority": "/etc/ssl/ca.pem"}, None, "certificate-authority"),
    (None, {"tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"}, "tokenFile"),
    (None, {"client-certificate": "/root/.kube/cert", "client-key": "/root/.kube/key"}, "client-certificate"),
    (None, {"exec": {"command": "aws"}}, "exec credential plugin"),
    ({"server": "https://k", "insecure-skip-tls-verify": True}, None, "skips TLS verification"),
    ({"server": "https://k", "proxy-url": "http://p:3128"}, None, "a proxy"),
    (None, {"token": "t", "as": "system:admin"}, "an impersonated user"),
    (None, {"auth-provider": {"name": "gcp"}}, "auth-provider"),
    (None, {"username": "a", "password": "b"}, "basic authentication"),
    ({"server": "file:///etc/passwd"}, None, "not an http(s) URL"),
    ({"server": "https://user:pw@k"}, None, "not an http(s) URL of a host"),
    (None, {"client-key-data": "not base64!"}, "not base64"),
    # what a client would be built of and fail on (aiohttp: "base_url must have a trailing '/'"; ssl: no
    # certificate): said of the kubeconfig, never a client's error
    ({"server": "https://127.0.0.1:6443/a/../etc/passwd"}, None, "not a plain prefix"),
    ({"server": "https://k/./api"}, None, "not a plain prefix"),
    ({"server": "https://k/a%2f..%2fb"}, None, "not a plain prefix"),
    ({"server": "https://k?x=1"}, None, "a query, a fragment"),
    ({"server": "https://k#frag"}, None, "a query, a fragment"),
    ({"server": "https://k\n/x"}, None, "not an http(s) URL of a host"),
    ({"server": "https://ho st"}, None, "not an http(s) URL of a host"),
    ({"server": "https://a..b"}, None, "no valid host"),
    ({"server": "https://-a.b"}, None, "not an http(s) URL of a host"),
    ({"server": "https://999.1.1.1"}, None, "no valid host"),
    ({"server": "https://[::1"}, None, "not an http(s) URL of a host"),
    ({"server": "https://k:99999"}, None, "no valid host and port"),
    ({"server": "https://k:0"}, None, "no valid host and port"),
    ({"server": "/var/run/secrets/kubernetes.io/serviceaccount"}, None, "not an http(s) URL"),
    ({"server": "k:6443"}, None, "not an http(s) URL"),
    ({"server": "ftp://k"}, None, "not an http(s) URL"),
    ({"server": ""}, None, "names no server"),
    ({"server": "https://k", "certificate-authority-data": base64.b64encode(b"not a certificate").decode()}, None,
     "certificate-authority-data is not a PEM certificate"),
    ({"server": "https://k", "certificate-authority-data": base64.b64encode(b"\xff\xfe").decode()}, None,
     "certificate-authority-data is not a PEM certificate"),
    (None, {"client-certificate-data": CA, "client-key-data": CA}, "client-key-data is not a PEM private key"),
])
def test_what_a_tenant_kubeconfig_may_not_carry(cluster: dict[str, Any] | None, user: dict[str, Any] | None,
                                                said: str) -> None:
    assert said in refusal(kubeconfig(cluster, user))


@pytest.mark.parametrize(("server", "host", "port"), [
    ("https://api.east.example", "api.east.example", 443),
    ("https://API.East.example:6443/", "api.east.example", 6443),
    ("http://10.0.0.1", "10.0.0.1", 80),
    ("https://[fd00::1]:6443", "fd00::1", 6443),
])
def test_servers_at_their_root_are_accepted(server: str, host: str, port: int) -> None:
    found = check(kubeconfig({"server": server}), allow_exec=False, allow_insecure=False, where="w")
    assert (found.host, found.port) == (host, port)


def test_the_operators_flags_allow_exec_plugins_and_insecure_tls() -> None:
    check(kubeconfig(user={"exec": {"command": "aws"}}), allow_exec=True, allow_insecure=False, where="x")
    check(kubeconfig({"server": "https://k", "insecure-skip-tls-verify": True}), allow_exec=False,
          allow_insecure=True, where="x")


@pytest.mark.parametrize("text", ["", "[]", "a: [", "x" * (2 << 20), kubeconfig(**{"current-context": "other"})])
def test_what_is_not_a_kubeconfig(text: str) -> None:
    assert "Secret a/b" in refusal(text)


@pytest.mark.parametrize(("raw", "wanted"), [
    (None, None),
    ({"secretRef": {"name": "k"}}, KubeConfigRef(secret="k")),
    ({"secretRef": {"name": "k", "key": "config"}}, KubeConfigRef(secret="k", key="config")),
    ({"configMapRef": {"name": "c"}}, KubeConfigRef(config_map="c")),
])
def test_the_field_naming_it(raw: Any, wanted: KubeConfigRef | None) -> None:
    assert parse_ref(raw) == wanted


@pytest.mark.parametrize("raw", ["text", {}, {"secretRef": {"name": "a"}, "configMapRef": {"name": "b"}},
                                 {"secretRef": {}}, {"secretRef": "a"}])
def test_a_field_naming_nothing_usable(raw: Any) -> None:
    with pytest.raises(SpecError):
        parse_ref(raw or {"x": 1})


def test_remotes_are_kept_per_namespace_and_dropped_with_their_last_holder(tmp_path: Path) -> None:
    async def scenario() -> None:
        remotes = Remotes(Options())
        text = kubeconfig({"server": "https://127.0.0.1:1", "certificate-authority-data": CA})
        a = await remotes.acquire(("HelmRelease", "team-a", "x"), text, where="w")
        again = await remotes.acquire(("HelmRelease", "team-a", "y"), text, where="w")
        other = await remotes.acquire(("HelmRelease", "team-b", "x"), text, where="w")
        assert a is again and a is not other, "one client per namespace, never shared across tenants"
        assert a.kubeconfig.stat().st_mode & 0o077 == 0, "the kubeconfig file is private"
        await remotes.release(("HelmRelease", "team-a", "x"))
        assert a.kubeconfig.exists()
        await remotes.release(("HelmRelease", "team-a", "y"))
        assert not a.kubeconfig.exists() and len(remotes.by_key) == 1
        with pytest.raises(SpecError):
            await remotes.acquire(("HelmRelease", "team-a", "z"), kubeconfig({"server": "https://169.254.169.254"}),
                                  where="w")
        await remotes.close()

    asyncio.run(scenario())


@pytest.mark.parametrize(("address", "server"), [
    ("api.east.example", "https://api.east.example:443"),  # as Flux reads it: no scheme is https
    ("https://API.east.example:6443", "https://api.east.example:6443"),
    ("https://10.0.0.1:6443/some/path", "https://10.0.0.1:6443"),  # Flux keeps the host only
    ("[fd00::1]:6443", "https://[fd00::1]:6443"),
])
def test_a_workload_identitys_address(address: str, server: str) -> None:
    assert token_server(address, "ConfigMap a/b").server == server


@pytest.mark.parametrize(("address", "said"), [
    ("http://127.0.0.1:8080", "must use https"),
    ("ftp://k", "must use https"),
    ("https://ho st", "not a host"),
    ("https://k:99999", "not a host"),
    ("", "not a host"),
])
def test_a_workload_identity_address_that_gets_no_token(address: str, said: str) -> None:
    with pytest.raises(SpecError) as caught:
        token_server(address, "ConfigMap a/b")
    assert caught.value.reason == "InvalidKubeConfig" and said in str(caught.value) and "ConfigMap a/b" in str(
        caught.value)


def test_the_addresses_tokens_may_go_to() -> None:
    listed = TokenAddresses.parse(["api.east.example, 10.0.0.7:6443", "https://api.west.example"])
    allowed = {address: listed.allows(token_server(address, "w")) for address in (
        "https://api.east.example:6443", "api.east.example", "https://10.0.0.7:6443", "https://10.0.0.7:443",
        "https://api.west.example", "https://api.west.example:6443", "https://evil.example")}
    assert allowed == {"https://api.east.example:6443": True, "api.east.example": True,  # a host: any port
                       "https://10.0.0.7:6443": True, "https://10.0.0.7:443": False,  # host:port: that port
                       "https://api.west.example": True, "https://api.west.example:6443": False,  # a URL: its port
                       "https://evil.example": False}
    assert TokenAddresses.parse(["*"]).allows(token_server("evil.example", "w"))
    assert not TokenAddresses.parse([""]).allows(token_server("api.east.example", "w"))
    assert not TokenAddresses().allows(token_server("api.east.example", "w")), "nothing listed: none"
    assert TokenAddresses.parse([""]).describe() == "none"
    for bad in ("http://api.east.example", "https://a/path", "a b", "k:99999", "k:0", "user@k"):
        with pytest.raises(ValueError):
            TokenAddresses.parse([bad])


def test_no_token_is_minted_for_an_address_not_allowed() -> None:
    """The address is judged before the TokenRequest: a client that must never be asked shows it."""

    class Never:
        async def request(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            raise AssertionError("a token was asked for")

    async def scenario() -> None:
        for allowed, address, reason in ((TokenAddresses(), "https://api.east.example", "TokenAddressNotAllowed"),
                                         (TokenAddresses(everywhere=True), "http://127.0.0.1:1", "InvalidKubeConfig"),
                                         (TokenAddresses(everywhere=True), "https://169.254.169.254",
                                          "InvalidKubeConfig")):
            remotes = Remotes(Options(token_addresses=allowed))
            with pytest.raises(SpecError) as caught:
                await remotes.service_account_token(Never(), "team-a", "deployer", (),  # type: ignore[arg-type]
                                                    address=address, where="ConfigMap team-a/far")
            assert caught.value.reason == reason and "ConfigMap team-a/far" in str(caught.value), caught.value

    asyncio.run(scenario())


def test_a_client_that_cannot_be_built_is_an_invalid_kubeconfig() -> None:
    """What passes the text's checks but no TLS library loads (a PEM block holding garbage) is said of the
    kubeconfig when the remote is acquired, not as an error of a later request."""
    garbage = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n").decode()

    async def scenario() -> None:
        remotes = Remotes(Options())
        text = kubeconfig({"server": "https://127.0.0.1:1", "certificate-authority-data": garbage})
        with pytest.raises(SpecError) as caught:
            await remotes.acquire(("HelmRelease", "team-a", "x"), text, where="Secret team-a/k (key 'value')")
        assert caught.value.reason == "InvalidKubeConfig" and "Secret team-a/k" in str(caught.value)
        assert not remotes.by_key and not list(remotes._private().iterdir()), "nothing kept of it"
        await remotes.close()

    asyncio.run(scenario())


def test_one_namespace_cannot_use_up_every_tenants_remotes() -> None:
    """A limit per namespace under the operator's: a tenant with many distinct kubeconfigs is refused its own next
    one (ClusterLimit naming its namespace), while another tenant still gets remotes, up to the operator's limit."""
    assert 0 < MAX_REMOTES_PER_NAMESPACE < MAX_REMOTES and Options().namespace_limit == MAX_REMOTES_PER_NAMESPACE

    def distinct(i: int) -> str:
        return kubeconfig({"server": "https://127.0.0.1:1", "certificate-authority-data": CA}, {"token": f"t{i}"})

    async def scenario() -> None:
        remotes = Remotes(Options(limit=4, namespace_limit=2))
        for i in range(2):
            await remotes.acquire(("HelmRelease", "team-a", f"x{i}"), distinct(i), where="w")
        with pytest.raises(HelmopError) as caught:
            await remotes.acquire(("HelmRelease", "team-a", "x2"), distinct(2), where="w")
        assert caught.value.reason == "ClusterLimit" and caught.value.transient
        assert "namespace team-a" in str(caught.value), caught.value
        # a remote it already has is no new one; and the other tenants are not held by team-a
        await remotes.acquire(("HelmRelease", "team-a", "y"), distinct(0), where="w")
        for i, ns in enumerate(("team-b", "team-c")):
            await remotes.acquire(("HelmRelease", ns, "x"), distinct(i), where="w")
        with pytest.raises(HelmopError) as caught:  # the operator's own limit still stands
            await remotes.acquire(("HelmRelease", "team-d", "x"), distinct(0), where="w")
        assert caught.value.reason == "ClusterLimit" and "this operator already reaches 4" in str(caught.value)
        await remotes.release(("HelmRelease", "team-a", "x1"))  # one let go makes room
        await remotes.acquire(("HelmRelease", "team-d", "x"), distinct(0), where="w")
        # at both limits, a holder whose credential rotates moves to its new remote (its old one goes with it)
        rotated = await remotes.acquire(("HelmRelease", "team-b", "x"), distinct(7), where="w")
        assert remotes.held[("HelmRelease", "team-b", "x")][1] == rotated.digest and len(remotes.by_key) == 4
        await remotes.close()

    asyncio.run(scenario())


class FakeKube:
    """The management cluster as the finalizers read it: a kubeconfig Secret, no other HelmRelease."""

    def __init__(self, text: str) -> None:
        self.secret = {"metadata": {"name": "far"}, "data": {"value": base64.b64encode(text.encode()).decode()}}

    async def get(self, path: str) -> dict[str, Any] | None:
        return self.secret if path.endswith("/secrets/far") else None

    async def list(self, path: str) -> list[dict[str, Any]]:
        return []


class Events:
    def __init__(self) -> None:
        self.posted: list[tuple[str, str]] = []

    async def post(self, body: dict[str, Any], kind: str, reason: str, message: str) -> None:
        self.posted.append((kind, reason))


def test_a_deletion_with_nothing_to_clean_up_asks_for_no_remote() -> None:
    """With the operator's remotes full (every new one ClusterLimit), a deleted object that never installed, is
    suspended or has no inventory lets go at once (no remote asked for); one whose status records a release
    waits (ClusterLimit is tried again: its release is there to uninstall)."""
    text = kubeconfig({"server": "https://127.0.0.1:1", "certificate-authority-data": CA})
    remote = {"kubeConfig": {"secretRef": {"name": "far"}}}

    def body(kind: str, spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
        return {"apiVersion": "helmop.dev/v1alpha1", "kind": kind, "spec": {"interval": "1h", **spec, **remote},
                "metadata": {"name": "x", "namespace": "team-a", "uid": "u", "generation": 1},
                "status": status or {}}

    chart = {"chart": {"repository": {"url": "https://charts.example", "name": "tiny", "version": "0.1.0"}}}
    sync = {"sourceRef": {"name": "none"}, "path": "apps", "prune": True}

    async def scenario() -> None:
        events = Events()
        remotes = Remotes(Options(limit=0, namespace_limit=0))
        ctx: Any = SimpleNamespace(memory=Memory(lambda key: None),
                                   settings=SimpleNamespace(intervals=SimpleNamespace(deleted_together=0.0)),
                                   services=SimpleNamespace(remotes=remotes, kube=FakeKube(text), events=events))
        releases = Controller(HELMOP.helmrelease, HelmReleaseStatus, 0.0, helmreleases)
        syncs = Controller(HELMOP.configsync, ConfigSyncStatus, 0.0, configsyncs)

        async def finalized(controller: Controller, obj: dict[str, Any]) -> Outcome:
            turn = await closing(ctx, controller, obj)
            assert turn is not None
            return await controller.finalize(turn)

        assert await finalized(releases, body("HelmRelease", chart)) is DONE
        assert await finalized(releases, body("HelmRelease", {**chart, "suspend": True}, {
            "releaseName": "x", "history": [{"revision": 1, "status": "deployed"}]})) is DONE
        assert await finalized(syncs, body("ConfigSync", sync)) is DONE
        assert await finalized(syncs, body("ConfigSync", sync, {"inventory": []})) is DONE
        assert not events.posted and not remotes.by_key
        installed = body("HelmRelease", chart, {"releaseName": "x", "lastAttemptedReleaseAction": "install"})
        assert await finalized(releases, installed) is FAILED
        applied = {"inventory": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "namespace": "team-a"}]}
        assert await finalized(syncs, body("ConfigSync", sync, applied)) is FAILED
        assert events.posted == [("Warning", "ClusterLimit")] * 2
        await remotes.close()

    asyncio.run(scenario())


def test_audiences_under_lockdown_are_the_address_only() -> None:
    for audiences in ((), ("https://api.east.example:6443",), ("https://api.east.example:6443/",),
                      ("api.east.example:6443", "https://API.east.example:6443")):
        check_audiences(audiences, "https://api.east.example:6443", "ConfigMap a/far")
    for audiences in (("https://kubernetes.default.svc",), ("https://api.east.example:6443", "sts.amazonaws.com"),
                      ("https://api.east.example",), ("",)):
        with pytest.raises(SpecError) as caught:
            check_audiences(audiences, "https://api.east.example:6443", "ConfigMap a/far")
        assert caught.value.reason == "TokenAudienceNotAllowed" and "ConfigMap a/far" in str(caught.value)
