"""What a ConfigSync's turn reads of the cluster, once: its postBuild variables (ConfigMaps and Secrets), which
kinds its objects are of (namespaced or not) and the objects as they are now."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

from helmop.api.manifests import Manifest
from helmop.api.sources import ConfigSyncSpec
from helmop.api.substitution import SubstitutionError, check_names
from helmop.decisions.sync import ObjectId, apply_order
from helmop.helm.inputs import InputError
from helmop.infra.kube import Kube, KubeError
from helmop.sources.decryption.keys import KeyInvalid, Keys
from helmop.sources.errors import SourceError
from helmop.sources.secrets import secret_entries

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


async def decryption_keys(ctx: Context, namespace: str, spec: ConfigSyncSpec) -> Keys | None:
    """The keys spec.decryption asks for: its Secret's (of the ConfigSync's own namespace), else the operator's
    key folder; None when it asks for no decryption. Keys are parsed off the event loop (RSA keys take a while)."""
    if spec.decryption is None:
        return None
    name = spec.decryption.secret_ref
    if not name:
        folder = ctx.services.keys_folder
        if folder and not ctx.tenancy.operator_keys_serve(namespace):
            return Keys(refusal=f"the operator's decryption keys are not for namespace {namespace} (an administrator "
                                "lists the namespaces they serve: --decryption-keys-namespaces); name a Secret of "
                                "this namespace's own keys in spec.decryption.secretRef")
        if not folder:
            return Keys(source="no keys (spec.decryption names no Secret, and the operator has no "
                               "--decryption-keys folder)")
        try:
            return await asyncio.to_thread(Keys.of_folder, folder)
        except KeyInvalid as exc:  # the administrator's to fix: tried again at the interval
            raise InputError("DecryptionFailed", f"--decryption-keys: {exc}", transient=True) from None
        except OSError as exc:
            raise InputError("DecryptionFailed", f"--decryption-keys: the operator's key folder cannot be read "
                                                 f"({exc.strerror or type(exc).__name__})", transient=True) from None
    try:
        entries = await secret_entries(ctx.services.kube, namespace, name, "spec.decryption.secretRef")
        return await asyncio.to_thread(Keys.of_entries, entries, f"Secret {namespace}/{name}")
    except SourceError as exc:
        raise InputError("DecryptionFailed", str(exc), transient=exc.transient) from None
    except KeyInvalid as exc:
        raise InputError("DecryptionFailed", f"spec.decryption.secretRef: {exc}", transient=False) from None


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
