"""An ImageRepository's registry credentials: the entry of its dockerconfigjson Secret (spec.secretRef) for the
image's registry, a CA (spec.certSecretRef) and a proxy (spec.proxySecretRef)."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import replace
from urllib.parse import urlsplit

from helmop.api.images import DOCKER_HUB, ImageRepositorySpec
from helmop.infra.kube import Kube
from helmop.sources.credentials import credentials
from helmop.sources.errors import SourceError
from helmop.sources.repositories import Credentials
from helmop.sources.secrets import decoded, secret_data

_HUB = {DOCKER_HUB, "docker.io", "registry-1.docker.io"}


async def registry_credentials(kube: Kube, namespace: str, spec: ImageRepositorySpec) -> Credentials:
    base = await credentials(kube, namespace, "", "spec", spec.cert_secret_ref, spec.proxy_secret_ref)
    if not spec.secret_ref:
        return base
    data = await secret_data(kube, namespace, spec.secret_ref, "spec.secretRef")
    username, password = login(data, spec.image.host, f"Secret {namespace}/{spec.secret_ref}")
    scope = f"{namespace}/{spec.secret_ref}" + (f"+{spec.cert_secret_ref}" if spec.cert_secret_ref else "")
    return replace(base, username=username, password=password, scope=scope)


def login(data: dict[str, str], host: str, what: str) -> tuple[str, str]:
    """(username, password) for ``host`` from a Secret's ``.dockerconfigjson`` (its ``auths`` entry for the host,
    ``username``/``password`` or ``auth``), or from plain ``username``/``password`` entries; none when the Secret
    has no entry for the host (anonymous requests, as Docker's and Flux's clients make them)."""
    if ".dockerconfigjson" not in data:
        return decoded(data, "username"), decoded(data, "password")
    try:
        auths = json.loads(decoded(data, ".dockerconfigjson")).get("auths") or {}
    except (ValueError, AttributeError):
        auths = None
    if not isinstance(auths, dict):
        raise SourceError("AuthenticationFailed", f"{what}: .dockerconfigjson is not a Docker config (auths)",
                          transient=False)
    wanted = _HUB if host in _HUB else {host}
    for server, entry in auths.items():
        if _host(str(server)) in wanted and isinstance(entry, dict):
            return _entry(entry, what)
    return "", ""


def _host(server: str) -> str:
    return urlsplit(server if "://" in server else f"//{server}").netloc


def _entry(entry: dict[str, object], what: str) -> tuple[str, str]:
    if entry.get("username") or entry.get("password"):
        return str(entry.get("username") or ""), str(entry.get("password") or "")
    try:
        user, _, password = base64.b64decode(str(entry.get("auth") or ""), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        raise SourceError("AuthenticationFailed", f"{what}: an auth entry of .dockerconfigjson is not base64 of "
                                                  "user:password", transient=False) from None
    return user, password
