"""The annotations kustomize's ``buildMetadata`` adds to what it builds (``config.kubernetes.io/origin``: the file
an object came from, or the generator that made it; ``alpha.config.kubernetes.io/transformations``: where each
transformer that changed it was configured), naming files as Flux's build names them. Pure.

Flux writes the spec's fields into the kustomization of spec.path, so kustomize names files relative to that
folder; helmop builds through a kustomization of its own beside a copy of the repository, whose paths
(``../repo/<file>``) are turned back into spec.path's, and whose own file is the folder's kustomization.yaml.
"""

from __future__ import annotations

import posixpath
from typing import Any

import yaml

from helmop.api import yamlc

ORIGIN = "config.kubernetes.io/origin"
TRANSFORMATIONS = "alpha.config.kubernetes.io/transformations"
_PATH_KEYS = ("path", "configuredIn")


def relocated(obj: dict[str, Any], folder: str, repo: str) -> dict[str, Any]:
    """``obj`` with the paths of its build annotations relative to ``folder`` of the repository, not to the
    kustomization that placed the repository's copy at ``repo``."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    moved = {key: _moved(annotations[key], folder, repo) for key in (ORIGIN, TRANSFORMATIONS) if key in annotations}
    if not moved:
        return obj
    return {**obj, "metadata": {**obj["metadata"], "annotations": {**annotations, **moved}}}


def _moved(text: Any, folder: str, repo: str) -> Any:
    try:
        value = yamlc.load(str(text))
    except yaml.YAMLError:
        return text  # not kustomize's: left as it is
    entries = value if isinstance(value, list) else [value]
    for entry in entries:
        for key in _PATH_KEYS:
            if isinstance(entry, dict) and isinstance(entry.get(key), str):
                entry[key] = _path(entry[key], folder, repo)
    return yaml.safe_dump(value, sort_keys=False, default_flow_style=False)


def _path(path: str, folder: str, repo: str) -> str:
    if not path.startswith(f"{repo}/"):
        return path  # helmop's own kustomization (the folder's, to Flux), or a remote origin
    return posixpath.relpath(path[len(repo) + 1:], folder or ".")
