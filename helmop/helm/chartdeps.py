"""A chart's declared dependencies, checked before ``helm dependency build`` runs on a tenant's chart:
a ``file://`` repository is a path on the machine helm runs on, so one that leaves the chart would make
helm read (and package into the release) whatever the operator's host has there; a remote one is a host
helm connects to, judged by the address policy first. Pure."""

from __future__ import annotations

import posixpath
from typing import Any
from urllib.parse import urlsplit


def _repositories(meta: Any, lock: Any) -> list[str]:
    """The ``repository`` of every dependency Chart.yaml (``meta``) and Chart.lock (``lock``) declare."""
    found = []
    for document in (meta, lock):
        dependencies = document.get("dependencies") if isinstance(document, dict) else None
        for dependency in dependencies if isinstance(dependencies, list) else []:
            found.append(str(dependency.get("repository") or "") if isinstance(dependency, dict) else "")
    return found


def outside_the_chart(meta: Any, lock: Any = None) -> list[str]:
    """The ``file://`` dependencies of Chart.yaml (``meta``) and Chart.lock (``lock``) that are absolute or
    lead out of the chart's own folder, as they are written (never resolved on the host)."""
    found = []
    for repository in _repositories(meta, lock):
        if not repository.startswith("file://"):
            continue
        path = repository[len("file://"):]
        normal = posixpath.normpath(path or ".")
        if path.startswith("/") or normal == ".." or normal.startswith("../") or "\\" in path or "\0" in path:
            found.append(repository)
    return sorted(set(found))


def remote_hosts(meta: Any, lock: Any = None) -> list[tuple[str, int]]:
    """(host, port) of every remote repository (http, https, oci) the dependencies name."""
    hosts = set()
    for repository in _repositories(meta, lock):
        parts = urlsplit(repository)
        if parts.scheme in ("http", "https", "oci"):
            try:
                port = parts.port or (80 if parts.scheme == "http" else 443)
            except ValueError:  # a port that is no number: helm refuses the URL itself
                continue
            hosts.add((parts.hostname or "", port))
    return sorted(hosts)
