"""Kubernetes manifests read from a config repository: YAML files, many documents each.

Pure: parsing and checking only. Errors name the file and line so a broken push is easy to find.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from . import yamlc


@dataclass(frozen=True)
class Manifest:
    obj: dict[str, Any]
    origin: str  # "path/in/repo.yaml:<line where its document starts>"

    @property
    def api_version(self) -> str:
        return str(self.obj.get("apiVersion", ""))

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind", ""))

    @property
    def name(self) -> str:
        return str((self.obj.get("metadata") or {}).get("name", ""))


@dataclass(frozen=True)
class YamlProblem:
    """Where (1-based line and column, when known) and what a YAML parse error is, for messages."""

    line: int | None
    column: int | None
    problem: str

    @classmethod
    def of(cls, exc: Exception) -> YamlProblem:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or (str(exc).splitlines() or ["invalid YAML"])[0]
        return cls(mark.line + 1 if mark else None, mark.column + 1 if mark else None, str(problem))

    @property
    def at(self) -> str:
        """" (line L, column C)" or ""."""
        return f" (line {self.line}, column {self.column})" if self.line else ""


def _documents(text: str) -> list[tuple[int, Any]]:
    """(first line, data) of each YAML document in ``text``."""
    return [(node.start_mark.line + 1, data) for node, data in yamlc.documents(text)]


def is_manifest(path: str) -> bool:
    return path.endswith((".yaml", ".yml"))


Loaded = list[tuple[int, Any]] | yaml.YAMLError  # (first line, data) of each document, or why none


def parse(files: dict[str, bytes], loaded: Mapping[str, Loaded] | None = None) -> tuple[list[Manifest], list[str]]:
    """Every object in the ``.yaml``/``.yml`` files, and a list of ``file:line: problem`` errors. ``loaded``:
    files whose documents were loaded elsewhere already (large ones, in a worker process)."""
    found: list[Manifest] = []
    errors: list[str] = []
    for path in sorted(files):
        if not is_manifest(path):
            continue
        try:
            given = (loaded or {}).get(path)
            if isinstance(given, yaml.YAMLError):
                raise given
            docs = given if given is not None else _documents(files[path].decode())
        except UnicodeDecodeError:
            errors.append(f"{path}: not UTF-8 text")
            continue
        except yaml.YAMLError as exc:
            found_problem = YamlProblem.of(exc)
            errors.append(f"{path}{f':{found_problem.line}' if found_problem.line else ''}: {found_problem.problem}")
            continue
        for start, doc in docs:
            if doc is None:
                continue
            where = f"{path}:{start}"
            if not isinstance(doc, dict):
                errors.append(f"{where}: a manifest must be a map, not a {type(doc).__name__}")
                continue
            items = doc.get("items") if str(doc.get("kind", "")).endswith("List") else None
            for item in items if isinstance(items, list) else [doc]:
                manifest = Manifest(item, where)
                missing = [f for f, v in (("apiVersion", manifest.api_version), ("kind", manifest.kind),
                                          ("metadata.name", manifest.name)) if not v]
                if missing:
                    errors.append(f"{where}: missing {', '.join(missing)}")
                else:
                    found.append(manifest)
    return found, errors
