"""GitRepository and ConfigSync specs (helmop.dev/v1alpha1), parsed and validated."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .durations import duration_field
from .errors import SpecError
from .settings import SOURCE_INTERVAL

DEFAULT_INTERVAL = SOURCE_INTERVAL


@dataclass(frozen=True)
class GitRepositorySpec:
    url: str
    branch: str = ""
    tag: str = ""
    semver: str = ""
    commit: str = ""
    interval: float = DEFAULT_INTERVAL
    timeout: float = 60.0
    secret_ref: str = ""
    webhook_secret_ref: str = ""
    suspend: bool = False


@dataclass(frozen=True)
class ConfigSyncSpec:
    source_name: str
    path: str
    source_namespace: str = ""  # "" = the ConfigSync's
    service_account_name: str = ""
    target_namespace: str = ""
    interval: float = DEFAULT_INTERVAL
    prune: bool = True
    suspend: bool = False


def _seconds(spec: dict[str, Any], key: str, default: float) -> float:
    return duration_field(spec, key, default) or default


def parse_git_repository(spec: dict[str, Any]) -> GitRepositorySpec:
    url = str(spec.get("url") or "")
    if not url:
        raise SpecError("InvalidSpec", "spec.url is required")
    ref = spec.get("ref") or {}
    if not isinstance(ref, dict):
        raise SpecError("InvalidSpec", "spec.ref must be a map")
    chosen = [k for k in ("tag", "semver", "commit") if ref.get(k)]
    if len(chosen) > 1:
        raise SpecError("InvalidSpec", f"spec.ref takes one of tag, semver or commit, not {' and '.join(chosen)}")
    secret = spec.get("secretRef") or {}
    webhook = spec.get("webhook")
    hook_secret = (webhook.get("secretRef") or {}) if isinstance(webhook, dict) else {}
    return GitRepositorySpec(
        url=url, branch=str(ref.get("branch") or ""), tag=str(ref.get("tag") or ""),
        semver=str(ref.get("semver") or ""), commit=str(ref.get("commit") or ""),
        interval=_seconds(spec, "interval", DEFAULT_INTERVAL), timeout=_seconds(spec, "timeout", 60.0),
        secret_ref=str(secret.get("name", "")) if isinstance(secret, dict) else "",
        webhook_secret_ref=str(hook_secret.get("name", "")) if isinstance(hook_secret, dict) else "",
        suspend=bool(spec.get("suspend", False)))


def parse_config_sync(spec: dict[str, Any]) -> ConfigSyncSpec:
    source = spec.get("sourceRef") or {}
    if not isinstance(source, dict) or not source.get("name"):
        raise SpecError("InvalidSpec", "spec.sourceRef.name is required")
    kind = str(source.get("kind") or "GitRepository")
    if kind != "GitRepository":
        raise SpecError("InvalidSpec", f"spec.sourceRef.kind must be GitRepository, not {kind!r}")
    return ConfigSyncSpec(source_name=str(source["name"]), path=str(spec.get("path") or ""),
                          source_namespace=str(source.get("namespace") or ""),
                          service_account_name=str(spec.get("serviceAccountName") or ""),
                          target_namespace=str(spec.get("targetNamespace") or ""),
                          interval=_seconds(spec, "interval", DEFAULT_INTERVAL), prune=bool(spec.get("prune", True)),
                          suspend=bool(spec.get("suspend", False)))
