"""`helmop run`'s flags, generated from the settings' metadata, and the settings built back from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from helmop.api.kubeconfigs import TokenAddresses
from helmop.api.settings import Settings
from helmop.api.tenancy import Tenancy
from helmop.cli import runflags
from helmop.cli.main import parser


def built(*args: str) -> Settings:
    return runflags.built(parser().parse_args(["run", *args]))


def test_no_flag_is_the_defaults() -> None:
    assert built() == Settings()


def test_each_flag_sets_its_setting() -> None:
    settings = built("-n", "a", "--namespace", "b", "--concurrency", "3", "--helm-cache-ttl", "1m",
                     "--helm-index-max-size", "1Mi", "--chart-mirror", "https://a=https://b", "--flux-api=current",
                     "--allow-file-git", "/srv", "--shards", "auto", "--default-service-account", "sa",
                     "--decryption-keys-namespaces", "x,y", "--kubeconfig-token-addresses", "*",
                     "--jenkins-chart-version", "1.2.3", "--webhook-port", "0", "--decryption-keys", "/keys")
    assert settings.namespaces == ("a", "b") and settings.helm.concurrency == 3
    assert (settings.helm.cache_ttl, settings.helm.index_max_size) == (60.0, 1 << 20)
    assert settings.helm.mirrors == (("https://a", "https://b"),)
    assert settings.flux.api and not settings.flux.removed_versions
    assert settings.sources.allow_file_git == (Path("/srv"),) and settings.sources.decryption_keys == Path("/keys")
    assert settings.leadership.shards_auto and settings.servers.webhook_port == 0
    assert settings.tenancy == Tenancy("sa", decryption_keys_namespaces=frozenset({"x", "y"}))
    assert settings.remotes.token_addresses == TokenAddresses.parse(["*"])
    assert settings.helm.jenkins_chart["repository"]["version"] == "1.2.3"
    assert built("-n", "a", "-A").namespaces == () and built("--flux-api").flux.removed_versions


def test_a_refused_value_names_its_flag() -> None:
    with pytest.raises(SystemExit, match=r"^helmop: --git-mirror takes FROM=TO"):
        built("--git-mirror", "nothing")
    with pytest.raises(SystemExit, match=r"^helmop: --decryption-keys-namespaces: "):
        built("--decryption-keys-namespaces", "Bad_NS")
