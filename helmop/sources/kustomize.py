"""kustomize builds of a config repository's folder: the real kustomize (`kubectl kustomize`, Kustomize v5)
in a child process, over a private copy of the repository's tree at one commit.

What a build may read is the repository and nothing else. Before kustomize runs, every kustomization
reachable from the folder is read and each path it names (resources, components, patches, generators'
files, CRDs, replacements, transformers) must resolve inside the repository and exist — ``../base`` from
an overlay is fine, ``../../../etc/passwd`` or a URL (a remote base) is refused, naming the file. KRM
functions (exec or container) and helm chart inflation are refused too: kustomize would run a program or
reach a chart repository. A build runs with a time limit, a data-segment limit (``RLIMIT_DATA``: Go
reserves address space it never touches, so an address-space limit would stop it at start) and bounds on
its output and object count; its error reaches the condition as kustomize said it, with the repository's
paths instead of the private copy's.
"""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
import re
import resource
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from helmop.api import k8syaml, yamlc
from helmop.api.sources import Build

from .errors import SourceError
from .git import write_tree

FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
_REMOTE = ("://", "git@", "github.com/", "gitlab.com/", "bitbucket.org/", "?ref=", ".git//", "git::")
_FUNCTION = ("config.kubernetes.io/function", "config.k8s.io/function")
MAX_KUSTOMIZATIONS = 1000  # reachable from one folder
# Go's runtime, when the data-segment limit stops an allocation
_OUT_OF_MEMORY = re.compile(r"^fatal error: (runtime: )?(out of memory|cannot allocate memory)", re.M)


@dataclass(frozen=True)
class Limits:
    timeout: float = 60.0
    memory: int = 512 << 20  # the build's data segment
    output: int = 32 << 20  # bytes of YAML
    objects: int = 10_000


def _refused(reason: str, message: str) -> SourceError:
    return SourceError(reason, message, transient=False)


def folder_of(path: str) -> str:
    """A spec.path as the repository's tree names it: normalized, no leading or trailing slash, "" for the root."""
    normal = posixpath.normpath(path or ".").strip("/")
    return "" if normal == "." else normal


def kustomization_of(files: Mapping[str, bytes], folder: str) -> str:
    """The path of the kustomization file of ``folder`` ("" when it has none)."""
    for name in FILES:
        path = posixpath.join(folder, name) if folder else name
        if path in files:
            return path
    return ""


def _is_dir(files: Mapping[str, bytes], path: str) -> bool:
    prefix = f"{path}/" if path else ""
    return any(name.startswith(prefix) for name in files)


def _inside(base: str, ref: str, where: str) -> str:
    """``ref`` (named in the kustomization at ``where``) as a repository path; refused when it leaves it."""
    if any(marker in ref for marker in _REMOTE):
        raise _refused("RemoteBaseRefused", f"{where}: {ref[:200]!r} is a remote base or resource; only paths "
                                            "inside the repository are built")
    if ref.startswith("/") or "\0" in ref:
        raise _refused("PathOutsideRepository", f"{where}: {ref[:200]!r} is an absolute path")
    path = posixpath.normpath(posixpath.join(base, ref))
    if path == ".." or path.startswith("../"):
        raise _refused("PathOutsideRepository", f"{where}: {ref[:200]!r} is outside the repository")
    return "" if path == "." else path


def _check_file(files: Mapping[str, bytes], path: str, where: str) -> None:
    if path not in files:
        raise _refused("PathNotFound", f"{where}: {path!r} does not exist in the repository")
    text = files[path]
    if any(marker.encode() in text for marker in _FUNCTION):
        raise _refused("FunctionRefused", f"{where}: {path} declares a KRM function (exec or container); helmop "
                                          "runs no program a repository names")


