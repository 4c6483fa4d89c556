"""Flux's generated kustomization: what kustomize-controller builds of a folder holding no kustomization file
(``fluxcd/pkg`` ``kustomize_generator.go``). Pure, over a repository's file names.

The folder is walked in lexical order: a sub-folder holding a kustomization file is a resource of its own (built
by kustomize as it says, and not descended into); any other sub-folder is descended into, at any depth; a file
counts when its name ends in exactly ``.yaml`` or ``.yml`` (``.json``, ``.YAML`` and the rest are skipped). A
folder with nothing that counts builds into no objects, which is no error.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass

FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")  # kustomize's recognised names
MANIFEST_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class Generated:
    """The resources of a generated kustomization, as repository paths, in the order of Flux's walk."""

    resources: tuple[str, ...] = ()
    folders: frozenset[str] = frozenset()  # those of ``resources`` that are kustomize folders

    @property
    def files(self) -> tuple[str, ...]:
        """The manifest files among the resources (parsed as they are)."""
        return tuple(path for path in self.resources if path not in self.folders)


def generate(names: Iterable[str], folder: str) -> Generated:
    """The kustomization Flux generates for ``folder`` ("" for the root) of the repository whose files are
    ``names``; call it for a folder that holds no kustomization file itself."""
    prefix = f"{folder}/" if folder else ""
    under = sorted(tuple(name[len(prefix):].split("/")) for name in names if name.startswith(prefix))
    kustomized = {parts[:-1] for parts in under if len(parts) > 1 and parts[-1] in FILES}
    resources: list[str] = []
    folders: set[str] = set()
    for parts in under:  # sorted by path segments: the order of a depth-first walk in lexical order
        stop = next((parts[:i] for i in range(1, len(parts)) if parts[:i] in kustomized), None)
        if stop is not None:
            path = posixpath.join(folder, *stop)
            if path not in folders:
                folders.add(path)
                resources.append(path)
        elif parts[-1].endswith(MANIFEST_SUFFIXES):
            resources.append(posixpath.join(folder, *parts))
    return Generated(tuple(resources), frozenset(folders))
