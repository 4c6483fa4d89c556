"""What a ConfigSync applies of a revision: the manifests of its path as they are, or what kustomize builds of
it (a kustomization.yaml there, or build fields in the spec), and the variables its postBuild substitutes."""

from __future__ import annotations

import base64
import posixpath

import yaml

from helmop.api import manifests, yamlc
from helmop.api.sources import ConfigSyncSpec
from helmop.api.substitution import SubstitutionError, check_names
from helmop.helm.inputs import LARGE_YAML, InputError, Source
from helmop.infra.worker import WorkerTimeout
from helmop.sources import kustomize
from helmop.sources.errors import SourceError

from ..context import Context


async def _load_large(ctx: Context, files: dict[str, bytes]) -> dict[str, manifests.Loaded]:
    """The documents of the large manifest files, loaded in the YAML worker process (a few hundred kilobytes
    of dense YAML hold the event loop for a noticeable time)."""
    loaded: dict[str, manifests.Loaded] = {}
    for path, data in files.items():
        if manifests.is_manifest(path) and len(data) > LARGE_YAML:
            try:
                loaded[path] = await ctx.services.yaml.documents(data.decode())
            except (yaml.YAMLError, UnicodeDecodeError) as exc:  # reported as parse() reports the file
                loaded[path] = exc if isinstance(exc, yaml.YAMLError) else yamlc.YamlBomb("not UTF-8 text")
            except WorkerTimeout as exc:
                loaded[path] = yamlc.YamlBomb(f"loading it {exc}")
    return loaded


async def read(ctx: Context, spec: ConfigSyncSpec, source: Source) -> tuple[list[manifests.Manifest], list[str]]:
    """The objects of spec.path at the source's commit: its manifests as they are, or what kustomize builds
    of it (a kustomization.yaml there, or build fields in the spec); errors as ``file:line: problem``."""
    git, folder = ctx.services.git, kustomize.folder_of(spec.path)
    # Only manifests are read (each within the per-file limit); other files are never inflated.
    files = await git.files(source.url, source.sha, spec.path, source.auth,
                            wanted=lambda rel: manifests.is_manifest(rel) or rel in kustomize.FILES)
    # Repository-relative names, so messages point at the file as the user knows it.
    named = {posixpath.join(folder, rel): data for rel, data in files.items()}
    if not spec.build and not kustomize.kustomization_of(named, folder):
        return manifests.parse(named, await _load_large(ctx, named))
    # a build reads the whole tree (bases, components, generators' files), within the same limits
    tree = await git.files(source.url, source.sha, "", source.auth)
    built = {f"{folder or '.'}/(kustomize build).yaml": (await ctx.services.kustomize.build(
        tree, folder, spec.build, spec.deadline)).encode()}
    found, errors = manifests.parse(built, await _load_large(ctx, built))
    limit = ctx.services.kustomize.limits.objects
    if len(found) > limit:
        raise SourceError("BuildTooLarge", f"the kustomize build of {folder or '.'} has {len(found)} objects "
                                           f"(at most {limit})", transient=False)
    return found, errors


async def variables(ctx: Context, namespace: str, spec: ConfigSyncSpec) -> tuple[dict[str, str], list[str]]:
    """spec.postBuild's variables (substituteFrom in order, then substitute), and the values that came from
    Secrets (masked wherever a message could quote them)."""
    variables: dict[str, str] = {}
    secrets: list[str] = []
    for ref in spec.post_build.substitute_from:
        plural = "secrets" if ref.kind == "Secret" else "configmaps"
        obj = await ctx.services.kube.get(f"/api/v1/namespaces/{namespace}/{plural}/{ref.name}")
        if obj is None:
            if ref.optional:
                continue
            raise InputError("SubstituteFromNotFound", f"spec.postBuild.substituteFrom: {ref.kind} {namespace}/"
                                                       f"{ref.name} does not exist", transient=True)
        data = {str(k): str(v) for k, v in (obj.get("data") or {}).items()}
        if ref.kind == "Secret":
            data = {k: base64.b64decode(v).decode(errors="replace") for k, v in data.items()}
            secrets += [v for v in data.values() if len(v) >= 3]
        try:
            check_names(data)
        except SubstitutionError as exc:
            raise InputError("SubstituteFromInvalid", f"{ref.kind} {namespace}/{ref.name}: {exc}",
                             transient=False) from None
        variables.update(data)
    return {**variables, **dict(spec.post_build.substitute)}, secrets
