"""An object's change-control settings: whether a change needs an approval, and when changes may go (deployment
windows). helmop's HelmRelease and ConfigSync have them in the spec (``spec.approval.required``,
``spec.windows``); Flux's kinds there too as helmop serves them, or in annotations (``helmop.dev/approval:
required``, ``helmop.dev/windows``: the same list as YAML), which survive Flux's own CRDs. An object that names
no windows follows its namespace's default ones (the ConfigMap ``helmop-windows``, key ``windows``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from helmop.api.errors import SpecError
from helmop.api.windows import Window, parse_windows

APPROVAL = "helmop.dev/approval"
WINDOWS = "helmop.dev/windows"


@dataclass(frozen=True)
class ChangeControl:
    approval: bool = False
    windows: tuple[Window, ...] = ()
    namespace_default: bool = True  # no windows of its own: the namespace's default ones apply


def parse_change_control(spec: dict[str, Any], annotations: dict[str, Any], *, flux: bool) -> ChangeControl:
    """The settings of an object: its spec's; for one of Flux's kinds (``flux``) also its annotations', as Flux's own
    CRDs, where they are installed, prune the spec fields helmop adds (either one asking for an approval, or naming
    windows, is enough)."""
    own = _of_spec(spec)
    if not flux:
        return own
    approval = str(annotations.get(APPROVAL, "")).strip()
    if approval not in ("", "required"):
        raise SpecError("InvalidSpec", f"annotation {APPROVAL} must be 'required' (or absent), not {approval[:60]!r}")
    noted = parse_windows(annotations.get(WINDOWS), f"annotation {WINDOWS}")
    return ChangeControl(approval=own.approval or approval == "required", windows=own.windows or noted,
                         namespace_default=own.namespace_default and WINDOWS not in annotations)


def _of_spec(spec: dict[str, Any]) -> ChangeControl:
    approval_spec = spec.get("approval") or {}
    if not isinstance(approval_spec, dict):
        raise SpecError("InvalidSpec", "spec.approval must be a map ({required: true})")
    return ChangeControl(approval=approval_spec.get("required") is True,
                         windows=parse_windows(spec.get("windows"), "spec.windows"),
                         namespace_default=spec.get("windows") is None)


def namespace_windows(config_map: dict[str, Any], where: str) -> tuple[Window, ...]:
    """A namespace's default windows, from its ConfigMap (key ``windows``)."""
    return parse_windows((config_map.get("data") or {}).get("windows"), where)
