"""ArtifactGenerator and ExternalArtifact specs (helmop.dev/v1alpha1, and Flux's source.extensions.fluxcd.io/v1beta1
and source.toolkit.fluxcd.io/v1): artifacts composed from the files of several sources, each published as an
ExternalArtifact that ConfigSyncs and HelmReleases read. Field names are Flux's."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .errors import SpecError
from .kinds import is_object_name
from .names import check_references, problem
from .objects import ObjectRef

GENERATOR_SOURCES = ("GitRepository", "OCIRepository", "Bucket", "ExternalArtifact")  # HelmChart: not here
STRATEGIES = ("Overwrite", "Merge", "Extract")
_ALIAS = re.compile(r"^[a-z0-9]([a-z0-9_-]*[a-z0-9])?$")
_FROM = re.compile(r"^@([a-z0-9]([a-z0-9_-]*[a-z0-9])?)/(.*)$")
_TO = re.compile(r"^@artifact/(.*)$")
_REVISION = re.compile(r"^@([a-z0-9]([a-z0-9_-]*[a-z0-9])?)$")
MAX_SOURCES, MAX_ARTIFACTS, MAX_COPIES, MAX_EXCLUDES = 1000, 1000, 1000, 100
DISABLED = "source.extensions.fluxcd.io/reconcile"  # "disabled": Flux's way to suspend a generator


@dataclass(frozen=True)
class SourceRef:
    alias: str
    kind: str
    name: str
    namespace: str = ""  # "" = the generator's


@dataclass(frozen=True)
class Copy:
    source: str  # the alias
    pattern: str  # a path or a glob inside it ("" = its root)
    to: str  # inside the artifact; a trailing "/" says "into this folder"
    exclude: tuple[str, ...] = ()
    strategy: str = "Overwrite"


@dataclass(frozen=True)
class ArtifactTemplate:
    name: str  # with {capture} placeholders under pathPattern
    copies: tuple[Copy, ...]
    revision: str = ""  # an alias whose revision the artifact takes
    origin_revision: str = ""  # an alias whose origin revision (or revision) goes in the artifact's metadata


@dataclass(frozen=True)
class ArtifactGeneratorSpec:
    sources: tuple[SourceRef, ...]
    artifacts: tuple[ArtifactTemplate, ...]
    path_pattern: str = ""  # @alias/<path with {capture}s>: one set of artifacts per matching folder
    labels: tuple[tuple[str, str], ...] = ()  # commonMetadata
    annotations: tuple[tuple[str, str], ...] = ()

    def source(self, alias: str) -> SourceRef:
        return next(s for s in self.sources if s.alias == alias)


def _list(raw: Any, where: str, limit: int, *, required: bool = True) -> list[Any]:
    if raw is None and not required:
        return []
    if not isinstance(raw, list) or (required and not raw) or len(raw) > limit:
        raise SpecError("ValidationFailed", f"{where} must be a list of 1 to {limit} entries")
    return raw


def _source(raw: Any, where: str) -> SourceRef:
    if not isinstance(raw, dict):
        raise SpecError("ValidationFailed", f"{where} must be a map")
    alias, kind, name = (str(raw.get(k) or "") for k in ("alias", "kind", "name"))
    if not _ALIAS.match(alias) or len(alias) > 63:
        raise SpecError("ValidationFailed", f"{where}.alias {alias[:70]!r} must be lowercase letters, digits, '-' "
                                            "and '_'")
    if kind == "HelmChart":
        raise SpecError("UnsupportedSourceKind", f"{where}.kind HelmChart is not implemented by helmop as a "
                                                 "generator's source (take the chart's folder from its own source)")
    if kind not in GENERATOR_SOURCES:
        raise SpecError("ValidationFailed", f"{where}.kind must be one of {', '.join(GENERATOR_SOURCES)}")
    if not is_object_name(name):
        raise SpecError("ValidationFailed", f"{where}.name {name[:70]!r} is not an object's name")
    namespace = str(raw.get("namespace") or "")
    if namespace and problem(namespace, namespace=True):  # "..": a request path bent elsewhere
        raise SpecError("ValidationFailed", f"{where}.namespace {namespace[:70]!r} "
                                            f"{problem(namespace, namespace=True)}")
    return SourceRef(alias, kind, name, namespace)


def _copy(raw: Any, where: str, aliases: set[str]) -> Copy:
    if not isinstance(raw, dict):
        raise SpecError("ValidationFailed", f"{where} must be a map")
    source, to = _FROM.match(str(raw.get("from") or "")), _TO.match(str(raw.get("to") or ""))
    if source is None or to is None:
        raise SpecError("ValidationFailed", f"{where} needs from: @<alias>/<path or glob> and to: @artifact/<path>")
    if source.group(1) not in aliases:
        raise SpecError("ValidationFailed", f"{where}.from: source alias {source.group(1)!r} not found")
    strategy = str(raw.get("strategy") or "Overwrite")
    if strategy not in STRATEGIES:
        raise SpecError("ValidationFailed", f"{where}.strategy must be one of {', '.join(STRATEGIES)}")
    excludes = tuple(str(e) for e in _list(raw.get("exclude"), f"{where}.exclude", MAX_EXCLUDES, required=False))
    for path in (source.group(3), to.group(1), *excludes):
        if path.startswith("/") or ".." in path.split("/") or "\0" in path or "\\" in path:
            raise SpecError("ValidationFailed", f"{where}: {path[:100]!r} must be a relative path inside its root")
    return Copy(source.group(1), source.group(3), to.group(1), excludes, strategy)


def _artifact(raw: Any, where: str, aliases: set[str], templated: bool) -> ArtifactTemplate:
    if not isinstance(raw, dict):
        raise SpecError("ValidationFailed", f"{where} must be a map")
    name = str(raw.get("name") or "")
    if not name or len(name) > 253 or (not templated and not is_object_name(name)):
        raise SpecError("ValidationFailed", f"{where}.name {name[:70]!r} must be an object's name")
    picked = []
    for field in ("revision", "originRevision"):
        text = str(raw.get(field) or "")
        found = _REVISION.match(text) if text else None
        if text and (found is None or found.group(1) not in aliases):
            raise SpecError("ValidationFailed", f"{where}.{field} {text[:70]!r} must be @<alias> of a source")
        picked.append(found.group(1) if found else "")
    copies = tuple(_copy(c, f"{where}.copy[{i}]", aliases)
                   for i, c in enumerate(_list(raw.get("copy"), f"{where}.copy", MAX_COPIES)))
    return ArtifactTemplate(name, copies, picked[0], picked[1])


def _metadata(spec: dict[str, Any], key: str) -> tuple[tuple[str, str], ...]:
    found = (spec.get("commonMetadata") or {}).get(key) or {}
    if not isinstance(found, dict):
        raise SpecError("ValidationFailed", f"spec.commonMetadata.{key} must be a map")
    return tuple(sorted((str(k), str(v)) for k, v in found.items()))


def parse_artifact_generator(spec: dict[str, Any]) -> ArtifactGeneratorSpec:
    check_references(spec)
    sources = tuple(_source(s, f"spec.sources[{i}]")
                    for i, s in enumerate(_list(spec.get("sources"), "spec.sources", MAX_SOURCES)))
    aliases = {s.alias for s in sources}
    if len(aliases) != len(sources):
        duplicate = next(s.alias for s in sources if [x.alias for x in sources].count(s.alias) > 1)
        raise SpecError("ValidationFailed", f"duplicate source alias {duplicate!r} found")
    pattern = str(spec.get("pathPattern") or "")
    matched = _FROM.match(pattern) if pattern else None
    if pattern and (matched is None or matched.group(1) not in aliases or len(pattern) > 1024):
        raise SpecError("ValidationFailed", "spec.pathPattern must be @<alias of a source>/<path with {captures}>")
    artifacts = tuple(_artifact(a, f"spec.artifacts[{i}]", aliases, bool(pattern))
                      for i, a in enumerate(_list(spec.get("artifacts"), "spec.artifacts", MAX_ARTIFACTS)))
    names = [a.name for a in artifacts]
    if len(set(names)) != len(names):
        raise SpecError("ValidationFailed", f"duplicate artifact name {next(n for n in names if names.count(n) > 1)!r} "
                                            "found")
    return ArtifactGeneratorSpec(sources, artifacts, pattern, _metadata(spec, "labels"),
                                 _metadata(spec, "annotations"))


@dataclass(frozen=True)
class ExternalArtifactSpec:
    source_ref: ObjectRef  # what produces the artifact (an ArtifactGenerator, or a third party's controller)


def parse_external_artifact(spec: dict[str, Any]) -> ExternalArtifactSpec:
    check_references(spec)
    ref = spec.get("sourceRef") or {}
    if not isinstance(ref, dict):
        raise SpecError("InvalidSpec", "spec.sourceRef must be a map")
    return ExternalArtifactSpec(ObjectRef(api_version=str(ref.get("apiVersion") or ""),
                                          kind=str(ref.get("kind") or ""), name=str(ref.get("name") or ""),
                                          namespace=str(ref.get("namespace") or "")))
