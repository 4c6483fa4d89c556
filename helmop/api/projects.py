"""The Project spec (helmop.dev/v1alpha1, cluster-scoped): parsed into typed, validated values.

What a schema cannot say is checked here, each with the field at fault: the namespace is a DNS label,
members have a known role, quota and limit values are Kubernetes quantities, the Jenkins spec is a map.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .dependencies import Dependency, dependencies
from .durations import duration_field
from .errors import SpecError
from .kinds import GROUP, is_namespace_name
from .names import check_references

ROLES = ("admin", "edit", "view")
MEMBER_KINDS = ("User", "Group", "ServiceAccount")
TEARDOWN_TIMEOUT = 600.0  # 10m
# A Kubernetes quantity: a number with an optional binary/decimal suffix or exponent.
_QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$")


@dataclass(frozen=True)
class Member:
    kind: str
    name: str
    role: str


@dataclass(frozen=True)
class Sync:
    url: str
    ref: dict[str, Any] = field(default_factory=dict)
    path: str = ""
    secret_ref: str = ""
    interval: str = ""
    webhook: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Environments:
    """spec.environments: a namespace per matching branch of the sync repository."""

    include: tuple[str, ...] = ("*",)  # shell patterns of branch names
    exclude: tuple[str, ...] = ()
    name_pattern: str = "{project}-{branch}"
    ttl: float | None = None  # torn down after this long without a new commit
    quota: dict[str, str] = field(default_factory=dict)
    jenkins: bool = False  # a Jenkins in each environment too


@dataclass(frozen=True)
class ProjectSpec:
    namespace: str
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    members: tuple[Member, ...] = ()
    quota: dict[str, str] = field(default_factory=dict)
    limits: dict[str, dict[str, str]] = field(default_factory=dict)  # default / defaultRequest
    isolated: bool = False
    allow_from: tuple[str, ...] = ()
    jenkins: dict[str, Any] | None = None
    sync: Sync | None = None
    retain_data: bool = True
    teardown_timeout: float = TEARDOWN_TIMEOUT
    orphan: bool = False  # deletionPolicy: Orphan
    environments: Environments | None = None
    depends_on: tuple[Dependency, ...] = ()  # what must be ready first (Projects, or objects of any kind)


def _quantities(raw: Any, where: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise SpecError("InvalidSpec", f"{where} must be a map of resource names to quantities")
    out = {}
    for name, value in raw.items():
        text = str(value).strip()
        if not _QUANTITY.match(text):
            raise SpecError("InvalidQuantity", f"{where}.{name}: {value!r} is not a quantity (such as 500m, 2Gi or 10)")
        out[str(name)] = text
    return out


def _members(raw: Any) -> tuple[Member, ...]:
    out = []
    for i, entry in enumerate(raw or []):
        if not isinstance(entry, dict) or not entry.get("name"):
            raise SpecError("InvalidSpec", f"spec.members[{i}].name is required")
        kind, role = str(entry.get("kind") or ""), str(entry.get("role") or "")
        if kind not in MEMBER_KINDS:
            raise SpecError("InvalidSpec", f"spec.members[{i}].kind must be one of {', '.join(MEMBER_KINDS)}, "
                                           f"not {kind!r}")
        if role not in ROLES:
            raise SpecError("UnknownRole", f"spec.members[{i}].role must be one of {', '.join(ROLES)}, not {role!r}")
        out.append(Member(kind, str(entry["name"]), role))
    return tuple(out)


def _sync(raw: Any) -> Sync | None:
    if not raw:
        return None
    if not isinstance(raw, dict) or not raw.get("url"):
        raise SpecError("InvalidSpec", "spec.sync.url is required")
    duration_field(raw, "interval", None, "spec.sync")  # refused here rather than by the GitRepository
    secret = raw.get("secretRef") or {}
    return Sync(url=str(raw["url"]), ref=dict(raw.get("ref") or {}), path=str(raw.get("path") or ""),
                secret_ref=str(secret.get("name") or "") if isinstance(secret, dict) else "",
                interval=str(raw.get("interval") or ""), webhook=dict(raw.get("webhook") or {}))


def _environments(raw: Any, sync: Sync | None) -> Environments | None:
    if not raw:
        return None
    if not isinstance(raw, dict):
        raise SpecError("InvalidSpec", "spec.environments must be a map")
    if sync is None:
        raise SpecError("InvalidSpec", "spec.environments needs spec.sync: an environment syncs a branch of it")
    branches = raw.get("branches") or {}
    template = raw.get("template") or {}
    pattern = str(raw.get("namePattern") or "{project}-{branch}")
    if "{branch}" not in pattern or set(re.findall(r"{([^}]*)}", pattern)) - {"project", "branch"}:
        raise SpecError("InvalidSpec", "spec.environments.namePattern names {branch} (and may name {project}), "
                                       f"nothing else: {pattern!r}")
    return Environments(include=tuple(str(p) for p in branches.get("include") or ["*"]),
                        exclude=tuple(str(p) for p in branches.get("exclude") or []), name_pattern=pattern,
                        ttl=duration_field(raw, "ttl", None, "spec.environments"),
                        quota=_quantities(template.get("quota"), "spec.environments.template.quota"),
                        jenkins=bool(template.get("jenkins", False)))


def parse_project(spec: dict[str, Any], name: str) -> ProjectSpec:
    check_references(spec)
    namespace = str(spec.get("namespace") or name)
    if not is_namespace_name(namespace):
        raise SpecError("InvalidSpec", f"spec.namespace {namespace!r} is not a valid namespace name (a DNS label)")
    isolation = spec.get("isolation") or {}
    allow = tuple(str(n) for n in isolation.get("allowFrom") or [])
    if bad := [n for n in allow if not is_namespace_name(n)]:
        raise SpecError("InvalidSpec", f"spec.isolation.allowFrom: {', '.join(bad)} is not a namespace name")
    limits_raw = spec.get("limits") or {}
    limits = {key: q for key in ("default", "defaultRequest")
              if (q := _quantities(limits_raw.get(key), f"spec.limits.{key}"))}
    jenkins = spec.get("jenkins")
    if jenkins is not None and not isinstance(jenkins, dict):
        raise SpecError("InvalidSpec", "spec.jenkins must be a map (the Jenkins kind's spec)")
    sync = _sync(spec.get("sync"))
    return ProjectSpec(
        namespace=namespace,
        labels={str(k): str(v) for k, v in (spec.get("labels") or {}).items()},
        annotations={str(k): str(v) for k, v in (spec.get("annotations") or {}).items()},
        members=_members(spec.get("members")),
        quota=_quantities(spec.get("quota"), "spec.quota"),
        limits=limits,
        isolated=bool(isolation.get("enabled", False)),
        allow_from=allow,
        jenkins=dict(jenkins) if jenkins is not None else None,
        sync=sync,
        retain_data=bool(spec.get("retainData", True)),
        teardown_timeout=duration_field(spec, "teardownTimeout", TEARDOWN_TIMEOUT) or TEARDOWN_TIMEOUT,
        orphan=spec.get("deletionPolicy") == "Orphan",
        environments=_environments(spec.get("environments"), sync),
        depends_on=dependencies(spec.get("dependsOn"), name, "", "Project", GROUP),
    )
