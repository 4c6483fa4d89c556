"""``spec.kubeConfig`` of a HelmRelease or ConfigSync (Flux's field): which Secret holds the kubeconfig of the
remote cluster to act on, and what of a tenant's kubeconfig helmop accepts. Pure.

A tenant's kubeconfig is hostile input read by the operator's process: it may name nothing on the operator's
disk (a ``tokenFile`` or ``certificate-authority`` path would hand the operator's own files, its service
account token among them, to a server of the tenant's choosing), runs no program unless the operator allows
exec plugins (``--insecure-kubeconfig-exec``, Flux's flag), skips no TLS verification unless allowed
(``--insecure-kubeconfig-tls``), and carries nothing the helm process and helmop's client would read
differently (a proxy, an impersonation, a TLS server name): one identity, one server, for both. Its server is
an http(s) URL of a host name or address and a port, with at most a plain path prefix (a proxy's, as Rancher's
``/k8s/clusters/<id>``: helmop puts it before every request's path, as client-go does), and its certificates and
key are PEM: a kubeconfig helmop cannot build a
client of is ``InvalidKubeConfig``, never an error of the client's.

A ServiceAccount token minted for a remote (``configMapRef``, Flux 2.7's workload identity) is sent only over
https, and only to an address the operator allows (:class:`TokenAddresses`, ``--kubeconfig-token-addresses``):
the token leaves the cluster, so under multi-tenancy an administrator, not a tenant, says where it may go, and
the token is for that address alone (:func:`check_audiences`)."""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import yaml

from .errors import SpecError

MAX_KUBECONFIG = 1 << 20  # a kubeconfig is a few KiB; what is parsed is bounded
SECRET_KEYS = ("value", "value.yaml")  # Flux's defaults, in this order, when spec.kubeConfig.secretRef.key is unset
CLUSTER_LABEL = "helmop.dev/cluster"  # on the kubeconfig Secret: the cluster's name in views and metrics
# Paths to files on the reader's disk, in cluster and user entries: never followed for a tenant.
_FILE_FIELDS = ("certificate-authority", "client-certificate", "client-key", "tokenFile")
# Read by helm's client-go but not by helmop's client: refused, so that both act as the same identity.
_UNSUPPORTED = {"proxy-url": "a proxy", "tls-server-name": "a TLS server name", "as": "an impersonated user",
                "as-uid": "an impersonated uid", "as-groups": "impersonated groups",
                "as-user-extra": "impersonation extras", "auth-provider": "an auth-provider (removed from kubectl)",
                "username": "basic authentication", "password": "basic authentication"}
# PEM blocks each *-data field must hold (client-go reads PEM only)
_PEM = {"certificate-authority-data": ("CERTIFICATE",), "client-certificate-data": ("CERTIFICATE",),
        "client-key-data": ("PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY")}
# scheme, host (a DNS name, an IPv4 address or a bracketed IPv6 one), port, and what follows
_URL = re.compile(r"(?:(?P<scheme>[a-z]+)://)?(?P<host>\[[0-9a-f:.]+\]|[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?)"
                  r"(?::(?P<port>[0-9]{1,5}))?(?P<rest>[/?#].*)?", re.IGNORECASE | re.DOTALL)
_PATH = re.compile(r"(/[A-Za-z0-9._~-]+)*/?")  # a proxy's prefix: plain segments (and none "." or "..")
_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?", re.IGNORECASE)


@dataclass(frozen=True)
class KubeConfigRef:
    """spec.kubeConfig: a Secret's key (``key`` "": Flux's defaults), or a ConfigMap (Flux 2.7's workload identity)."""

    secret: str = ""
    key: str = ""
    config_map: str = ""

    @property
    def source(self) -> tuple[str, str]:
        """(kind, name) of the object it is read from: a change to it is a change of the target."""
        return ("ConfigMap", self.config_map) if self.config_map else ("Secret", self.secret)


def parse_ref(raw: Any) -> KubeConfigRef | None:
    """spec.kubeConfig, checked: exactly one of secretRef and configMapRef, each with a name."""
    if not raw:
        return None
    if not isinstance(raw, dict):
        raise SpecError("InvalidSpec", "spec.kubeConfig must be a map with secretRef or configMapRef")
    secret, config_map = raw.get("secretRef"), raw.get("configMapRef")
    if bool(secret) == bool(config_map):
        raise SpecError("InvalidSpec", "spec.kubeConfig takes exactly one of secretRef and configMapRef")
    ref = secret or config_map
    if not isinstance(ref, dict):
        raise SpecError("InvalidSpec", "spec.kubeConfig.secretRef and configMapRef are maps with a name")
    name = str(ref.get("name") or "")
    if not name:
        raise SpecError("InvalidSpec", f"spec.kubeConfig.{'secretRef' if secret else 'configMapRef'}.name is required")
    if config_map:
        return KubeConfigRef(config_map=name)
    return KubeConfigRef(secret=name, key=str(ref.get("key") or ""))


