"""An ArtifactGenerator's artifacts composed from its sources' files (Flux's source-watcher), in memory and bounded.

Each ``copy`` takes ``@alias/<path or glob>`` into ``@artifact/<path>`` in order:

* a path: a file goes to ``to`` (into it when ``to`` ends with ``/`` or is a folder already), a folder is copied
  as a sub-folder of ``to`` (``@alias/`` alone: its contents into ``to``); a path that does not exist is an error;
* a glob (``*``, ``?``, ``[...]``): what it matches, folders with their files, goes under ``to`` at its path below
  the glob's literal folder, as Flux's docs show it (``@s/deploy/*.yaml`` into ``@artifact/x/`` gives
  ``x/a.yaml``; source-watcher's code keeps ``deploy/`` too, which its docs do not say); ``*`` stays within a
  path segment, ``**`` too, except with Extract, where ``**`` spans folders; matching nothing is an error;
* ``exclude``: patterns (``**`` spanning folders) over the path from the source's root or from the glob's literal
  folder; one without ``/`` matches a name at any depth; all excluded is an error;
* ``strategy``: ``Overwrite`` (default), ``Merge`` (an existing YAML file deep-merged with the new one: maps merged,
  anything else replaced, as Helm's values), ``Extract`` (``.tar.gz``/``.tgz`` archives unpacked into ``to``; a glob
  passes other files by, a path must be one).

``pathPattern`` (``@alias/{env}/apps``) turns the templates into one set of artifacts per folder it matches, its
captures in the names (lowercased, also set as labels) and in the copies' paths. Every error is a SourceError
with reason ``BuildFailed``; the result is bounded as a source's tree."""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import yaml

from helmop.api import yamlc
from helmop.api.generators import ArtifactGeneratorSpec, ArtifactTemplate, Copy
from helmop.api.kinds import is_object_name

from . import tarballs
from .errors import SourceError
from .git import Limits

Files = Mapping[str, bytes]
_GLOB = re.compile(r"[*?\[\]]")
_CAPTURE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_LABEL = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def _failed(message: str) -> SourceError:
    return SourceError("BuildFailed", message, transient=False)


@dataclass(frozen=True)
class Planned:
    """One artifact to generate: its template with pathPattern's captures filled in, and its labels."""

    template: ArtifactTemplate
    labels: tuple[tuple[str, str], ...] = ()


def _folders(files: Files) -> set[str]:
    return {"/".join(name.split("/")[:i]) for name in files for i in range(1, name.count("/") + 1)}


def plan(spec: ArtifactGeneratorSpec, trees: Mapping[str, Files]) -> list[Planned]:
    """The artifacts ``spec`` generates from its sources' trees (by alias)."""
    if not spec.path_pattern:
        return [Planned(t) for t in spec.artifacts]
    alias, _, pattern = spec.path_pattern[1:].partition("/")
    names = _CAPTURE.findall(pattern)
    if len(set(names)) != len(names) or "{" in _CAPTURE.sub("", pattern) or "}" in _CAPTURE.sub("", pattern):
        raise _failed(f"spec.pathPattern {spec.path_pattern!r}: captures must be {{name}}, each once")
    literal = [re.escape(part) for part in _CAPTURE.split(pattern)[::2]]
    regex = re.compile("^" + "".join(p + (f"(?P<{n}>[^/]+)" if i < len(names) else "")
                                     for i, (p, n) in enumerate(zip(literal, [*names, ""], strict=True))) + "$")
    out: list[Planned] = []
    seen: dict[str, str] = {}
    for folder in sorted(_folders(trees[alias])):
        found = regex.match(folder)
        if found is None:
            continue
        raw = found.groupdict()
        lowered = {k: v.lower() for k, v in raw.items()}
        if not all(_LABEL.match(v) for v in lowered.values()):
            raise _failed(f"folder {folder!r}: a capture is not a label value")
        for template in spec.artifacts:
            name = _render(template.name, lowered)
            if not is_object_name(name):
                raise _failed(f"folder {folder!r} names the artifact {name!r}, not an object's name")
            if name in seen:
                raise _failed(f"directories {seen[name]!r} and {folder!r} both resolve to artifact name {name!r}")
            seen[name] = folder
            copies = tuple(replace(c, pattern=_render(c.pattern, raw), to=_render(c.to, raw)) for c in template.copies)
            out.append(Planned(replace(template, name=name, copies=copies), tuple(sorted(lowered.items()))))
    return out


def _render(text: str, captures: Mapping[str, str]) -> str:
    return _CAPTURE.sub(lambda m: captures.get(m.group(1), m.group(0)), text)


DEFAULT_LIMITS = Limits()


def compose(template: ArtifactTemplate, trees: Mapping[str, Files], limits: Limits = DEFAULT_LIMITS) -> tarballs.Tree:
    """The files of one artifact: its copies applied in order to an empty tree."""
    staging: dict[str, bytes] = {}
    for copy in template.copies:
        _apply(copy, trees[copy.source], staging, limits)
        if len(staging) > limits.max_entries or sum(map(len, staging.values())) > limits.max_total:
            raise SourceError("TreeTooLarge", f"artifact {template.name} is larger than a source's tree may be",
                              transient=False)
    return tarballs.Tree(staging)


