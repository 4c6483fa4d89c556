"""``helmop convert -f FILE|DIR|-``: Flux's manifests as helmop's kinds (``--to flux``: back), offline.

Each file is rewritten document by document: what converts (:mod:`helmop.api.flux.convert`) is written anew,
everything else (other objects, comments between documents, kustomization.yaml files) is kept as it was. Whatever
cannot be converted is named, every field of every object with the file and line it is at, and makes the exit
status 1; the rest of the tree is converted all the same.

The files are read as hostile: at most 5 MiB each (what the operator reads of a repository's file), YAML checked
as the operator checks it, no link followed out of the folder given. A message names fields and files as they are
written, control characters escaped: a name holding a newline or a terminal's escape sequence would otherwise
forge a line of the output.
"""

from __future__ import annotations

import os
import re
import sys
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import yaml

from helmop.api import k8syaml, yamlc
from helmop.api.flux.convert import Refused, convert
from helmop.api.flux.paths import FieldPath
from helmop.api.manifests import YamlProblem, is_manifest
from helmop.decisions.specs import read_spec
from helmop.sources.git import Limits

from .errors import Failed

MAX_FILE = Limits().max_file
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


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
        meta = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
        what = f"{obj.get('kind')} {meta.get('namespace') or 'default'}/{meta.get('name', '')}"
        try:
            done = convert(obj, to_flux, read_spec)
        except Refused as exc:
            result.errors += [f"{origin}:{line}: {what}: {refusal.reason}: {refusal.message}"
                              for line, refusal in sorted(((_line(node, r.field), r) for r in exc.refusals),
                                                          key=lambda pair: pair[0])]
            continue
        result.notes += [f"{origin}:{_line(node, ())}: {what}: {note}" for note in done.notes]
        if done.obj is not None:
            pieces += [text[at:node.start_mark.index], k8syaml.dump_all([done.obj])]
            at = node.end_mark.index
    result.text = "".join(pieces) + text[at:]
    return result


def _line(node: yaml.Node, path: FieldPath) -> int:
    """The line (1-based) of the field at ``path`` in a document's node; of the nearest enclosing field found
    when it is not written there (a merge key's, say), of the document for the empty path."""
    line = node.start_mark.line
    for part in path:
        if isinstance(node, yaml.MappingNode):
            # the last of repeated keys is the one the data holds
            found = next((pair for pair in reversed(node.value) if pair[0].value == part), None)
            if found is None:
                break
            line, node = found[0].start_mark.line, found[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line
        else:
            break
    return line + 1


def _files(path: Path) -> list[tuple[Path, str]]:
    """(file, its name in messages and under --output-dir) of every manifest file ``path`` is or holds; hidden
    files and folders left out, links to folders not followed."""
    if path.is_file():
        return [(path, path.name)]
    if not path.is_dir():
        raise Failed(f"{path}: no such file or directory")
    found = []
    for folder, dirs, names in os.walk(path):
        dirs[:] = [name for name in dirs if not name.startswith(".")]
        found += [(Path(folder) / name, (Path(folder) / name).relative_to(path).as_posix()) for name in names
                  if is_manifest(name) and not name.startswith(".")]
    return sorted(found)


def _read(file: Path | None, root: Path) -> str | None:
    """The text of ``file`` (None: stdin), at most MAX_FILE bytes; None for what is not a file (a dangling link, a
    pipe). OSError or ValueError saying why it is not read."""
    if file is not None:
        real = file.resolve()
        if file != root and root.resolve() not in real.parents:
            raise ValueError(f"a link to {real}, outside {root}: not read")
        if not real.is_file():
            return None
    with open(file, "rb") if file is not None else nullcontext(sys.stdin.buffer) as stream:
        data = stream.read(MAX_FILE + 1)
    if len(data) > MAX_FILE:
        raise ValueError(f"larger than {MAX_FILE >> 20} MiB: not read")
    return data.decode()


def _printable(text: str) -> str:
    """``text`` (one line of a message) with every control character escaped."""
    return _CONTROL.sub(lambda match: f"\\x{ord(match[0]):02x}", text)


def run(paths: list[str], to_flux: bool, output_dir: str | None, out: TextIO, err: TextIO) -> bool:
    """Convert every file; print the result (or write it under ``output_dir``); True when nothing failed."""
    ok, printed = True, False
    for root in paths:
        for file, name in [(None, "stdin.yaml")] if root == "-" else _files(Path(root)):
            origin = _printable(str(file or "-"))
            try:
                text = _read(file, Path(root))
            except (OSError, ValueError) as exc:
                print(f"error: {origin}: {_printable(str(exc))}", file=err)
                ok = False
                continue
            if text is None:
                continue
            result = convert_text(text, origin, to_flux)
            for line in result.errors:
                print(f"error: {_printable(line)}", file=err)
            for line in result.notes:
                print(f"note: {_printable(line)}", file=err)
            ok = ok and not result.errors
            if output_dir is not None:
                target = Path(output_dir) / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(result.text)
            else:
                separator = "---\n" if printed else ""
                out.write(f"{separator}# {origin}\n{result.text.removeprefix('---').lstrip(chr(10))}")
                if not result.text.endswith("\n"):
                    out.write("\n")
                printed = True
    return ok
