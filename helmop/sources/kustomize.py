"""kustomize builds of a config repository's folder: the real kustomize (`kubectl kustomize`, Kustomize v5)
in a child process, over a private copy of the repository's tree at one commit.

What a build may read is its copy of the repository, and nothing else: that is the kernel's to enforce
(:mod:`helmop.infra.confine`: the build reads beneath the copy only, executes no program but kubectl and opens
no socket), so a kustomization that names a host file, a remote base or a git helper in any spelling fails
inside kustomize. kustomize runs with ``LoadRestrictionsNone`` as Flux's kustomize-controller does (its own
restrictor would refuse ``../common/patch.yaml`` from an overlay, which Flux accepts): the repository root
is the restrictor. Before it runs, every kustomization reachable from the folder is read as kustomize reads
it (keys in any case) and each path it names must be a file or folder of the repository: a URL, an absolute
path or ``../`` out of the root gets a specific reason (``RemoteBaseRefused``, ``PathOutsideRepository``,
``PathNotFound``) naming the file. KRM functions (exec or container) and helm chart inflation are refused too.
These checks give early, friendly reasons; they are not the boundary. A build runs with a time limit, a
data-segment limit and bounds on its output and object count; its error reaches the condition as kustomize
said it, with the repository's paths instead of the private copy's.
"""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
import re
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from helmop.api import k8syaml, yamlc
from helmop.api.sources import Build
from helmop.infra import confine
from helmop.infra.offload import SMALL, by_size

from .buildcache import BuildOutputs, key_of
from .errors import SourceError
from .generated import FILES, Generated, generate
from .git import write_tree

_FUNCTION = ("config.kubernetes.io/function", "config.k8s.io/function")
# What makes an entry that is no file or folder of the repository read as an address (for the reason given)
_REMOTE = re.compile(r"://|^git::|@|\?ref=|\?version=|//|^[\w-]+(\.[\w-]+)+(:\d+)?/")
MAX_KUSTOMIZATIONS = 1000  # reachable from one folder
OVERLAY_REPO = "../repo"  # the copy of the repository, as the kustomization helmop writes names it
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


def _resolve(files: Mapping[str, bytes], base: str, ref: str, where: str) -> tuple[str, bool]:
    """``ref`` (named in the kustomization at ``where``) as a file or folder of the repository, as kustomize
    resolves it: (its path, whether a folder). Anything else is refused, whatever its spelling."""
    if ref.startswith("/") or "\0" in ref:
        raise _refused("PathOutsideRepository", f"{where}: {ref[:200]!r} is an absolute path")
    path = posixpath.normpath(posixpath.join(base, ref))
    if path == ".." or path.startswith("../"):
        raise _refused("PathOutsideRepository", f"{where}: {ref[:200]!r} is outside the repository")
    path = "" if path == "." else path
    if path in files:
        return path, False
    if _is_dir(files, path):
        return path, True
    if _REMOTE.search(ref):
        raise _refused("RemoteBaseRefused", f"{where}: {ref[:200]!r} is a remote base or resource; only paths "
                                            "inside the repository are built")
    raise _refused("PathNotFound", f"{where}: {path!r} does not exist in the repository")


def _check_file(files: Mapping[str, bytes], path: str, where: str) -> None:
    if any(marker.encode() in files[path] for marker in _FUNCTION):
        raise _refused("FunctionRefused", f"{where}: {path} declares a KRM function (exec or container); helmop "
                                          "runs no program a repository names")


def check(files: Mapping[str, bytes], folder: str) -> None:
    """Refuse, with a reason naming the file, what a build of ``folder`` would read from outside the repository,
    or run (early and friendly: the build's confinement does not depend on it)."""
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
        fields = _Fields(body)
        for key in ("helmCharts", "helmChartInflationGenerator", "helmGlobals"):
            if any(fields.all(key)):
                raise _refused("HelmChartRefused", f"{where}: {key}: kustomize's helm inflation is off (a chart "
                                                   "belongs in a HelmRelease)")
        for ref in _references(fields, where):
            path, is_dir = _resolve(files, current, ref, where)
            if is_dir:
                pending.append(path)
            else:
                _check_file(files, path, where)