def _apply(copy: Copy, files: Files, staging: dict[str, bytes], limits: Limits) -> None:
    pattern = copy.pattern
    pairs = _globbed(copy, files) if _GLOB.search(pattern) else _plain(copy, files, staging)
    kept = [(src, dest) for src, dest in pairs if not _excluded(copy, src)]
    if pairs and not kept:
        raise _failed(f"all files matching {pattern!r} in source {copy.source!r} were excluded")
    for src, dest in kept:
        _write(copy, src, dest, files[src], staging, limits)


def _plain(copy: Copy, files: Files, staging: dict[str, bytes]) -> list[tuple[str, str]]:
    src = posixpath.normpath(copy.pattern) if copy.pattern.strip("/") else ""
    src = "" if src == "." else src
    if src and src in files:
        if copy.strategy == "Extract" and not src.endswith((".tar.gz", ".tgz")):
            raise _failed(f"{src!r} of source {copy.source!r} is not a .tar.gz or .tgz to extract")
        into = copy.to.endswith("/") or not copy.to or any(n.startswith(copy.to.rstrip("/") + "/") for n in staging)
        return [(src, posixpath.join(copy.to, posixpath.basename(src)) if into else copy.to)]
    inside = [n for n in sorted(files) if not src or n.startswith(src + "/")]
    if not inside:
        raise _failed(f"source {copy.pattern!r} does not exist in source {copy.source!r}")
    if copy.strategy == "Extract":
        raise _failed(f"{copy.pattern!r} of source {copy.source!r} is a folder: Extract takes an archive or a glob")
    base = posixpath.basename(src)
    return [(n, posixpath.join(copy.to, base, n[len(src) + 1:] if src else n)) for n in inside]


def _literal(pattern: str) -> str:
    """The folder of a glob before its first segment with a wildcard."""
    parts = pattern.split("/")
    index = next(i for i, p in enumerate(parts) if _GLOB.search(p))
    return "/".join(parts[:index])


def _match(pattern: str, path: str, *, doublestar: bool) -> bool:
    """Whether ``path`` matches ``pattern`` segment by segment (``*`` within one; ``**`` any number of
    segments when ``doublestar``, else as ``*``)."""
    def go(pp: list[str], ss: list[str]) -> bool:
        if not pp:
            return not ss
        if doublestar and pp[0] == "**":
            return any(go(pp[1:], ss[i:]) for i in range(len(ss) + 1))
        return bool(ss) and fnmatch.fnmatchcase(ss[0], pp[0].replace("**", "*")) and go(pp[1:], ss[1:])

    return go(pattern.strip("/").split("/"), path.split("/"))


def _globbed(copy: Copy, files: Files) -> list[tuple[str, str]]:
    doublestar = copy.strategy == "Extract"
    literal = _literal(copy.pattern)
    matched = sorted(p for p in {*files, *_folders(files)} if _match(copy.pattern, p, doublestar=doublestar))
    if copy.pattern.endswith("/**") and not doublestar:  # a folder's whole contents
        matched = sorted(p for p in files if p.startswith(literal + "/") or not literal)
    if not matched:
        raise _failed(f"no files match pattern {copy.pattern!r} in source {copy.source!r}")
    out: dict[str, str] = {}
    for path in matched:
        under = [path] if path in files else [n for n in files if n.startswith(path + "/")]
        for name in under:
            if copy.strategy == "Extract" and not name.endswith((".tar.gz", ".tgz")):
                continue  # a glob passes other files by
            rel = name[len(literal) + 1:] if literal else name
            out[name] = posixpath.join(copy.to, rel)
    return sorted(out.items())


def _excluded(copy: Copy, path: str) -> bool:
    literal = _literal(copy.pattern) if _GLOB.search(copy.pattern) else copy.pattern.strip("/")
    below = path[len(literal) + 1:] if literal and path.startswith(literal + "/") else path
    for pattern in copy.exclude:
        if "/" not in pattern and any(fnmatch.fnmatchcase(p, pattern) for p in path.split("/")):
            return True
        if _match(pattern, path, doublestar=True) or _match(pattern, below, doublestar=True):
            return True
    return False


def _write(copy: Copy, src: str, dest: str, data: bytes, staging: dict[str, bytes], limits: Limits) -> None:
    dest = posixpath.normpath(dest)
    if dest.startswith("../") or dest in ("..", ".") or dest.startswith("/"):
        raise _failed(f"{src!r} would be copied outside the artifact ({dest!r})")
    if copy.strategy == "Extract":
        unpacked = tarballs.unpack(data, f"{src} of source {copy.source!r}", limits)
        folder = copy.to.rstrip("/")
        for name, content in unpacked.files.items():
            staging[posixpath.join(folder, name) if folder else name] = content
        return
    if copy.strategy == "Merge" and dest in staging:
        staging[dest] = _merged(staging[dest], data, dest)
        return
    staging[dest] = data


def _merged(old: bytes, new: bytes, where: str) -> bytes:
    """Two YAML files (their documents each merged into one map) deep-merged, the new one winning."""
    try:
        first, second = (_one_map(yamlc.load_all(text), where) for text in (old, new))
    except yaml.YAMLError as exc:
        raise _failed(f"{where}: Merge needs YAML maps: {exc}") from None
    return yaml.safe_dump(_deep(first, second), sort_keys=True).encode()


def _one_map(documents: list[Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for document in documents:
        if document is None:
            continue
        if not isinstance(document, dict):
            raise _failed(f"{where}: Merge needs YAML maps")
        out = _deep(out, document)
    return out


def _deep(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = _deep(out[key], value) if isinstance(out.get(key), dict) and isinstance(value, dict) else value
    return out
