"""What helmop accepts of a tenant's kubeconfig (spec.kubeConfig), and of the field naming it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from helmop.api.errors import SpecError
from helmop.api.kubeconfigs import KubeConfigRef, check, parse_ref
from helmop.infra.clusters import Options, Remotes

CA = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="


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
    ({"server": "https://user:pw@k"}, None, "credentials"),
    (None, {"client-key-data": "not base64!"}, "not base64"),
])
def test_what_a_tenant_kubeconfig_may_not_carry(cluster: dict[str, Any] | None, user: dict[str, Any] | None,
                                                said: str) -> None:
    assert said in refusal(kubeconfig(cluster, user))


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
