"""What changed in a HelmRelease's values between two revisions of its release, read from helm's release
records (the storage Secrets) with the reader's own rights, and never a value that came from a Secret.

A value is masked when its key lies under a path a ``valuesFrom`` Secret supplies (its ``targetPath``, or
every key of the document it merges), so an old revision's value of a since-rotated password is masked too;
whatever else still contains one of the Secrets' strings is masked by ``api.redaction``. When a Secret it
names cannot be read, which keys it supplies is unknown, and every value is masked (the keys still show); so is
every value of a release that decrypts SOPS values (spec.decryption)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from helmop.api.errors import SpecError
from helmop.api.helmrelease import HelmReleaseSpec, parse_spec
from helmop.api.objects import Resource
from helmop.api.redaction import MASK, redact
from helmop.helm import storage
from helmop.helm.errors import HelmError
from helmop.helm.inputs import InputError, values_pieces
from helmop.helm.values import parse_values
from helmop.infra.kube import Kube, KubeError

from .requests import Refused

SHOWN = 200  # characters of one value shown
MAX_KEYS = 2000  # changed keys listed (a values file is rarely a tenth of that)


@dataclass(frozen=True)
class Change:
    key: str  # dotted path; list indices in brackets
    old: str | None  # None: not set in that revision
    new: str | None


def flatten(values: Any, prefix: str = "") -> dict[str, Any]:
    """Leaf values by dotted path (``a.b[0].c``); an empty map or list is a leaf of its own."""
    if isinstance(values, dict) and values:
        return {k: v for key, value in values.items()
                for k, v in flatten(value, f"{prefix}.{key}" if prefix else str(key)).items()}
    if isinstance(values, list) and values:
        return {k: v for i, value in enumerate(values) for k, v in flatten(value, f"{prefix}[{i}]").items()}
    return {prefix: values}


def _under(key: str, paths: set[str]) -> bool:
    return any(key == p or key.startswith((f"{p}.", f"{p}[")) for p in paths)


def changes(old: dict[str, Any], new: dict[str, Any], hidden: set[str] | None, secrets: list[str]) -> list[Change]:
    """The keys whose values differ; ``hidden``: the paths Secrets supply (None: unknown, mask every value)."""
    before, after = flatten(old), flatten(new)

    def shown(key: str, value: Any) -> str:
        if hidden is None or _under(key, hidden):
            return MASK
        text = json.dumps(value, ensure_ascii=False)
        return redact(text if len(text) <= SHOWN else text[:SHOWN] + "…", secrets)

    out = []
    for key in sorted(before.keys() | after.keys()):
        if key in before and key in after and before[key] == after[key]:
            continue
        out.append(Change(key, shown(key, before[key]) if key in before else None,
                          shown(key, after[key]) if key in after else None))
    return out[:MAX_KEYS]


async def _secret_paths(kube: Kube, namespace: str, spec: HelmReleaseSpec) -> tuple[set[str] | None, list[str]]:
    """The value paths the HelmRelease's valuesFrom Secrets supply, and their strings (None when unknown: also
    for a release that decrypts SOPS values, whose plaintext the UI never decrypts to know where it went)."""
    if spec.decryption is not None:
        return None, []
    hidden = {ref.target_path for ref in spec.values_from if ref.kind == "Secret" and ref.target_path}
    if not any(ref.kind == "Secret" for ref in spec.values_from):
        return hidden, []
    try:
        pieces, secrets = await values_pieces(kube, namespace, spec)
    except (KubeError, InputError):  # not readable by this reader, or gone: what they supply is unknown
        return None, []
    for ref, text in pieces:
        if ref.kind == "Secret" and not ref.target_path:
            try:
                hidden |= set(flatten(parse_values(text, ref.name)))
            except ValueError:
                return None, secrets
    return hidden, secrets


async def values_diff(kube: Kube, obj: dict[str, Any], older: int, newer: int) -> list[Change]:
    """The values that changed from revision ``older`` to ``newer`` of the HelmRelease's release."""
    this = Resource(obj)
    try:
        spec = parse_spec(this.spec, this.name, this.namespace)
    except SpecError as exc:
        raise Refused(f"the HelmRelease's spec is invalid: {exc}") from None
    try:
        records = await kube.list(f"/api/v1/namespaces/{spec.target_namespace}/secrets",
                                  storage.selector(spec.release_name))
    except KubeError as exc:
        raise Refused(f"helm's release records cannot be read (Secrets in {spec.target_namespace}): "
                      f"{exc.message}") from None
    by_revision = {storage.revision_of(secret): secret for secret in records}
    configs = []
    for revision in (older, newer):
        if revision not in by_revision:
            raise Refused(f"revision {revision} of release {spec.target_namespace}/{spec.release_name} is not kept")
        try:
            config = storage.decode(by_revision[revision]).get("config") or {}
        except HelmError as exc:
            raise Refused(str(exc)) from None
        configs.append(config if isinstance(config, dict) else {})
    hidden, secrets = await _secret_paths(kube, this.namespace, spec)
    return changes(configs[0], configs[1], hidden, secrets)
