"""The names a spec gives of other objects, checked as the API server checks an object's own name: a name it
would refuse (``..``, a ``/``, capitals, over-long) is a specific ``InvalidSpec`` reason at once, rather than a
request whose path it bends or an error from deep inside a reconcile. Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .errors import SpecError

# RFC 1123: what names of Secrets, ConfigMaps, ServiceAccounts and custom resources are; and namespaces
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
# lists whose entries name objects ({name, namespace}), and string fields that are names or namespaces
_LISTS = ("valuesFrom", "dependsOn", "substituteFrom")
_NAMES = ("serviceAccountName",)
_NAMESPACES = ("targetNamespace", "storageNamespace")


def problem(value: str, *, namespace: bool = False) -> str:
    """Why ``value`` is not a name the API server accepts for a namespace (``namespace``) or an object ("" when
    it is)."""
    if namespace:
        if len(value) > 63 or not _LABEL.fullmatch(value):
            return "is not a namespace name (lowercase letters, digits and '-', at most 63)"
        return ""
    if len(value) > 253 or not _SUBDOMAIN.fullmatch(value):
        return "is not an object name (lowercase letters, digits, '-' and '.', at most 253)"
    return ""


def path_problem(value: str) -> str:
    """Why ``value`` cannot be any object's name in a request path (RBAC objects' names, say, are looser)."""
    if value in (".", "..") or "/" in value or "%" in value or len(value) > 253:
        return "cannot be the name of an object"
    return ""


def _check(value: Any, where: str, *, namespace: bool = False, loose: bool = False) -> None:
    if not isinstance(value, str) or not value:
        return  # absent or of another type: the kind's own parser says what it needs
    said = path_problem(value) if loose else problem(value, namespace=namespace)
    if said:
        raise SpecError("InvalidSpec", f"{where}: {value[:80]!r} {said}")


def _reference(ref: Mapping[str, Any], where: str, *, loose: bool = False) -> None:
    _check(ref.get("name"), f"{where}.name", loose=loose)
    _check(ref.get("namespace"), f"{where}.namespace", namespace=True)


def check_references(spec: Mapping[str, Any], where: str = "spec", depth: int = 0) -> None:
    """SpecError when a name ``spec`` gives of another object (a ``*Ref``, valuesFrom, valuesFiles, dependsOn,
    substituteFrom, healthChecks, a ServiceAccount or target namespace) is one the API server would refuse."""
    if depth > 8:
        return
    for key, value in spec.items():
        at = f"{where}.{key}"
        if isinstance(value, Mapping):
            if str(key).endswith("Ref"):
                _reference(value, at)
            check_references(value, at, depth + 1)
        elif isinstance(value, list) and key == "valuesFiles":  # [{sourceRef, path}] (a chart's: of strings)
            for i, item in enumerate(value):
                if isinstance(item, Mapping):
                    check_references(item, f"{at}[{i}]", depth + 1)
        elif isinstance(value, list) and key in (*_LISTS, "healthChecks"):
            for i, item in enumerate(value):
                if isinstance(item, Mapping):
                    # (what healthChecks and dependsOn name may be of any kind: RBAC objects' names are looser)
                    _reference(item, f"{at}[{i}]", loose=key in ("healthChecks", "dependsOn"))
        elif key in _NAMES:
            _check(value, at)
        elif key in _NAMESPACES:
            _check(value, at, namespace=True)
