"""Gathering what a reconcile needs: merged values (valuesFrom + values) and the resolved chart.

Everything read here is read through the API or the sources layer; the result carries the config
digest (chart reference + merged values + where the release goes) that decides whether helm needs
to run at all, and the secret strings to scrub from any message.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helmop.api.helmrelease import HelmReleaseSpec, RepositoryChart, SpecError, ValuesReference
from helmop.helm import values as helm_values
from helmop.sources.errors import SourceError
from helmop.sources.repositories import Credentials, Repositories, ResolvedChart

from .kube import Kube


class InputError(Exception):
    """Inputs cannot be gathered: ``reason`` for the condition; ``transient`` if a retry may help."""

    def __init__(self, reason: str, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.reason = reason
        self.transient = transient


@dataclass
class Inputs:
    chart: ResolvedChart
    chart_path: Path
    values: dict[str, Any]
    digest: str
    secrets: list[str] = field(default_factory=list)


def _typed(text: str) -> Any:
    """A --set style scalar: true/false/null and integers are typed, the rest stays a string."""
    low = text.strip()
    if low in ("true", "false"):
        return low == "true"
    if low == "null":
        return None
    if low.lstrip("-").isdigit() and not (len(low.lstrip("-")) > 1 and low.lstrip("-").startswith("0")):
        return int(low)
    return text


def _secret_strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if len(value) >= 4 else []
    if isinstance(value, dict):
        return [s for v in value.values() for s in _secret_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _secret_strings(v)]
    return []


async def _reference(kube: Kube, namespace: str, ref: ValuesReference) -> tuple[str | None, bool]:
    """(text of the key or None when optional and missing, whether it came from a Secret)."""
    plural = "configmaps" if ref.kind == "ConfigMap" else "secrets"
    obj = await kube.get(f"/api/v1/namespaces/{namespace}/{plural}/{ref.name}")
    if obj is None:
        if ref.optional:
            return None, False
        raise InputError("ValuesFromNotFound", f"{ref.kind} {namespace}/{ref.name} named in spec.valuesFrom "
                                               "does not exist", transient=True)
    data = obj.get("data") or {}
    if ref.values_key not in data:
        if ref.optional:
            return None, False
        raise InputError("ValuesKeyNotFound", f"{ref.kind} {namespace}/{ref.name} has no key "
                                              f"{ref.values_key!r}", transient=True)
    text = str(data[ref.values_key])
    if ref.kind == "Secret":
        text = base64.b64decode(text).decode(errors="replace")
    return text, ref.kind == "Secret"


async def merged_values(kube: Kube, namespace: str, spec: HelmReleaseSpec) -> tuple[dict[str, Any], list[str]]:
    values: dict[str, Any] = {}
    secrets: list[str] = []
    for ref in spec.values_from:
        text, from_secret = await _reference(kube, namespace, ref)
        if text is None:
            continue
        where = f"{ref.kind} {ref.name} key {ref.values_key}"
        try:
            if ref.target_path:
                piece = _typed(text)
                values = helm_values.set_path(values, ref.target_path, piece)
            else:
                piece = helm_values.parse_values(text, where)
                values = helm_values.merge(values, piece)
        except ValueError as exc:
            raise InputError("ValuesInvalid", str(exc)) from None
        if from_secret:
            secrets += _secret_strings(piece)
    return helm_values.merge(values, spec.values), secrets


async def credentials(kube: Kube, namespace: str, chart: RepositoryChart) -> Credentials:
    if not chart.secret_ref:
        return Credentials()
    secret = await kube.get(f"/api/v1/namespaces/{namespace}/secrets/{chart.secret_ref}")
    if secret is None:
        raise InputError("SecretNotFound", f"Secret {namespace}/{chart.secret_ref} named in "
                                           "spec.chart.repository.secretRef does not exist", transient=True)
    return Credentials.from_secret_data(secret.get("data") or {})


async def gather(kube: Kube, repos: Repositories, namespace: str, spec: HelmReleaseSpec) -> Inputs:
    if not isinstance(spec.chart, RepositoryChart):
        raise SpecError("SourceNotSupported", "charts from spec.chart.sourceRef need the GitRepository "
                                              "controller, which this helmop does not run")
    values, secrets = await merged_values(kube, namespace, spec)
    creds = await credentials(kube, namespace, spec.chart)
    chart = spec.chart
    try:
        resolved = await repos.resolve(chart.url, chart.name, chart.version, creds, chart.insecure)
        path = await repos.fetch(resolved, chart.url, creds, chart.insecure)
    except SourceError as exc:
        raise InputError(exc.reason, str(exc), transient=exc.transient) from None
    digest = helm_values.digest({"chart": [resolved.repository, resolved.name, resolved.version],
                                 "values": values, "release": [spec.release_name, spec.target_namespace]})
    return Inputs(resolved, path, values, digest, secrets + creds.secrets())


def scrub(message: str, secrets: list[str]) -> str:
    """``message`` with every known secret value replaced, longest first."""
    for secret in sorted(set(secrets), key=len, reverse=True):
        message = message.replace(secret, "***")
    return message