class _Fields:
    """A kustomization's fields as kustomize reads them: Go's JSON decoding matches keys in any case."""

    def __init__(self, body: dict[Any, Any]) -> None:
        self.by_name: dict[str, list[Any]] = {}
        for key, value in body.items():
            self.by_name.setdefault(str(key).casefold(), []).append(value)

    def all(self, name: str) -> list[Any]:
        return self.by_name.get(name.casefold(), [])

    def strings(self, name: str) -> list[str]:
        return [v for value in self.all(name) for v in _strings(value)]

    def maps(self, name: str) -> list[_Fields]:
        return [_Fields(item) for value in self.all(name) if isinstance(value, list)
                for item in value if isinstance(item, dict)]


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _references(body: _Fields, where: str) -> list[str]:
    """Every path a kustomization names (an inline patch, transformer or generator literal is not a path)."""
    refs = [*body.strings("resources"), *body.strings("bases"), *body.strings("components"),
            *body.strings("crds"), *body.strings("configurations")]
    refs += [p for p in body.strings("patchesStrategicMerge") if "\n" not in p and ":" not in p]
    refs += [p for key in ("transformers", "generators", "validators") for p in body.strings(key) if "\n" not in p]
    refs += _path_fields(body) + _generator_files(body)
    for ref in refs:
        if not ref.strip():
            raise _refused("BuildFailed", f"{where}: an empty path")
    return refs


def _path_fields(body: _Fields) -> list[str]:
    """The ``path`` of patches, JSON 6902 patches, replacements and openapi."""
    refs = [path for key in ("patches", "patchesJson6902", "replacements") for item in body.maps(key)
            for path in item.all("path") if isinstance(path, str)]
    return refs + [path for value in body.all("openapi") if isinstance(value, dict)
                   for path in _Fields(value).all("path") if isinstance(path, str)]


def _generator_files(body: _Fields) -> list[str]:
    """The files and env files ConfigMap and Secret generators read."""
    refs: list[str] = []
    for key in ("configMapGenerator", "secretGenerator"):
        for item in body.maps(key):
            refs += [f.partition("=")[2] or f for f in item.strings("files")]
            refs += item.strings("envs") + [e for e in item.all("env") if isinstance(e, str)]
    return refs


def read_files(files: Mapping[str, bytes], folders: list[str]) -> list[tuple[str, str, str]]:
    """The files the kustomizations reachable from ``folders`` read: (repository path, the name it is read under,
    how: ``files`` or ``envs`` of a secretGenerator, else ``manifest``: a resource, patch or other file)."""
    pending, seen, found = list(folders), set[str](), list[tuple[str, str, str]]()
    for folder in folders:  # a folder without a kustomization file: Flux's generated one
        if not kustomization_of(files, folder):
            layout = generate(files, folder)
            found += [(path, path, "manifest") for path in layout.files]
            pending += layout.folders
    while pending and len(seen) <= MAX_KUSTOMIZATIONS:
        current = pending.pop()
        where = kustomization_of(files, current)
        if current in seen or not where:
            continue
        seen.add(current)
        for ref, name, how in _named(files, where):
            try:
                path, is_dir = _resolve(files, current, ref, where)
            except SourceError:
                continue
            if is_dir:
                pending.append(path)
            else:
                found.append((path, name, how))
    return found


def _named(files: Mapping[str, bytes], where: str) -> list[tuple[str, str, str]]:
    """What the kustomization file ``where`` names: (reference, the name it is read under, how); nothing when it
    is not YAML (the build says what is wrong with it)."""
    try:
        body = yamlc.load(files[where]) or {}
    except yaml.YAMLError:
        return []
    fields = _Fields(body if isinstance(body, dict) else {})
    named: list[tuple[str, str, str]] = []
    for item in fields.maps("secretGenerator"):
        named += [(ref.partition("=")[2] or ref, ref.partition("=")[0], "files") for ref in item.strings("files")]
        named += [(ref, ref, "envs") for ref in item.strings("envs")]
    generated = {ref for ref, _, _ in named}
    return named + [(ref, ref, "manifest") for ref in _references(fields, where) if ref not in generated]


def components_of(files: Mapping[str, bytes], folder: str, build: Build) -> list[tuple[int, str]]:
    """spec.components (with their index), without those that do not exist when spec.ignoreMissingComponents says
    so (Flux drops them; otherwise they fail the build)."""
    def exists(component: str) -> bool:
        path = posixpath.normpath(posixpath.join(folder, component))
        return path in files or _is_dir(files, path)

    return [(i, c) for i, c in enumerate(build.components) if not build.ignore_missing_components or exists(c)]


def overlay(files: Mapping[str, bytes], folder: str, build: Build, repo: str,
            generated: Generated | None = None) -> dict[str, Any]:
    """The kustomization helmop writes over ``folder`` (``repo``: where the copy of the repository is, relative to
    the overlay): the folder's own kustomization, or Flux's ``generated`` one for a folder without, with the
    ConfigSync's build fields as kustomize's."""
    if generated is None:
        resources = [posixpath.join(repo, folder) if folder else repo]
    else:
        resources = [posixpath.join(repo, path) for path in generated.resources]
    out: dict[str, Any] = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                           "resources": resources}
    if not resources:
        out["namespace"] = "_placeholder"  # as Flux writes it for a folder with no resources
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
    if build.build_metadata:
        out["buildMetadata"] = list(build.build_metadata)
    components = []
    for i, component in components_of(files, folder, build):
        path, _ = _resolve(files, folder, component, f"spec.components[{i}]")
        if not kustomization_of(files, path):
            raise _refused("PathNotFound", f"spec.components[{i}]: {path or '.'} has no kustomization.yaml")
        components.append(posixpath.join(repo, path) if path else repo)
    if components:
        out["components"] = components
    return out


