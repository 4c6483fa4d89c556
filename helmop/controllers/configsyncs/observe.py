"""What a ConfigSync's turn reads of the cluster, once: its postBuild variables (ConfigMaps and Secrets), which
kinds its objects are of (namespaced or not) and the objects as they are now."""

from __future__ import annotations

import base64
from typing import Any

from helmop.api.manifests import Manifest
from helmop.api.sources import ConfigSyncSpec
from helmop.api.substitution import SubstitutionError, check_names
from helmop.decisions.sync import ObjectId, apply_order
from helmop.helm.inputs import InputError
from helmop.infra.kube import Kube, KubeError

from ..context import Context


async def variables(ctx: Context, namespace: str, spec: ConfigSyncSpec) -> tuple[dict[str, str], list[str]]:
    """spec.postBuild's variables (substituteFrom in order, then substitute), and the values that came from
    Secrets (masked wherever a message could quote them)."""
    found: dict[str, str] = {}
    secrets: list[str] = []
    for ref in spec.post_build.substitute_from:
        plural = "secrets" if ref.kind == "Secret" else "configmaps"
        obj = await ctx.services.kube.get(f"/api/v1/namespaces/{namespace}/{plural}/{ref.name}")
        if obj is None:
            if ref.optional:
                continue
            raise InputError("SubstituteFromNotFound", f"spec.postBuild.substituteFrom: {ref.kind} {namespace}/"
                                                       f"{ref.name} does not exist", transient=True)
        data = {str(k): str(v) for k, v in (obj.get("data") or {}).items()}
        if ref.kind == "Secret":
            data = {k: base64.b64decode(v).decode(errors="replace") for k, v in data.items()}
            secrets += [v for v in data.values() if len(v) >= 3]
        try:
            check_names(data)
        except SubstitutionError as exc:
            raise InputError("SubstituteFromInvalid", f"{ref.kind} {namespace}/{ref.name}: {exc}",
                             transient=False) from None
        found.update(data)
    return {**found, **dict(spec.post_build.substitute)}, secrets


async def scopes(kube: Kube, found: list[Manifest]) -> dict[tuple[str, str], bool]:
    """Whether the objects of each (apiVersion, kind) in ``found`` are namespaced; a kind the API does not serve
    yet is left out (its CRD comes in this same sync: checked again when applied)."""
    out: dict[tuple[str, str], bool] = {}
    for api_version, kind in {(item.api_version, item.kind) for item in found}:
        try:
            _plural, out[(api_version, kind)] = await kube.resource(api_version, kind)
        except KubeError as exc:
            if kind == "CustomResourceDefinition" or exc.status != 404:
                raise
    return out


async def path_of(kube: Kube, oid: ObjectId) -> str:
    return await kube.path_of(oid.api_version, oid.kind, oid.namespace, oid.name)


async def live(kube: Kube, oid: ObjectId) -> dict[str, Any] | None:
    """The object as it is now (None when absent, or not readable: then applying it fails anyway)."""
    try:
        return await kube.get(await path_of(kube, oid))
    except KubeError as exc:
        if exc.status in (403, 404):
            return None
        raise


async def objects(kube: Kube, ids: list[ObjectId]) -> dict[ObjectId, dict[str, Any] | None]:
    """Each object of ``ids`` as it is now (None: absent or not readable), read in apply order."""
    return {oid: await live(kube, oid) for oid in apply_order(ids)}
