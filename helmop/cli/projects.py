"""``helmop create project``: a Project written from flags (applied, or printed with ``--export``)."""

from __future__ import annotations

from typing import Any

import yaml

from helmop.api.errors import SpecError
from helmop.api.kinds import PROJECT
from helmop.api.projects import MEMBER_KINDS
from helmop.decisions.specs import read_spec
from helmop.infra.kube import Kube

from .errors import Failed

MANAGER = "helmop-cli"
_KINDS = {k.lower(): k for k in MEMBER_KINDS}


def _member(text: str) -> dict[str, str]:
    """``kind:name:role`` (``user:alice:edit``; a ServiceAccount as ``serviceaccount:ns/name:view``)."""
    parts = text.split(":")
    if len(parts) != 3 or parts[0].lower() not in _KINDS or not parts[1]:
        raise Failed(f"--member {text!r}: expected kind:name:role, kind one of user, group, serviceaccount")
    return {"kind": _KINDS[parts[0].lower()], "name": parts[1], "role": parts[2]}


def manifest(name: str, *, members: list[str], quota: list[str], sync: str | None, branch: str, path: str,
             jenkins: bool, isolate: bool) -> dict[str, Any]:
    """The Project the flags describe, checked as the operator checks it."""
    spec: dict[str, Any] = {}
    if members:
        spec["members"] = [_member(m) for m in members]
    if quota:
        pairs = [q.partition("=") for q in quota]
        if any(not key or not sep for key, sep, _ in pairs):
            raise Failed("--quota takes resource=quantity, such as pods=20")
        spec["quota"] = {key: value for key, _, value in pairs}
    if isolate:
        spec["isolation"] = {"enabled": True}
    if jenkins:
        spec["jenkins"] = {}
    if sync:
        spec["sync"] = {"url": sync, "ref": {"branch": branch}, **({"path": path} if path else {})}
    try:
        read_spec(PROJECT, {"metadata": {"name": name}, "spec": spec})
    except SpecError as exc:
        raise Failed(f"Project {name}: {exc}") from None
    return {"apiVersion": PROJECT.api_version, "kind": PROJECT.kind, "metadata": {"name": name}, "spec": spec}


def export(obj: dict[str, Any]) -> str:
    return yaml.safe_dump(obj, sort_keys=False)


async def create(kube: Kube, obj: dict[str, Any]) -> str:
    await kube.apply(PROJECT.path(None, obj["metadata"]["name"]), obj, MANAGER)
    return f"✔ Project {obj['metadata']['name']} applied"
