"""Reading the Secret a spec names, and credentials out of its ``data`` (base64 values)."""

from __future__ import annotations

import base64

from helmop.infra.kube import Kube

from .errors import SourceError


async def secret_data(kube: Kube, namespace: str, name: str, named_in: str) -> dict[str, str]:
    """The data of a Secret a spec names (``named_in``: the field); SecretNotFound (transient: it may be created)
    if absent."""
    secret = await kube.get(f"/api/v1/namespaces/{namespace}/secrets/{name}")
    if secret is None:
        raise SourceError("SecretNotFound", f"Secret {namespace}/{name} named in {named_in} does not exist",
                          transient=True)
    data: dict[str, str] = secret.get("data") or {}
    return data


def decoded(data: dict[str, str], key: str) -> str:
    """The text of ``key`` in a Secret's data, "" when absent."""
    raw = data.get(key)
    return base64.b64decode(raw).decode() if raw else ""
