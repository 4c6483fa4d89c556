"""CRD conversion webhooks: when kube-apiserver would call one, and what the sandbox answers instead.

The sandbox keeps a custom object as it was written and serves it under every version of its CRD with only
``apiVersion`` changed. kube-apiserver converts between a request's version and the storage version, through
the CRD's webhook when ``spec.conversion.strategy`` is Webhook, so a request in any other version than the
storage one calls the webhook. The sandbox runs none: as for admission webhooks (:mod:`.network`), the
webhook's Service must select a workload the sandbox reports Ready, and then the objects are served as stored,
with a warning, provided the two versions' schemas agree (else the sandbox cannot stand in for the
conversion, and says so). A webhook given by ``url`` is not called either. Failures are worded as
kube-apiserver words a failed conversion (an error that is not a Status: 500, no reason).

A request in a version the CRD marks ``deprecated`` gets that version's ``deprecationWarning`` as a Warning
(every verb, as kube-apiserver's custom resource handler adds it), or kube-apiserver's own wording without one.
"""

from __future__ import annotations

from typing import Any

from .apiserver import CRD_KEY
from .errors import ApiError
from .kinds import ResourceType, version_priority
from .network import Network, Unreachable
from .store import Store

TIMEOUT = 30  # seconds: kube-apiserver's fixed timeout for conversion webhooks


def _schema(version: dict[str, Any]) -> Any:
    return (version.get("schema") or {}).get("openAPIV3Schema")


def deprecation(store: Store, rt: ResourceType) -> list[str]:
    """The Warning of a request in ``rt``'s version, if its CRD marks that version deprecated."""
    spec = (store.get(CRD_KEY, "", f"{rt.plural}.{rt.group}") or {}).get("spec") or {}
    versions = [v for v in spec.get("versions") or [] if v.get("served", True)]
    this: dict[str, Any] = next((v for v in versions if v.get("name") == rt.version), {})
    if not this.get("deprecated"):
        return []
    if this.get("deprecationWarning") is not None:
        return [str(this["deprecationWarning"])]
    said = f"{rt.group}/{rt.version} {rt.kind} is deprecated"
    current = sorted((str(v.get("name")) for v in versions if not v.get("deprecated")), key=version_priority)
    return [f"{said}; use {rt.group}/{current[0]} {rt.kind}" if current else said]


def check(store: Store, network: Network, rt: ResourceType, method: str) -> list[str]:
    """Warnings for a request in ``rt``'s version; raises ApiError where kube-apiserver's conversion would fail."""
    crd_name = f"{rt.plural}.{rt.group}"
    spec = (store.get(CRD_KEY, "", crd_name) or {}).get("spec") or {}
    conversion = spec.get("conversion") or {}
    versions = {v.get("name"): v for v in spec.get("versions") or []}
    storage = next((name for name, v in versions.items() if v.get("storage")), rt.version)
    if conversion.get("strategy") != "Webhook" or rt.version == storage or rt.version not in versions:
        return []
    source = storage if method in ("GET", "DELETE") else rt.version  # reads convert stored objects, writes the body
    failed = f"conversion webhook for {rt.group}/{source}, Kind={rt.kind} failed"
    client = (conversion.get("webhook") or {}).get("clientConfig") or {}
    try:
        answered_by = client.get("url") or network.reach(client.get("service") or {}, TIMEOUT)
    except Unreachable as exc:
        raise ApiError("", f"{failed}: {exc}") from None
    if _schema(versions[rt.version]) != _schema(versions[storage]):
        raise ApiError("", f"{failed}: the sandbox runs no conversion webhook, and serves objects as stored only "
                           f"between versions whose schemas agree ({rt.version} and {storage} differ)")
    return [network.not_run(f"the conversion webhook of {crd_name}", str(answered_by), "objects served as stored")]
