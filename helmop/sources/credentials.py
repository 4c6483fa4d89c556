"""A source's credentials, read from the Secrets its spec names: basic auth and a CA (``secretRef``), a CA
(``certSecretRef``), a proxy (``proxySecretRef``); a Bucket's access keys."""

from __future__ import annotations

from dataclasses import replace

from helmop.api.buckets import BucketSpec
from helmop.infra.kube import Kube

from .buckets import Keys
from .errors import SourceError
from .proxies import proxy_of
from .repositories import Credentials
from .secrets import secret_data


async def credentials(kube: Kube, namespace: str, secret_ref: str, named_in: str, cert_secret_ref: str = "",
                      proxy_secret_ref: str = "") -> Credentials:
    """Basic auth (and a CA) from ``secret_ref``, a CA from ``cert_secret_ref``, the proxy of
    ``proxy_secret_ref``: Secrets of ``namespace``."""
    proxy = await proxy_of(kube, namespace, proxy_secret_ref)
    if not secret_ref and not cert_secret_ref:
        return Credentials(proxy=proxy)
    data = await secret_data(kube, namespace, secret_ref, f"{named_in}.secretRef") if secret_ref else {}
    scope = f"{namespace}/{secret_ref}"
    if cert_secret_ref:
        cert = await secret_data(kube, namespace, cert_secret_ref, f"{named_in}.certSecretRef")
        if "tls.crt" in cert or "tls.key" in cert:
            raise SourceError("UnsupportedField", f"Secret {namespace}/{cert_secret_ref} ({named_in}.certSecretRef) "
                                                  "holds a client certificate (tls.crt/tls.key): helmop does not "
                                                  "implement client certificates; give ca.crt only", transient=False)
        data = {**data, "ca.crt": cert.get("ca.crt", "")}
        scope += f"+{cert_secret_ref}"
    return replace(Credentials.from_secret_data(data, scope=scope), proxy=proxy)


async def bucket_access(kube: Kube, namespace: str, spec: BucketSpec) -> tuple[Credentials, Keys]:
    """A Bucket's CA and proxy, and its access keys (none: anonymous requests)."""
    creds = await credentials(kube, namespace, "", "spec", spec.cert_secret_ref, spec.proxy_secret_ref)
    if not spec.secret_ref:
        return creds, Keys()
    data = await secret_data(kube, namespace, spec.secret_ref, "spec.secretRef")
    return creds, Keys.of(data, f"Secret {namespace}/{spec.secret_ref}")