@dataclass(frozen=True)
class Checked:
    """What a tenant's kubeconfig names: its current context's API server, and whether it runs a plugin."""

    server: str
    host: str
    port: int
    exec_plugin: bool


def check(text: str, *, allow_exec: bool, allow_insecure: bool, where: str) -> Checked:
    """SpecError ``InvalidKubeConfig`` unless ``text`` is a kubeconfig helmop may act with (see the module)."""
    if len(text) > MAX_KUBECONFIG:
        raise _invalid(where, f"is larger than {MAX_KUBECONFIG >> 10} KiB")
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise _invalid(where, f"is not YAML: {str(exc).splitlines()[0][:200]}") from None
    if not isinstance(doc, dict):
        raise _invalid(where, "is not a kubeconfig (a map with clusters, users and contexts)")
    context = _entry(doc, "contexts", str(doc.get("current-context") or ""), where, "current-context")
    cluster = _entry(doc, "clusters", str(context.get("cluster") or ""), where, "its context's cluster")
    user = _entry(doc, "users", str(context.get("user") or ""), where, "its context's user") \
        if context.get("user") else {}
    for section, entry in (("cluster", cluster), ("user", user)):
        _refuse_fields(entry, section, where)
    if cluster.get("insecure-skip-tls-verify") and not allow_insecure:
        raise _invalid(where, "skips TLS verification (insecure-skip-tls-verify), which this operator refuses "
                              "(--insecure-kubeconfig-tls allows it)")
    if user.get("exec") and not allow_exec:
        raise _invalid(where, "runs an exec credential plugin, which this operator refuses (--insecure-kubeconfig-exec "
                              "allows it); give a token or a client certificate")
    _pem(cluster, "certificate-authority-data", where)
    _pem(user, "client-certificate-data", where)
    _pem(user, "client-key-data", where)
    return _server(str(cluster.get("server") or ""), bool(user.get("exec")), where)


def _entry(doc: dict[str, Any], section: str, name: str, where: str, what: str) -> dict[str, Any]:
    if not name:
        raise _invalid(where, f"names no {what}")
    for item in doc.get(section) or []:
        key = section[:-1]
        if isinstance(item, dict) and str(item.get("name")) == name and isinstance(item.get(key) or {}, dict):
            return dict(item.get(key) or {})
    raise _invalid(where, f"has no {section[:-1]} named {name[:100]!r} ({what})")


def _refuse_fields(entry: dict[str, Any], section: str, where: str) -> None:
    for field in _FILE_FIELDS:
        if entry.get(field):
            raise _invalid(where, f"names a file ({section} {field}): a kubeconfig given in a Secret must carry "
                                  f"everything inline ({field}-data, token)" if field != "tokenFile" else
                           f"names a file ({section} tokenFile): give the token inline")
    for field, what in _UNSUPPORTED.items():
        if entry.get(field):
            raise _invalid(where, f"sets {what} ({section} {field}), which helmop does not take from a tenant's "
                                  "kubeconfig")


def _pem(entry: dict[str, Any], name: str, where: str) -> None:
    """``name`` (a *-data field), when set, is base64 of the PEM block a TLS library will be given."""
    if not entry.get(name):
        return
    try:
        text = base64.b64decode(str(entry[name]), validate=True).decode("ascii", errors="replace")
    except (binascii.Error, ValueError):
        raise _invalid(where, f"{name} is not base64") from None
    if not any(f"-----BEGIN {block}-----" in text and f"-----END {block}-----" in text for block in _PEM[name]):
        raise _invalid(where, f"{name} is not a PEM {_PEM[name][0].lower()}")


def _server(server: str, exec_plugin: bool, where: str) -> Checked:
    if not server:
        raise _invalid(where, "names no server (its context's cluster)")
    shown = repr(server[:200])
    url = _URL.fullmatch(server)
    if url is None or not url["scheme"]:
        raise _invalid(where, f"server {shown} is not an http(s) URL of a host")
    scheme, host, port = url["scheme"].lower(), _host(url["host"]), int(url["port"] or 0)
    if scheme not in ("https", "http"):
        raise _invalid(where, f"server {shown} is not an http(s) URL")
    if not host or (url["port"] is not None and not 0 < port < 65536):
        raise _invalid(where, f"server {shown} names no valid host and port")
    path = url["rest"] or ""
    if not _PATH.fullmatch(path) or {".", ".."} & set(path.split("/")):
        raise _invalid(where, f"server {shown} has a query, a fragment or a path that is not a plain prefix (a "
                              "proxy's, as /k8s/clusters/c-1)")
    port = port or (443 if scheme == "https" else 80)
    return Checked(server=server.rstrip("/"), host=host, port=port, exec_plugin=exec_plugin)


