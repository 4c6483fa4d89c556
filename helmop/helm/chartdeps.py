"""A chart's declared dependencies, checked before ``helm dependency build`` runs on a tenant's chart:
a ``file://`` repository is a path on the machine helm runs on, so one that leaves the chart would make
helm read (and package into the release) whatever the operator's host has there. Pure."""

from __future__ import annotations

import posixpath
from typing import Any


def outside_the_chart(meta: Any, lock: Any = None) -> list[str]:
    """The ``file://`` dependencies of Chart.yaml (``meta``) and Chart.lock (``lock``) that are absolute or
    lead out of the chart's own folder, as they are written (never resolved on the host)."""
    found = []
    for document in (meta, lock):
        dependencies = document.get("dependencies") if isinstance(document, dict) else None
        for dependency in dependencies if isinstance(dependencies, list) else []:
            repository = str(dependency.get("repository") or "") if isinstance(dependency, dict) else ""
            if not repository.startswith("file://"):
                continue
            path = repository[len("file://"):]
            normal = posixpath.normpath(path or ".")
            if path.startswith("/") or normal == ".." or normal.startswith("../") or "\\" in path or "\0" in path:
                found.append(repository)
    return sorted(set(found))
