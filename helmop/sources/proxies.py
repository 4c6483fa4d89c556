"""spec.proxySecretRef: the HTTP(S) proxy a source is fetched through, from a Secret's ``address`` (required),
``username`` and ``password`` (Flux's keys).

Only http:// and https:// proxies: git (curl) and the operator's HTTP client both speak them; a SOCKS proxy is
refused by name. The proxy is the address the operator connects to, so it is the address the policy judges;
the source's own host is resolved by the proxy. Its credentials are kept out of messages."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, urlsplit

from helmop.infra.kube import Kube

from .errors import SourceError
from .secrets import decoded, secret_data

MAX_ADDRESS = 2048


@dataclass(frozen=True)
class Proxy:
    address: str  # scheme://host[:port], no credentials
    username: str = ""
    password: str = ""

    @property
    def host(self) -> str:
        return urlsplit(self.address).hostname or ""

    @property
    def port(self) -> int:
        parts = urlsplit(self.address)
        return parts.port or (443 if parts.scheme == "https" else 80)

    def url(self) -> str:
        """The proxy's URL with its credentials, for a client that takes them in it (git's http.proxy)."""
        if not self.username:
            return self.address
        scheme, _, rest = self.address.partition("://")
        return f"{scheme}://{quote(self.username, safe='')}:{quote(self.password, safe='')}@{rest}"

    def secrets(self) -> list[str]:
        return [v for v in (self.username, self.password) if len(v) >= 3]


def parse_proxy(data: dict[str, str], where: str) -> Proxy:
    address = decoded(data, "address").strip()
    if not address:
        raise SourceError("AuthenticationFailed", f"{where}: the Secret has no 'address'", transient=False)
    parts = urlsplit(address)
    if len(address) > MAX_ADDRESS or parts.scheme not in ("http", "https") or not parts.hostname \
            or parts.username is not None or parts.path not in ("", "/") or parts.query or parts.fragment:
        raise SourceError("AuthenticationFailed", f"{where}: the proxy address must be http:// or https:// with a "
                                                  "host and port only (credentials in username and password; SOCKS "
                                                  "is not supported)", transient=False)
    return Proxy(f"{parts.scheme}://{parts.netloc}", decoded(data, "username"), decoded(data, "password"))


async def proxy_of(kube: Kube, namespace: str, name: str) -> Proxy | None:
    """The proxy spec.proxySecretRef names (None without one)."""
    if not name:
        return None
    where = f"spec.proxySecretRef ({namespace}/{name})"
    return parse_proxy(await secret_data(kube, namespace, name, "spec.proxySecretRef"), where)