def _host(raw: str) -> str:
    """The host of a URL, checked: an IP address or a DNS name ("" when it is neither)."""
    if raw.startswith("["):
        try:
            return str(ipaddress.IPv6Address(raw[1:-1]))
        except ValueError:
            return ""
    if raw.replace(".", "").isdigit():
        try:
            return str(ipaddress.IPv4Address(raw))
        except ValueError:
            return ""
    return raw.lower() if all(_LABEL.fullmatch(label) for label in raw.split(".")) else ""


def token_server(address: str, where: str) -> Checked:
    """The API server a minted token is sent to, read from a workload identity's ``address`` as Flux reads it (no
    scheme: https; only its host and port are kept, the default port 443), https only: a token never travels in
    the clear. SpecError InvalidKubeConfig otherwise."""
    shown = repr(address[:200])
    url = _URL.fullmatch(address.strip())
    host = _host(url["host"]) if url else ""
    if url is None or not host or not 0 < int(url["port"] or 443) < 65536:
        raise SpecError("InvalidKubeConfig", f"{where}: address {shown} is not a host or an https URL")
    if (url["scheme"] or "https").lower() != "https":
        raise SpecError("InvalidKubeConfig", f"{where}: address {shown} must use https (a ServiceAccount token is "
                                             "never sent in the clear)")
    port = int(url["port"] or 443)
    shown_host = f"[{host}]" if ":" in host else host
    return Checked(server=f"https://{shown_host}:{port}", host=host, port=port, exec_plugin=False)


def check_audiences(audiences: Iterable[str], address: str, where: str) -> None:
    """Under multi-tenancy a token is minted only for the cluster it is sent to: each of a workload identity's
    ``audiences`` must name its ``address`` (Flux's default audience), as written or as the same https host and
    port; else a tenant could mint a token another API (the management cluster's own) accepts and send it to an
    allowed address. SpecError TokenAudienceNotAllowed (InvalidKubeConfig for an address that is none)."""
    server = token_server(address, where).server
    for audience in audiences:
        if audience.strip().rstrip("/") != address.strip().rstrip("/") and _server_of(audience) != server:
            raise SpecError("TokenAudienceNotAllowed", f"{where}: audience {audience[:200]!r} is not its address "
                                                       f"{address[:200]!r}: under multi-tenancy a ServiceAccount "
                                                       "token is minted only for the cluster it is sent to (leave "
                                                       "audiences unset: the address is the audience)")


def _server_of(audience: str) -> str:
    try:
        return token_server(audience, "").server
    except SpecError:
        return ""


@dataclass(frozen=True)
class TokenAddresses:
    """``--kubeconfig-token-addresses``: where ServiceAccount tokens minted for remote clusters may be sent. Each
    entry is a host (any port), a host:port or an https URL of one; ``*`` is any address. Unset: any, as Flux, or
    none under multi-tenancy (--no-cross-namespace-refs or --default-service-account), as a tenant would send its
    namespace's tokens out of the cluster to an address of its choosing."""

    entries: frozenset[tuple[str, int]] = frozenset()
    everywhere: bool = False  # '*'

    @classmethod
    def parse(cls, values: Iterable[str]) -> TokenAddresses:
        """From the flag's values (repeated, comma-separated; "" for none); ValueError for an entry that is not
        an address."""
        entries: set[tuple[str, int]] = set()
        listed = [item.strip() for value in values for item in value.split(",") if item.strip()]
        for item in listed:
            if item == "*":
                continue
            url = _URL.fullmatch(item)
            host = _host(url["host"]) if url else ""
            if url is None or not host or (url["rest"] or "/") != "/" or (url["scheme"] or "https").lower() != "https" \
                    or (url["port"] is not None and not 0 < int(url["port"]) < 65536):
                raise ValueError(f"{item[:200]!r} is not a host, host:port or https URL")
            entries.add((host, int(url["port"] or (443 if url["scheme"] else 0))))
        return cls(frozenset(entries), "*" in listed)

    def allows(self, server: Checked) -> bool:
        return self.everywhere or (server.host, 0) in self.entries or (server.host, server.port) in self.entries

    def describe(self) -> str:
        if self.everywhere:
            return "any address"
        shown = sorted(f"{host}:{port}" if port else host for host, port in self.entries)
        return ", ".join(shown[:10]) + (", ..." if len(shown) > 10 else "") if shown else "none"


def _invalid(where: str, why: str) -> SpecError:
    return SpecError("InvalidKubeConfig", f"the kubeconfig in {where} {why}")
