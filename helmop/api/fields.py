"""Readers of a spec's fields as Kubernetes and Flux users write them: an absent, null or empty field is its
default. Shared by the spec parsers so that each says which fields it reads, not how a field is read. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .durations import duration_field
from .errors import SpecError


def text(spec: Mapping[str, Any], key: str, default: str = "") -> str:
    """``spec[key]`` as a string; ``default`` when it is absent, null or empty."""
    return str(spec.get(key) or default)


def flag(spec: Mapping[str, Any], key: str, default: bool = False) -> bool:
    """``spec[key]`` as a boolean; ``default`` when it is absent."""
    return bool(spec.get(key, default))


def optional_text(spec: Mapping[str, Any], key: str) -> str | None:
    """``spec[key]`` as a string, None when it is absent or null (an empty string is a value)."""
    value = spec.get(key)
    return None if value is None else str(value)


def seconds(spec: dict[str, Any], key: str, default: float) -> float:
    """The duration field ``key`` in seconds; ``default`` when it is absent or zero."""
    return duration_field(spec, key, default) or default


def name_in(spec: Mapping[str, Any], key: str) -> str:
    """The name of the reference ``spec[key]`` (a secretRef's), "" when there is none or it is no map."""
    ref = spec.get(key) or {}
    return str(ref.get("name") or "") if isinstance(ref, dict) else ""


def optional_list(raw: Any, where: str) -> list[Any]:
    """A list field's value: [] when it is absent (None); SpecError when it is not a list."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise SpecError("InvalidSpec", f"{where} must be a list")
    return raw


def refuse_workload_identity(spec: Mapping[str, Any], give: str = "credentials", flux_use: str = "") -> None:
    """spec.serviceAccountName as Flux reads it on sources and providers (the identity a cloud's token is obtained
    for) is refused: helmop obtains none; ``give`` is what spec.secretRef holds instead, ``flux_use`` what Flux
    uses it for where it says more."""
    if spec.get("serviceAccountName"):
        raise SpecError("UnsupportedField", f"spec.serviceAccountName (a cloud workload identity{flux_use}) is not "
                                            f"obtained by helmop; give {give} in spec.secretRef")
