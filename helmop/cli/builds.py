"""What a ConfigSync would apply of a local folder, built offline exactly as the operator builds it (Flux's
``flux build kustomization``): the same kustomize build over the repository the folder belongs to, the same
post-build variables (from ``--substitute`` and ``--substitute-from-file``) and commonMetadata."""

from __future__ import annotations

import os
from pathlib import Path

from helmop.api.decryption import Decryption
from helmop.api.sources import ConfigSyncSpec, PostBuild
from helmop.api.substitution import SubstitutionError, check_names
from helmop.infra import confine
from helmop.sources import generated, kustomize
from helmop.sources.build import Builder, Built
from helmop.sources.decryption.keys import KeyInvalid, Keys
from helmop.sources.errors import SourceError
from helmop.sources.git import Limits
from helmop.sources.kustomize import Kustomize
from helmop.sources.trees import TreeArtifact

from .errors import Failed, program


def is_overlay(path: Path) -> bool:
    """A folder kustomize builds (it holds a kustomization file)."""
    return path.is_dir() and any((path / name).is_file() for name in generated.FILES)


def repository_root(path: Path) -> Path:
    """The repository ``path`` belongs to: the nearest folder above it holding ``.git``; else the current
    directory when ``path`` is inside it; else ``path`` itself. A build may read only what is inside."""
    path = path.resolve()
    for folder in (path, *path.parents):
        if (folder / ".git").exists():
            return folder
    here = Path.cwd().resolve()
    return here if here == path or here in path.parents else path


def read_repository(root: Path, limits: Limits | None = None) -> dict[str, bytes]:
    """Every file under ``root`` (``.git`` left out), within the limits the operator reads a repository with; a
    link is read as the file it names when that stays inside ``root``, else refused."""
    limits = limits or Limits()
    files: dict[str, bytes] = {}
    total = 0
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for name in sorted(names):
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            real = path.resolve()
            if root != real and root not in real.parents:
                raise Failed(f"{rel}: a link to {real}, outside {root}")
            if not real.is_file():
                continue
            size = real.stat().st_size
            total += size
            if size > limits.max_file or total > limits.max_total or len(files) >= limits.max_entries:
                raise Failed(f"{root} is larger than a repository the operator reads ({limits.max_entries} files, "
                             f"{limits.max_file >> 20} MiB a file, {limits.max_total >> 20} MiB in all)")
            files[rel] = real.read_bytes()
    return files


def variables(pairs: list[str], files: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` pairs, and files of such lines (``#`` starts a comment): later ones win, pairs last."""
    out: dict[str, str] = {}
    lines = [(file, line) for file in files for line in Path(file).read_text().splitlines()]
    for where, line in [*lines, *(("--substitute", pair) for pair in pairs)]:
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        key, sep, value = text.partition("=")
        if not sep:
            raise Failed(f"{where}: {text[:80]!r} is not KEY=VALUE")
        out[key.strip()] = value
    try:
        check_names(out)
    except SubstitutionError as exc:
        raise Failed(str(exc)) from None
    return out


def keys_of(files: list[str]) -> Keys | None:
    """The SOPS keys of ``--decrypt`` files (age identities, or armored OpenPGP private keys, told apart by what
    they hold); None when there are none."""
    if not files:
        return None
    entries = {}
    for i, name in enumerate(files):
        data = Path(name).read_bytes()
        entries[f"{i}.agekey" if b"AGE-SECRET-KEY-" in data else f"{i}.asc"] = data
    try:
        return Keys.of_entries(entries, "--decrypt")
    except KeyInvalid as exc:
        raise Failed(str(exc)) from None


async def build(path: Path, values: dict[str, str], cache: Path, *, strict: bool = False,
                keys: Keys | None = None) -> Built:
    """The objects a ConfigSync over ``path`` applies, its variables ``values``, decrypted with ``keys`` when
    given: the operator's build stage."""
    root = repository_root(path)
    folder = kustomize.folder_of(path.resolve().relative_to(root).as_posix())
    spec = ConfigSyncSpec(source_name="", path=folder, post_build=PostBuild(substitute=tuple(values.items())),
                          decryption=Decryption() if keys is not None else None)
    # confined where the kernel can (a pull request's repository is anyone's); elsewhere as kustomize itself would
    builder = Kustomize(program("kubectl"), cache / "kustomize", confined=confine.landlock_abi() > 0)
    try:
        return await Builder(builder).build(TreeArtifact(read_repository(root)), spec, values, strict=strict, keys=keys)
    except (SourceError, SubstitutionError) as exc:
        raise Failed(str(exc)) from None
