"""A Provider resolved for one delivery: its spec with its Secrets read (address, token, username/password,
headers, proxy, TLS), read at each delivery so a rotated token is used at once. What the Secrets hold is returned
too, for masking: it never appears in a message."""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import yaml

from helmop.api.errors import SpecError
from helmop.api.notifications import ProviderSpec, check_url
from helmop.infra.kube import Kube
from helmop.sources.errors import SourceError
from helmop.sources.secrets import decoded, secret_data

from .outbox import Connection
from .payloads import PayloadError, Target

_HEADERS = 64  # entries of a Secret's headers


@dataclass(frozen=True)
class Resolved:
    target: Target
    connection: Connection
    secrets: list[str] = field(default_factory=list)  # every value read from the Provider's Secrets


async def _data(kube: Kube, namespace: str, name: str, field_name: str) -> dict[str, str]:
    if not name:
        return {}
    try:
        data = await secret_data(kube, namespace, name, field_name)
    except SourceError as exc:
        raise PayloadError(str(exc)) from None
    try:
        return {key: decoded(data, key) for key in data}
    except (ValueError, UnicodeDecodeError):
        raise PayloadError(f"Secret {namespace}/{name} named in {field_name} holds a value that is not text") from None


def _headers(text: str) -> dict[str, str]:
    """The Secret's ``headers``: a YAML map (``Name: value`` lines are one)."""
    if not text:
        return {}
    try:
        parsed = yaml.safe_load(text)
    except yaml.YAMLError:
        parsed = None
    if not isinstance(parsed, dict) or len(parsed) > _HEADERS:
        raise PayloadError(f"the Secret's headers must be a map of at most {_HEADERS} header names to values")
    headers = {str(k): str(v) for k, v in parsed.items()}
    if any(not k or any(c in k + v for c in "\r\n") for k, v in headers.items()):
        raise PayloadError("the Secret's headers must not hold line breaks")
    return headers


def _tls(data: dict[str, str]) -> ssl.SSLContext | None:
    """A TLS context from a certSecretRef's ``ca.crt`` (trusted besides the system's) and ``tls.crt``/``tls.key``
    (a client certificate)."""
    ca, cert, key = data.get("ca.crt") or data.get("caFile", ""), data.get("tls.crt", ""), data.get("tls.key", "")
    if not (ca or cert):
        return None
    context = ssl.create_default_context()
    try:
        if ca:
            context.load_verify_locations(cadata=ca)
        if cert and key:
            # the ssl module loads a key pair only from files: written to a private file, read, removed at once
            with tempfile.TemporaryDirectory(prefix="helmop-tls-") as folder:
                path = os.path.join(folder, "pair.pem")
                with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as out:
                    out.write(cert.rstrip() + "\n" + key)
                context.load_cert_chain(path)
    except (ssl.SSLError, ValueError) as exc:
        raise PayloadError(f"certSecretRef's certificates cannot be used: {exc.__class__.__name__}") from None
    return context


def _proxy(spec: ProviderSpec, main: dict[str, str], proxy: dict[str, str]) -> tuple[str, aiohttp.BasicAuth | None]:
    """spec.proxySecretRef (address, username, password) over the Secret's ``proxy`` over spec.proxy."""
    address = proxy.get("address") or main.get("proxy") or spec.proxy
    if not address:
        return "", None
    try:
        check_url(address, "the proxy")
    except SpecError as exc:
        raise PayloadError(str(exc)) from None
    user, password = proxy.get("username", ""), proxy.get("password", "")
    return address, aiohttp.BasicAuth(user, password) if user else None


async def resolve(kube: Kube, namespace: str, spec: ProviderSpec, status_id: str = "", *, provider_uid: str = "",
                  alert: tuple[str, str, str] = ("", "", "")) -> Resolved:
    """The Provider ``spec`` of ``namespace`` with its Secrets read, for one delivery (``status_id``: a commit
    status's name; ``provider_uid`` and ``alert``: what some types key their messages by)."""
    main = await _data(kube, namespace, spec.secret_ref, "spec.secretRef")
    certs = await _data(kube, namespace, spec.cert_secret_ref, "spec.certSecretRef")
    proxy_data = await _data(kube, namespace, spec.proxy_secret_ref, "spec.proxySecretRef")
    secrets = [v for d in (main, proxy_data) for v in d.values() if v] + [certs.get("tls.key", "")]
    address = main.get("address") or spec.address
    if address and not spec.repository:  # a repository's address may be a clone address (ssh, git@)
        try:
            check_url(address, "the address")
        except SpecError as exc:
            raise PayloadError(str(exc)) from None
    if not main.get("token") and "githubAppID" in main:  # Flux's GitHub types take an App's keys: not helmop's
        raise PayloadError("the Secret holds a GitHub App's keys (githubAppID, ...), which helmop's notifications do "
                           "not use; give a token")
    proxy, proxy_auth = _proxy(spec, main, proxy_data)
    target = Target(type=spec.type, address=address, channel=spec.channel,
                    username=main.get("username") or spec.username, password=main.get("password", ""),
                    token=main.get("token", ""), headers=_headers(main.get("headers", "")), status_id=status_id,
                    provider_uid=provider_uid, alert=alert)
    connection = Connection(ssl=_tls(certs), proxy=proxy, proxy_auth=proxy_auth, timeout=spec.timeout)
    return Resolved(target, connection, [s for s in secrets if s])


def default_status_id(event_kind: str, event_name: str, provider: dict[str, Any]) -> str:
    """Flux's commit status name: kind/name/<the first 8 characters of the Provider's uid>, in lowercase."""
    uid = str((provider.get("metadata") or {}).get("uid") or "")
    return f"{event_kind}/{event_name}/{uid[:8]}".lower()


def host(address: str) -> str:
    """What a message says of an address: its host only (a webhook's path is its credential)."""
    with contextlib.suppress(ValueError):
        return urlsplit(address).hostname or "the provider"
    return "the provider"
