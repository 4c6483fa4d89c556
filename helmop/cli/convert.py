"""``helmop convert -f FILE|DIR|-``: Flux's manifests as helmop's kinds (``--to flux``: back), offline.

Each file is rewritten document by document: what converts (:mod:`helmop.api.flux.convert`) is written anew,
everything else (other objects, comments between documents, kustomization.yaml files) is kept as it was. What
cannot be converted is named, file and line, and makes the exit status 1.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import yaml

from helmop.api import k8syaml, yamlc
from helmop.api.errors import SpecError
from helmop.api.flux.convert import convert
from helmop.api.manifests import YamlProblem, is_manifest

from .errors import Failed


@dataclass
class FileResult:
    text: str
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def convert_text(text: str, origin: str, to_flux: bool) -> FileResult:
    try:
        documents = yamlc.documents(text)
    except yaml.YAMLError as exc:
        problem = YamlProblem.of(exc)
        return FileResult(text, errors=[f"{origin}{problem.at}: not valid YAML: {problem.problem}"])
    result = FileResult("")
    pieces, at = [], 0
    for node, obj in documents:
        if not isinstance(obj, dict):
            continue
        where = f"{origin}:{node.start_mark.line + 1}"
        meta = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
        what = f"{obj.get('kind')} {meta.get('namespace') or 'default'}/{meta.get('name', '')}"
        try:
            done = convert(obj, to_flux)
        except SpecError as exc:
            result.errors.append(f"{where}: {what}: {exc.reason}: {exc}")
            continue
        if done is None:
            continue
        result.notes += [f"{where}: {what}: {note}" for note in done.notes]
        pieces += [text[at:node.start_mark.index], k8syaml.dump_all([done.obj])]
        at = node.end_mark.index
    result.text = "".join(pieces) + text[at:]
    return result


def _files(path: Path) -> list[tuple[Path, str]]:
    """(file, its name in messages and under --output-dir) of every manifest file ``path`` is or holds."""
    if path.is_file():
        return [(path, path.name)]
    if not path.is_dir():
        raise Failed(f"{path}: no such file or directory")
    return [(file, str(file.relative_to(path))) for file in sorted(path.rglob("*"))
            if file.is_file() and is_manifest(file.name)
            and not any(part.startswith(".") for part in file.relative_to(path).parts)]


def run(paths: list[str], to_flux: bool, output_dir: str | None, out: TextIO, err: TextIO) -> bool:
    """Convert every file; print the result (or write it under ``output_dir``); True when nothing failed."""
    ok, printed = True, False
    for root in paths:
        for file, name in [(None, "stdin.yaml")] if root == "-" else _files(Path(root)):
            try:
                text = sys.stdin.read() if file is None else file.read_text()
            except (OSError, UnicodeDecodeError) as exc:
                print(f"error: {file}: {exc}", file=err)
                ok = False
                continue
            result = convert_text(text, str(file or "-"), to_flux)
            for line in result.errors:
                print(f"error: {line}", file=err)
            for line in result.notes:
                print(f"note: {line}", file=err)
            ok = ok and not result.errors
            if output_dir is not None:
                target = Path(output_dir) / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(result.text)
            else:
                separator = "---\n" if printed else ""
                out.write(f"{separator}# {file or '-'}\n{result.text.removeprefix('---').lstrip(chr(10))}")
                if not result.text.endswith("\n"):
                    out.write("\n")
                printed = True
    return ok