# kustomize's environment: no program found on a PATH, no home of the operator's, and git (were it ever started)
# with every transport forbidden and no configuration read
_ENV = {"PATH": "", "GIT_ALLOW_PROTOCOL": "", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_TERMINAL_PROMPT": "0"}


@dataclass(frozen=True)
class Kustomize:
    """Builds with ``kubectl`` (its ``kustomize`` verb) in private folders under ``workdir``; ``confined``:
    within the kernel's confinement (:mod:`helmop.infra.confine`), refused where the kernel has none; else
    with the checks of the kustomizations' text alone (``helmop run --unconfined-builds``, ``helmop render``
    on a kernel without Landlock)."""

    kubectl: str
    workdir: Path
    limits: Limits = Limits()
    confined: bool = True
    outputs: BuildOutputs | None = None  # builds kept by their inputs (None: every build runs)

    async def build(self, files: dict[str, bytes], folder: str, build: Build, timeout: float = 0.0,
                    scope: str | None = None) -> str:
        """The YAML kustomize builds from ``folder`` of the repository ``files`` (all of its tree), with the
        ConfigSync's ``build`` fields over it; ``timeout``: the spec's, within the limit. ``scope``: the namespace
        of the object building, whose builds of the same inputs may reuse this one's output (None: not kept; a
        decrypted tree)."""
        folder = folder_of(folder)
        generated = None if kustomization_of(files, folder) else generate(files, folder)
        for root in [folder] if generated is None else sorted(generated.folders):
            check(files, root)
        components = components_of(files, folder, build)
        for i, component in components:
            check(files, _resolve(files, folder, component, f"spec.components[{i}]")[0])
        if generated is not None and not generated.resources and not components:
            return ""  # nothing to build (Flux's build of its generated kustomization yields no object either)
        over = (k8syaml.dump(overlay(files, folder, build, OVERLAY_REPO, generated))
                if build or generated is not None else "")
        limit = min(timeout, self.limits.timeout) if timeout > 0 else self.limits.timeout
        if self.outputs is None or scope is None:
            return await self._built(files, folder, over, limit)
        # hashing is fast: a tree of a few MiB is a few ms (a thread's hop costs the loop more below that)
        key = await by_size(sum(map(len, files.values())), SMALL << 6, key_of, scope, self.kubectl, folder, over,
                            files)
        return await self.outputs.built(key, lambda: self._built(files, folder, over, limit))

    async def _built(self, files: dict[str, bytes], folder: str, over: str, timeout: float) -> str:
        """kustomize's output over a private copy of ``files``, with the kustomization ``over`` ("": none) over
        ``folder``. The copy is written and removed in a thread: thousands of files, not the event loop's work."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix="build-", dir=self.workdir))
        try:
            target = await asyncio.to_thread(_write, scratch, files, folder, over)
            return await self._run(scratch, target, timeout)
        finally:
            await asyncio.to_thread(shutil.rmtree, scratch, True)

    async def _run(self, scratch: Path, target: Path, timeout: float) -> str:
        readable = [str(scratch / name) for name in ("repo", "overlay") if (scratch / name).is_dir()]
        line = confine.command(self.kubectl, ["kustomize", "--load-restrictor", "LoadRestrictionsNone", str(target)],
                               read=readable, data_limit=self.limits.memory, confined=self.confined)
        proc = await asyncio.create_subprocess_exec(
            *line, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            cwd=scratch, env={**_ENV, "HOME": str(scratch / "home")}, process_group=0)
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
        if proc.returncode == confine.UNCONFINABLE:
            raise _refused("ConfinementUnavailable", f"{err.decode(errors='replace').strip()[:500]}; kustomize builds "
                                                     "run confined, or with helmop run --unconfined-builds")
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


def _write(scratch: Path, files: dict[str, bytes], folder: str, over: str) -> Path:
    """The build's folders under ``scratch``: the repository's copy and, with a kustomization ``over``, the overlay
    holding it; the folder kustomize builds."""
    (scratch / "repo").mkdir()
    write_tree(files, scratch / "repo")
    if not over:
        return scratch / "repo" / folder
    (scratch / "overlay").mkdir()
    (scratch / "overlay" / "kustomization.yaml").write_text(over)
    return scratch / "overlay"


class _TooLarge(Exception):
    pass