def check(files: Mapping[str, bytes], folder: str) -> None:
    """Refuse what a build of ``folder`` would read from outside the repository, or run."""
    pending, seen = [folder], set()
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        if len(seen) > MAX_KUSTOMIZATIONS:
            raise _refused("BuildTooLarge", f"more than {MAX_KUSTOMIZATIONS} kustomizations reachable from "
                                            f"{folder or '.'}")
        where = kustomization_of(files, current)
        if not where:
            raise _refused("PathNotFound", f"{current or '.'} has no kustomization.yaml")
        try:
            body = yamlc.load(files[where]) or {}
        except yaml.YAMLError as exc:
            raise _refused("BuildFailed", f"{where} is not valid YAML: {getattr(exc, 'problem', exc)}") from None
        if not isinstance(body, dict):
            raise _refused("BuildFailed", f"{where} is not a map")
        for key in ("helmCharts", "helmChartInflationGenerator", "helmGlobals"):
            if body.get(key):
                raise _refused("HelmChartRefused", f"{where}: {key}: kustomize's helm inflation is off (a chart "
                                                   "belongs in a HelmRelease)")
        for ref in _references(body, where):
            path = _inside(current, ref, where)
            if _is_dir(files, path):
                pending.append(path)
            else:
                _check_file(files, path, where)


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _references(body: dict[str, Any], where: str) -> list[str]:
    """Every path a kustomization names (an inline patch or generator literal is not a path)."""
    refs = [*_strings(body.get("resources")), *_strings(body.get("bases")), *_strings(body.get("components")),
            *_strings(body.get("crds")), *_strings(body.get("transformers")), *_strings(body.get("generators")),
            *_strings(body.get("validators")), *_strings(body.get("configurations"))]
    refs += [p for p in _strings(body.get("patchesStrategicMerge")) if "\n" not in p and ":" not in p]
    for key in ("patches", "patchesJson6902", "replacements"):
        for item in body.get(key) or []:
            if isinstance(item, dict) and isinstance(item.get("path"), str):
                refs.append(item["path"])
    openapi = body.get("openapi")
    if isinstance(openapi, dict) and isinstance(openapi.get("path"), str):
        refs.append(openapi["path"])
    for key in ("configMapGenerator", "secretGenerator"):
        for item in body.get(key) or []:
            if not isinstance(item, dict):
                continue
            refs += [f.partition("=")[2] or f for f in _strings(item.get("files"))]
            refs += _strings(item.get("envs")) + ([item["env"]] if isinstance(item.get("env"), str) else [])
    for ref in refs:
        if not ref.strip():
            raise _refused("BuildFailed", f"{where}: an empty path")
    return refs


def overlay(files: Mapping[str, bytes], folder: str, build: Build, repo: str) -> dict[str, Any]:
    """The kustomization helmop writes for a ConfigSync's own build fields, over ``folder`` (``repo``: where the
    copy of the repository is, relative to the overlay): Flux's Kustomization fields as kustomize's."""
    if kustomization_of(files, folder):
        resources = [posixpath.join(repo, folder) if folder else repo]
    else:  # a folder of plain manifests: every YAML file under it, as Flux generates a kustomization for one
        prefix = f"{folder}/" if folder else ""
        resources = [posixpath.join(repo, name) for name in sorted(files)
                     if name.startswith(prefix) and name.endswith((".yaml", ".yml"))]
    out: dict[str, Any] = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                           "resources": resources}
    if build.namespace:
        out["namespace"] = build.namespace
    if build.name_prefix:
        out["namePrefix"] = build.name_prefix
    if build.name_suffix:
        out["nameSuffix"] = build.name_suffix
    if build.patches:
        out["patches"] = [{"patch": p.patch, **({"target": dict(p.target)} if p.target else {})}
                          for p in build.patches]
    if build.images:
        out["images"] = [dict(image) for image in build.images]
    components = []
    for i, component in enumerate(build.components):
        path = _inside(folder, component, f"spec.components[{i}]")
        if not kustomization_of(files, path):
            raise _refused("PathNotFound", f"spec.components[{i}]: {path or '.'} has no kustomization.yaml")
        components.append(posixpath.join(repo, path) if path else repo)
    if components:
        out["components"] = components
    return out


