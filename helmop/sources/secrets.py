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


async def secret_entries(kube: Kube, namespace: str, name: str, named_in: str) -> dict[str, bytes]:
    """Every entry of a Secret a spec names, decoded (keys, signatures' trust material); SecretNotFound as
    :func:`secret_data`."""
    data = await secret_data(kube, namespace, name, named_in)
    try:
        return {str(k): base64.b64decode(str(v), validate=True) for k, v in data.items()}
    except ValueError:
        raise SourceError("SecretInvalid", f"Secret {namespace}/{name} named in {named_in} holds an entry that is "
                                           "not base64", transient=False) from None


def decoded(data: dict[str, str], key: str) -> str:
    """The text of ``key`` in a Secret's data, "" when absent."""
    raw = data.get(key)
    return base64.b64decode(raw).decode() if raw else ""

