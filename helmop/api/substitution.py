"""Post-build variable substitution, with Flux's rules (kustomize-controller's ``postBuild``).

``${var}`` is replaced by the variable's value (an unset one by "", or an error in strict mode);
``${var:=default}`` / ``${var:-default}`` use ``default`` when the variable is unset or empty (``=`` and
``-`` without the colon: only when unset); ``${var:offset}`` and ``${var:offset:length}`` take part of the
value; ``${var/old/new}`` replaces the first ``old``, ``${var//old/new}`` every one. ``$${var}`` is left as
``${var}``, and ``$var`` is not a variable. Names match ``^[_[:alpha:]][_[:alpha:][:digit:]]*$``. An object
labelled or annotated ``kustomize.toolkit.fluxcd.io/substitute: disabled`` is left alone.

Values never reach an error message: a value may come from a Secret.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import yaml

from . import k8syaml, yamlc
from .manifests import Manifest

if TYPE_CHECKING:
    from .sources import ConfigSyncSpec

DISABLED = "kustomize.toolkit.fluxcd.io/substitute"
NAME = re.compile(r"^[_a-zA-Z][_a-zA-Z0-9]*$")
_EXPRESSION = re.compile(r"\$(\$?)\{([^{}]*)\}")
_SLICE = re.compile(r"^:\s*(-?\d+)(?::\s*(\d+))?$")
MAX_LENGTH = 1 << 20  # one value after substitution (a default or a replacement cannot grow it past this)


class SubstitutionError(ValueError):
    """An expression that cannot be evaluated (its text, never a value)."""


def check_names(variables: Mapping[str, str]) -> None:
    bad = sorted(name for name in variables if not NAME.match(name))
    if bad:
        raise SubstitutionError(f"invalid variable name(s) {', '.join(repr(n[:64]) for n in bad[:5])}: a name "
                                "has letters, digits and underscores, and does not start with a digit")


def disabled(obj: Mapping[str, object]) -> bool:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return False
    return any(isinstance(marks, dict) and marks.get(DISABLED) == "disabled"
               for marks in (meta.get("labels"), meta.get("annotations")))


def substitute(text: str, variables: Mapping[str, str], *, strict: bool = False) -> str:
    """``text`` with every ``${...}`` expression evaluated against ``variables``."""

    def one(match: re.Match[str]) -> str:
        if match.group(1):  # $${...}: escaped
            return "${" + match.group(2) + "}"
        return _evaluate(match.group(2), variables, strict)

    return _EXPRESSION.sub(one, text)


def _evaluate(expression: str, variables: Mapping[str, str], strict: bool) -> str:
    name_match = re.match(r"[_a-zA-Z][_a-zA-Z0-9]*", expression)
    if name_match is None:
        raise SubstitutionError(f"${{{expression[:64]}}}: not a variable expression")
    name, rest = name_match.group(0), expression[name_match.end():]
    value = variables.get(name)
    for marker, when_empty in ((":=", True), (":-", True), ("=", False), ("-", False)):
        if rest.startswith(marker):
            default = rest[len(marker):]
            use_default = value is None or (when_empty and value == "")
            return _bounded(name, default if use_default else str(value))
    if value is None:
        if strict:
            raise SubstitutionError(f"variable {name!r} is not set (strict substitution)")
        value = ""
    if not rest:
        return value
    sliced = _SLICE.match(rest)
    if sliced:
        start = int(sliced.group(1))
        start = max(0, len(value) + start) if start < 0 else start
        return value[start:start + int(sliced.group(2))] if sliced.group(2) is not None else value[start:]
    if rest.startswith("/"):
        every = rest.startswith("//")
        old, _, new = rest[2 if every else 1:].partition("/")
        if not old:
            return value
        return _bounded(name, value.replace(old, new) if every else value.replace(old, new, 1))
    raise SubstitutionError(f"${{{expression[:64]}}}: unsupported expression for variable {name!r}")


def _bounded(name: str, value: str) -> str:
    if len(value) > MAX_LENGTH:
        raise SubstitutionError(f"variable {name!r} grows past {MAX_LENGTH >> 10} KiB when substituted")
    return value


def substituted(obj: dict[str, Any], variables: Mapping[str, str], *, strict: bool = False,
                keep: bool = True) -> dict[str, Any]:
    """``obj`` with its variables substituted (in its YAML text, as Flux does), unless it opts out. ``keep``: its
    text may be kept for the next (a thousand ConfigSyncs of a revision substitute into the same few objects);
    never for what was decrypted."""
    if disabled(obj):
        return obj
    text = k8syaml.dump(obj) if keep else k8syaml.dump_all([obj])
    out = substitute(text, variables, strict=strict)
    if out == text:
        return obj
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    what = f"{obj.get('kind')}/{(meta or {}).get('name')}"
    try:
        data = yamlc.load(out)
    except yaml.YAMLError as exc:  # its message may quote a value: only the line is said
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1} of the object)" if mark is not None else ""
        raise SubstitutionError(f"{what}: not valid YAML once its variables are substituted{where}") from None
    if not isinstance(data, dict):
        raise SubstitutionError(f"{what}: not a map once its variables are substituted")
    return data


def with_metadata(obj: dict[str, Any], labels: Mapping[str, str], annotations: Mapping[str, str]) -> dict[str, Any]:
    """``obj`` with ``labels`` and ``annotations`` set (they win over the object's own): commonMetadata."""
    if not labels and not annotations:
        return obj
    meta = dict(obj.get("metadata") or {})
    if labels:
        meta["labels"] = {**(meta.get("labels") or {}), **labels}
    if annotations:
        meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
    return {**obj, "metadata": meta}


def post_build(found: list[Manifest], spec: ConfigSyncSpec, variables: Mapping[str, str], *,
               strict: bool = False, keep: bool = True) -> list[Manifest]:
    """What a ConfigSync applies of what it read or built: variables substituted (when there are any, or the
    strategy says Always), then commonMetadata set (``keep``: as :func:`substituted`). The operator and
    ``helmop render`` both run this."""
    substituting = bool(variables) or spec.post_build.always
    labels, annotations = dict(spec.common_labels), dict(spec.common_annotations)
    out = []
    for item in found:
        try:
            obj = substituted(item.obj, variables, strict=strict, keep=keep) if substituting else item.obj
        except SubstitutionError as exc:
            raise SubstitutionError(f"{item.origin}: {exc}") from None
        out.append(Manifest(with_metadata(obj, labels, annotations), item.origin))
    return out
