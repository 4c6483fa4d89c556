"""A Preview: what each open pull request of a config repository would change, object by object, posted on the pull
request as one comment kept up to date, and a commit status on its head. The spec names the GitRepository whose
repository the pull requests are of (``sourceRef``), the branch they merge into (``base``), the folders to build
(``paths``), the Provider that comments (``providerRef``, a pull-request-comment type) and the bounds. Pure."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .durations import duration_field
from .errors import SpecError
from .names import check_references
from .substitution import NAME

INTERVAL = 300.0  # how often the open pull requests are listed, unless spec.interval says
TIMEOUT = 300.0  # one pull request's render, unless spec.timeout says
MAX_LINES, MAX_OBJECTS, MAX_PULL_REQUESTS = 500, 200, 20
MAX_CHARS = 60_000  # of one comment (GitHub takes 65536)
_PATHS = 32
_VARIABLES = 256


@dataclass(frozen=True)
class PreviewSpec:
    source: str  # a GitRepository of the Preview's namespace
    provider: str  # a Provider of the Preview's namespace, of a pull-request-comment type
    base: str = ""  # the branch the pull requests merge into ("": the GitRepository's, else main)
    paths: tuple[str, ...] = ()  # folders to build ((): those the revisions' ConfigSyncs and Kustomizations name)
    interval: float = INTERVAL
    timeout: float = TIMEOUT
    max_lines: int = MAX_LINES  # of one object's diff
    max_objects: int = MAX_OBJECTS  # shown in a comment
    max_pull_requests: int = MAX_PULL_REQUESTS  # previewed, the most recently updated first
    substitute: tuple[tuple[str, str], ...] = ()  # postBuild variables
    decryption_secret: str = ""  # SOPS keys: what they decrypt is masked
    suspend: bool = False


def _name(spec: Mapping[str, Any], key: str, required: bool = True) -> str:
    ref = spec.get(key)
    if ref is None and not required:
        return ""
    if not isinstance(ref, Mapping) or not isinstance(ref.get("name"), str) or not ref["name"]:
        raise SpecError("InvalidSpec", f"spec.{key}.name must name an object of the Preview's namespace")
    if ref.get("namespace"):
        raise SpecError("InvalidSpec", f"spec.{key} names objects of the Preview's own namespace only")
    return str(ref["name"])


def _bounded(spec: Mapping[str, Any], key: str, default: int, most: int) -> int:
    value = spec.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise SpecError("InvalidSpec", f"spec.{key} must be a whole number from 1 to {most}")
    return value


def _paths(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > _PATHS or not all(isinstance(p, str) and p for p in value):
        raise SpecError("InvalidSpec", f"spec.paths must be a list of at most {_PATHS} folders")
    out = []
    for path in value:
        normal = posixpath.normpath(path).strip("/")
        if path.startswith("/") or normal == ".." or normal.startswith("../"):
            raise SpecError("InvalidSpec", f"spec.paths: {path[:80]!r} is not a folder inside the repository")
        out.append(normal)
    return tuple(out)


def _variables(value: Any) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, Mapping) or len(value) > _VARIABLES or not all(
            isinstance(k, str) and NAME.match(k) and isinstance(v, str) for k, v in value.items()):
        raise SpecError("InvalidSpec", "spec.substitute must map variable names (letters, digits, underscores) to "
                                       "strings")
    return tuple(sorted(value.items()))


def parse_preview(spec: Mapping[str, Any]) -> PreviewSpec:
    check_references(spec)
    base = spec.get("base") or ""
    if not isinstance(base, str) or base.startswith(("-", "refs/")) or any(c in base for c in " ~^:?*[\\\0\n"):
        raise SpecError("InvalidSpec", "spec.base must be a branch name (main)")
    decryption = spec.get("decryption") or {}
    if not isinstance(decryption, Mapping) or decryption.get("provider", "sops") != "sops":
        raise SpecError("InvalidSpec", "spec.decryption.provider must be sops")
    source = spec.get("sourceRef")
    if isinstance(source, Mapping) and source.get("kind", "GitRepository") != "GitRepository":
        raise SpecError("InvalidSpec", "spec.sourceRef.kind must be GitRepository (the pull requests' repository)")
    return PreviewSpec(
        source=_name(spec, "sourceRef"), provider=_name(spec, "providerRef"), base=base,
        paths=_paths(spec.get("paths")), interval=duration_field(dict(spec), "interval", INTERVAL) or INTERVAL,
        timeout=min(duration_field(dict(spec), "timeout", TIMEOUT) or TIMEOUT, 3600.0),
        max_lines=_bounded(spec, "maxLines", MAX_LINES, 5000), max_objects=_bounded(spec, "maxObjects", MAX_OBJECTS,
                                                                                    2000),
        max_pull_requests=_bounded(spec, "maxPullRequests", MAX_PULL_REQUESTS, 50),
        substitute=_variables(spec.get("substitute")), decryption_secret=_name(decryption, "secretRef", False),
        suspend=bool(spec.get("suspend")))