@dataclass(frozen=True)
class Kustomize:
    """Builds with ``kubectl`` (its ``kustomize`` verb) in private folders under ``workdir``."""

    kubectl: str
    workdir: Path
    limits: Limits = Limits()

    async def build(self, files: dict[str, bytes], folder: str, build: Build, timeout: float = 0.0) -> str:
        """The YAML kustomize builds from ``folder`` of the repository ``files`` (all of its tree), with the
        ConfigSync's ``build`` fields over it; ``timeout``: the spec's, within the limit."""
        folder = folder_of(folder)
        if not build and not kustomization_of(files, folder):
            raise _refused("PathNotFound", f"{folder or '.'} has no kustomization.yaml")
        if kustomization_of(files, folder):
            check(files, folder)
        for component in build.components:
            check(files, _inside(folder, component, "spec.components"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix="build-", dir=self.workdir))
        try:
            (scratch / "repo").mkdir()
            write_tree(files, scratch / "repo")
            target = scratch / "repo" / folder
            if build:
                (scratch / "overlay").mkdir()
                text = k8syaml.dump_all([overlay(files, folder, build, "../repo")])
                (scratch / "overlay" / "kustomization.yaml").write_text(text)
                target = scratch / "overlay"
            limit = min(timeout, self.limits.timeout) if timeout > 0 else self.limits.timeout
            return await self._run(scratch, target, limit)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    async def _run(self, scratch: Path, target: Path, timeout: float) -> str:
        proc = await asyncio.create_subprocess_exec(
            self.kubectl, "kustomize", "--load-restrictor", "LoadRestrictionsNone", str(target),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            cwd=scratch, env={"PATH": "/usr/bin:/bin", "HOME": str(scratch)}, process_group=0)
        with contextlib.suppress(ProcessLookupError, OSError):  # at once: it has allocated nothing yet
            resource.prlimit(proc.pid, resource.RLIMIT_DATA, (self.limits.memory, self.limits.memory))
        assert proc.stdout is not None and proc.stderr is not None
        try:
            out, err = await asyncio.wait_for(self._collect(proc), timeout)
        except TimeoutError:
            raise _refused("BuildTimeout", f"the kustomize build did not finish within {timeout:g}s") from None
        except _TooLarge:
            size = self.limits.output
            said = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size} bytes"
            raise _refused("BuildTooLarge", f"the kustomize build printed more than {said}") from None
        finally:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                # asyncio's wait() also waits for the pipes to close: what the process printed and nobody read
                # would keep a paused pipe open, and the wait with it, forever
                await asyncio.gather(_drain(proc.stdout), _drain(proc.stderr))
                await proc.wait()
        if proc.returncode != 0:
            text = err.decode(errors="replace")
            if _OUT_OF_MEMORY.search(text):
                raise _refused("BuildTooLarge", f"the kustomize build needed more than {self.limits.memory >> 20} MiB "
                                                "of memory")
            for private, said in ((f"{scratch}/repo/", ""), ("../repo/", ""), (f"{scratch}/overlay", "(spec)")):
                text = text.replace(private, said)
            raise _refused("BuildFailed", f"kustomize build failed: {text.strip()[:2000]}")
        return out.decode(errors="replace")

    async def _collect(self, proc: asyncio.subprocess.Process) -> tuple[bytes, bytes]:
        assert proc.stdout is not None and proc.stderr is not None
        errors = asyncio.ensure_future(_head(proc.stderr, 64 << 10))
        try:
            chunks, size = [], 0
            while chunk := await proc.stdout.read(1 << 16):
                size += len(chunk)
                if size > self.limits.output:
                    raise _TooLarge()
                chunks.append(chunk)
            await proc.wait()
            return b"".join(chunks), await errors
        finally:  # stopped (too large, out of time): stderr is drained by whoever ends the process
            if not errors.done():
                errors.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await errors


async def _drain(stream: asyncio.StreamReader | None) -> None:
    while stream is not None and await stream.read(1 << 16):
        pass


async def _head(stream: asyncio.StreamReader, limit: int) -> bytes:
    """The first ``limit`` bytes of ``stream``, read to its end (the rest is read and dropped)."""
    kept = b""
    while chunk := await stream.read(1 << 16):
        kept += chunk[:max(0, limit - len(kept))]
    return kept


class _TooLarge(Exception):
    pass
