"""The build of a ConfigSync (Flux's Kustomization): what one revision of its source holds under its path, as
the objects it applies. One stage, the same for the operator and ``helmop render``: the source's artifact ->
SOPS-encrypted files decrypted (spec.decryption) -> its manifests as they are, or what kustomize builds of them
-> Secrets' encrypted entries decrypted -> variables substituted and commonMetadata set.

Bounded as every way bytes enter the operator: the artifact's reader bounds the tree (size, entries, paths
inside its root), large YAML is loaded in the worker process, a kustomize build is confined and bounded
(:mod:`.kustomize`) and its object count capped. Errors are :class:`SourceError` with a specific reason, or
:class:`SubstitutionError` for postBuild.
"""

from __future__ import annotations

import asyncio
import json
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass

import yaml

from helmop.api import manifests, yamlc
from helmop.api.kept import Kept
from helmop.api.sources import ConfigSyncSpec
from helmop.api.substitution import post_build
from helmop.infra.offload import SMALL, by_size
from helmop.infra.worker import Worker, WorkerTimeout

from . import generated, kustomize, origins
from .buildcache import key_of
from .decryption.keys import Keys
from .decryption.repository import Decryptor, still_encrypted
from .errors import SourceError
from .trees import Artifact

# Parsed manifests by the content of their files: a thousand ConfigSyncs of one revision parse the same few files
# (parsing was a third of their builds' CPU). Kept as JSON, so that every reader gets objects of its own to change.
_PARSED: Kept[str, str] = Kept(16 << 20)


@dataclass(frozen=True)
class Built:
    objects: list[manifests.Manifest]
    plaintexts: list[str]  # what was decrypted: masked in every message about the object


@dataclass(frozen=True)
class Builder:
    kustomize: kustomize.Kustomize
    yaml: Worker | None = None  # large YAML loaded there (None: here)
    scope: str | None = None  # the namespace of the object building: its builds may be kept (kustomize.Kustomize)

    async def build(self, artifact: Artifact, spec: ConfigSyncSpec, variables: Mapping[str, str], *,
                    strict: bool = False, keys: Keys | None = None) -> Built:
        """What the ConfigSync ``spec`` applies of ``artifact``, decrypted with ``keys`` when it asks
        (spec.decryption), its postBuild ``variables`` substituted."""
        decryptor = Decryptor(keys if keys is not None else Keys()) if spec.decryption is not None else None
        found, size = await self._objects(artifact, spec, decryptor)
        # substitution dumps and re-reads every object: off the loop when they are large
        substituted = await by_size(size, SMALL, post_build, found, spec, variables, strict=strict,
                                    keep=decryptor is None)
        return Built(substituted, decryptor.plaintexts if decryptor else [])

    async def _objects(self, artifact: Artifact, spec: ConfigSyncSpec,
                       decryptor: Decryptor | None) -> tuple[list[manifests.Manifest], int]:
        """The objects of spec.path: its manifests as they are, or what kustomize builds of it (a kustomization
        file there, in a sub-folder Flux's generated kustomization names, or build fields in the spec), and the
        bytes of YAML they were read from. A broken file stops the whole build."""
        folder = kustomize.folder_of(spec.path)
        # Only manifests and kustomization files are read (each within the per-file limit); nothing else inflated.
        files = await artifact.files(spec.path, lambda rel: manifests.is_manifest(rel)
                                     or posixpath.basename(rel) in generated.FILES)
        # Repository-relative names, so messages point at the file as the user knows it.
        named = {posixpath.join(folder, rel): data for rel, data in files.items()}
        layout = None if kustomize.kustomization_of(named, folder) else generated.generate(named, folder)
        plain = {path: named[path] for path in layout.files} if layout is not None else {}
        if layout is not None and not layout.folders and not spec.build:  # manifests as they are
            if decryptor is not None:
                plain = await asyncio.to_thread(decryptor.tree, plain)
            found = await self._parsed(plain, keep=decryptor is None)
            size = sum(map(len, plain.values()))
        else:
            # a broken manifest named before kustomize runs, as Flux's generator names it
            await self._parsed(plain, keep=decryptor is None)
            # a build reads the whole tree (bases, components, generators' files), within the same limits
            tree = await artifact.files("")
            if decryptor is not None:
                roots = [folder, *(posixpath.normpath(posixpath.join(folder, c)) for c in spec.build.components)]
                tree = await asyncio.to_thread(decryptor.tree, tree, roots)
            scope = self.scope if decryptor is None else None  # a decrypted build is never kept
            text = await self.kustomize.build(tree, folder, spec.build, spec.deadline, scope)
            found = await self._parsed({f"{folder or '.'}/(kustomize build).yaml": text.encode()},
                                       keep=decryptor is None)
            size = len(text)
            if spec.build.build_metadata:
                found = [manifests.Manifest(origins.relocated(m.obj, folder, kustomize.OVERLAY_REPO), m.origin)
                         for m in found]
        limit = self.kustomize.limits.objects
        if len(found) > limit:
            raise SourceError("BuildTooLarge", f"{folder or '.'} holds {len(found)} objects (at most {limit})",
                              transient=False)
        if decryptor is not None:  # off the loop: a wrapped OpenPGP key is opened by a child process
            found = await asyncio.to_thread(decryptor.secret_entries, found)
        still_encrypted(found, decrypting=decryptor is not None)
        return found, size

    async def _parsed(self, files: dict[str, bytes], *, keep: bool) -> list[manifests.Manifest]:
        """The objects of manifest ``files``; ManifestInvalid naming every broken one (at most five). ``keep``:
        they may be kept for the next parse of the same files (never what was decrypted)."""
        loaded = await self._load_large(files)
        size = sum(len(data) for path, data in files.items() if path not in loaded)
        # Only what is parsed on the loop is kept (kept as JSON, read back as JSON, both there): larger trees are
        # parsed in a thread, where their time is no one's wait.
        key = key_of("manifests", "", "", "", files) if keep and not loaded and size <= SMALL else ""
        kept = _PARSED.get(key) if key else None
        if kept is not None:
            return [manifests.Manifest(obj, origin) for obj, origin in json.loads(kept)]
        found, errors = await by_size(size, SMALL, manifests.parse, files, loaded)
        if errors:
            raise SourceError("ManifestInvalid", f"{len(errors)} broken manifest(s), nothing applied: "
                                                 + "; ".join(errors[:5]), transient=False)
        if key:
            text = json.dumps([[item.obj, item.origin] for item in found])
            _PARSED.put(key, text, len(text))
        return found

    async def _load_large(self, files: dict[str, bytes]) -> dict[str, manifests.Loaded]:
        """The documents of the large manifest files, loaded in the YAML worker process (a few hundred
        kilobytes of dense YAML hold the event loop for a noticeable time)."""
        loaded: dict[str, manifests.Loaded] = {}
        for path, data in files.items():
            if self.yaml is None or not manifests.is_manifest(path) or len(data) <= yamlc.LARGE:
                continue
            try:
                loaded[path] = await self.yaml.documents(data.decode())
            except (yaml.YAMLError, UnicodeDecodeError) as exc:  # reported as parse() reports the file
                loaded[path] = exc if isinstance(exc, yaml.YAMLError) else yamlc.YamlBomb("not UTF-8 text")
            except WorkerTimeout as exc:
                loaded[path] = yamlc.YamlBomb(f"loading it {exc}")
        return loaded
