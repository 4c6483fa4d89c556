"""``spec.kubeConfig`` of a HelmRelease or ConfigSync (Flux's field): which Secret holds the kubeconfig of the
remote cluster to act on, and what of a tenant's kubeconfig helmop accepts. Pure.

A tenant's kubeconfig is hostile input read by the operator's process: it may name nothing on the operator's
disk (a ``tokenFile`` or ``certificate-authority`` path would hand the operator's own files, its service
account token among them, to a server of the tenant's choosing), runs no program unless the operator allows
exec plugins (``--insecure-kubeconfig-exec``, Flux's flag), skips no TLS verification unless allowed
(``--insecure-kubeconfig-tls``), and carries nothing the helm process and helmop's client would read
differently (a proxy, an impersonation, a TLS server name): one identity, one server, for both."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

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
    _base64(cluster, "certificate-authority-data", where)
    _base64(user, "client-certificate-data", where)
    _base64(user, "client-key-data", where)
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


def _base64(entry: dict[str, Any], field: str, where: str) -> None:
    if entry.get(field):
        try:
            base64.b64decode(str(entry[field]), validate=True)
        except (binascii.Error, ValueError):
            raise _invalid(where, f"{field} is not base64") from None


def _server(server: str, exec_plugin: bool, where: str) -> Checked:
    try:
        url = urlsplit(server)
        port = url.port or (443 if url.scheme == "https" else 80)
    except ValueError:
        raise _invalid(where, f"server {server[:200]!r} is not a URL") from None
    if url.scheme not in ("https", "http") or not url.hostname:
        raise _invalid(where, f"server {server[:200]!r} is not an http(s) URL")
    if url.username or url.password or url.query or url.fragment:
        raise _invalid(where, "server carries credentials, a query or a fragment")
    return Checked(server=server.rstrip("/"), host=url.hostname, port=port, exec_plugin=exec_plugin)


def _invalid(where: str, why: str) -> SpecError:
    return SpecError("InvalidKubeConfig", f"the kubeconfig in {where} {why}")
