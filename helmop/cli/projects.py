"""``helmop create project`` and ``helmop tree project``: a Project written from flags (applied, or printed with
``--export``), and what a Project holds, as a tree."""

from __future__ import annotations

from typing import Any

import yaml

from helmop.api.errors import SpecError
from helmop.api.kinds import CONFIGSYNC, HELMRELEASE, JENKINS, PROJECT
from helmop.api.projects import MEMBER_KINDS, parse_project
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
        parse_project(spec, name)
    except SpecError as exc:
        raise Failed(f"Project {name}: {exc}") from None
    return {"apiVersion": PROJECT.api_version, "kind": PROJECT.kind, "metadata": {"name": name}, "spec": spec}


def export(obj: dict[str, Any]) -> str:
    return yaml.safe_dump(obj, sort_keys=False)


async def create(kube: Kube, obj: dict[str, Any]) -> str:
    await kube.apply(PROJECT.path(None, obj["metadata"]["name"]), obj, MANAGER)
    return f"✔ Project {obj['metadata']['name']} applied"


def _ready(obj: dict[str, Any] | None) -> str:
    if obj is None:
        return "missing"
    ready: dict[str, Any] = next((c for c in (obj.get("status") or {}).get("conditions") or []
                                  if c.get("type") == "Ready"), {})
    return {"True": "Ready", "False": f"Not ready: {ready.get('message', '')}"}.get(ready.get("status", ""),
                                                                                       "Unknown")


async def tree(kube: Kube, name: str) -> str:
    """The Project, its parts, what its Jenkins and config repository run, and its environments."""
    obj = await kube.get(PROJECT.path(None, name))
    if obj is None:
        raise Failed(f"Project {name} not found")
    status = obj.get("status") or {}
    lines = [f"Project/{name}  {_ready(obj)}"]
    entries: list[tuple[str, list[str]]] = []
    for ref in status.get("inventory") or []:
        where = f"{ref['namespace']}/{ref['name']}" if ref.get("namespace") else ref["name"]
        children: list[str] = []
        if ref["kind"] == "Jenkins":
            jenkins = await kube.get(JENKINS.path(ref["namespace"], ref["name"]))
            release = ((jenkins or {}).get("status") or {}).get("helmRelease")
            if release:
                children.append(f"HelmRelease {ref['namespace']}/{release}  "
                                f"{_ready(await kube.get(HELMRELEASE.path(ref['namespace'], release)))}")
            where += f"  {_ready(jenkins)}"
        if ref["kind"] == "ConfigSync":
            sync = await kube.get(CONFIGSYNC.path(ref["namespace"], ref["name"]))
            for item in ((sync or {}).get("status") or {}).get("inventory") or []:
                child = f"{item.get('kind')} {item.get('namespace') or ''}{'/' if item.get('namespace') else ''}" \
                        f"{item.get('name')}"
                if item.get("kind") == "HelmRelease":
                    child += f"  {_ready(await kube.get(HELMRELEASE.path(item['namespace'], item['name'])))}"
                children.append(child)
            where += f"  {_ready(sync)}"
        entries.append((f"{ref['kind']} {where}", children))
    environments = status.get("environments") or []
    if environments:
        entries.append(("environments", [f"{e.get('branch')} -> {e.get('namespace')}  "
                                         f"{'Ready' if e.get('ready') else e.get('message', '')}"
                                         for e in environments]))
    for i, (entry, children) in enumerate(entries):
        last = i == len(entries) - 1
        lines.append(f"{'└──' if last else '├──'} {entry}")
        for j, child in enumerate(children):
            lines.append(f"{'    ' if last else '│   '}{'└──' if j == len(children) - 1 else '├──'} {child}")
    return "\n".join(lines)
