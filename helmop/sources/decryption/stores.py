"""The file formats SOPS encrypts, read as SOPS reads them and written back in plaintext: YAML (as go-yaml v3
reads it: only true/false are booleans, dates are times, ``<<`` is a plain key), JSON, dotenv, INI (as go-ini
reads it) and binary (a JSON envelope whose ``data`` is the whole file). Each yields a list of branches (YAML's
documents; one for the others) of ordered maps, and the raw ``sops`` metadata, unflattened for dotenv and INI.

What a value is matters to the MAC (an unencrypted value is hashed as Go prints it) and to the AAD (a key must
be a string), so the readers keep what SOPS keeps. Duplicate keys are refused, as go-yaml refuses them."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import yaml
from yaml._yaml import CParser

from helmop.api import k8syaml, yamlc

Branch = dict[str, Any]


class Format(StrEnum):
    YAML = "yaml"
    JSON = "json"
    DOTENV = "dotenv"
    INI = "ini"
    BINARY = "binary"


class StoreError(ValueError):
    """The file is not one of SOPS's stores (the message says why; it never quotes a value)."""


def format_for(path: str) -> Format:
    """The format a file is read and written in, by its name (Flux's rule: anything unknown is binary)."""
    name = path.lower()
    if name.endswith(".dockerconfigjson") or name.endswith(".json"):
        return Format.JSON
    if name.endswith((".yaml", ".yml")):
        return Format.YAML
    if name.endswith(".env"):
        return Format.DOTENV
    if name.endswith(".ini"):
        return Format.INI
    return Format.BINARY


# How each format's encrypted MAC looks in a file: what says a file (or a Secret's entry) is SOPS-encrypted
MARKERS = ((Format.YAML, b"mac: ENC["), (Format.JSON, b'"mac": "ENC['), (Format.DOTENV, b"sops_mac=ENC["),
           (Format.INI, b"[sops]"))


def detect(data: bytes) -> Format | None:
    """The format of a SOPS-encrypted file, by its marker; None for a file that is not one."""
    return next((fmt for fmt, marker in MARKERS if marker in data), None)


class GoTime(str):
    """A YAML timestamp, kept as written; :meth:`go` is how Go prints it (what the MAC hashes)."""

    __slots__ = ()

    def go(self) -> str:
        match = _TIMESTAMP.fullmatch(self)
        assert match is not None  # made only of what matched
        year, month, day, hour, minute, second, fraction, zone = match.groups()
        date = f"{int(year):04d}-{int(month):02d}-{int(day):02d}"
        if hour is None:
            return f"{date}T00:00:00Z"
        fraction = (fraction or "").rstrip("0")
        zone = "Z" if zone in (None, "Z", "z", "+00:00", "-00:00", "+00", "-00") else zone
        zone = zone if len(zone) != 3 else f"{zone}:00"
        return f"{date}T{int(hour):02d}:{int(minute):02d}:{int(second):02d}{'.' + fraction if fraction else ''}{zone}"


# go-yaml v3's timestamp forms: 2006-1-2T15:4:5.999999999Z07:00 (t or space), 2006-1-2 15:4:5.999999999, 2006-1-2
_TIMESTAMP = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})(?:[Tt ](\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d+))?"
                        r"(Z|z|[+-]\d{1,2}(?::\d{2})?)?)?")
_SPECIAL_FLOAT = re.compile(r"[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)")


class _Resolver(yaml.resolver.BaseResolver):
    """go-yaml v3's implicit types of plain scalars (YAML 1.2's core schema, as go-yaml applies it)."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is yaml.ScalarNode and implicit[0] and value[:1] in _NUMBER_START:
            text = str(value)
            if _TIMESTAMP.fullmatch(text):
                return "tag:yaml.org,2002:timestamp"
            if _SPECIAL_FLOAT.fullmatch(text):
                return k8syaml.FLOAT
            return k8syaml.number_tag(text)
        return super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]


_Resolver.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(true|True|TRUE|false|False|FALSE)$"),
                                list("tTfF"))
_Resolver.add_implicit_resolver("tag:yaml.org,2002:null", re.compile(r"^(~|null|Null|NULL|)$"), ["~", "n", "N", ""])
_NUMBER_START = set("-+.0123456789")


class _Constructor(yaml.constructor.SafeConstructor):
    def construct_number(self, node: yaml.ScalarNode) -> int | float:
        text = str(node.value)
        value = float(text.replace(".", "").lower()) if _SPECIAL_FLOAT.fullmatch(text) else k8syaml.go_number(text)
        if value is None:  # an explicit !!int or !!float on something else
            raise yaml.constructor.ConstructorError(None, None, "a tagged number that is none", node.start_mark)
        return value

    def construct_time(self, node: yaml.ScalarNode) -> GoTime:
        return GoTime(node.value)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        keys = [self.construct_object(key, deep=deep) for key, _ in node.value]
        if not all(isinstance(key, str) for key in keys):
            raise yaml.constructor.ConstructorError(None, None, "a key that is not a string", node.start_mark)
        if len(set(keys)) != len(keys):
            raise yaml.constructor.ConstructorError(None, None, "a key defined twice", node.start_mark)
        return super().construct_mapping(node, deep=deep)


_Constructor.yaml_constructors = {
    **yaml.constructor.SafeConstructor.yaml_constructors, k8syaml.INT: _Constructor.construct_number,
    k8syaml.FLOAT: _Constructor.construct_number, "tag:yaml.org,2002:timestamp": _Constructor.construct_time}


class _Loader(CParser, _Constructor, _Resolver):
    def __init__(self, stream: Any) -> None:
        CParser.__init__(self, stream)
        _Constructor.__init__(self)
        _Resolver.__init__(self)


def _yaml(data: bytes) -> list[Any]:
    aliased = yamlc.check(data)
    loader: Any = _Loader(data)
    try:
        documents = []
        while loader.check_data():
            documents.append(loader.get_data())
    finally:
        loader.dispose()
    return yamlc.unshared(documents) if aliased else documents


def documents(data: bytes) -> list[tuple[int, int, Any]]:
    """(start, end, data) of each document of a YAML (or JSON) file, for a document to be replaced in place."""
    if data.lstrip()[:1] in (b"{", b"["):
        return [(0, len(data), _json(data)[0])]
    yamlc.check(data)
    loader: Any = _Loader(data)
    try:
        out = []
        while loader.check_node():
            node = loader.get_node()
            out.append((node.start_mark.index, node.end_mark.index, loader.construct_document(node)))
        return out
    finally:
        loader.dispose()


def _json(data: bytes) -> list[Any]:
    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(pairs)
        if len(out) != len(pairs):
            raise StoreError("a key defined twice")
        return out

    try:
        return [json.loads(data, object_pairs_hook=unique)]
    except RecursionError:
        raise StoreError("nested too deeply") from None


def _dotenv(data: bytes) -> list[Any]:
    branch: Branch = {}
    for number, line in enumerate(_text(data).split("\n"), 1):
        if not line or line.startswith("#"):
            continue  # comments are not data (and are not hashed)
        key, sep, value = line.partition("=")
        if not sep:
            raise StoreError(f"line {number} is not KEY=VALUE")
        if key in branch:
            raise StoreError(f"line {number}: a key defined twice")
        branch[key] = value.replace("\\n", "\n")
    return [branch]


_INI_QUOTES = ('"""', "`")


def _ini(data: bytes) -> list[Any]:
    """go-ini's reading of a file: an implicit DEFAULT section first, ``;``/``#`` comment lines, ``key = value`` or
    ``key: value`` trimmed, an inline comment cut at the first ``#`` or ``;``, quotes removed."""
    sections: dict[str, dict[str, str]] = {"DEFAULT": {}}
    current = "DEFAULT"
    lines = _text(data).lstrip("\ufeff").split("\n")
    index = 0
    while index < len(lines):
        line = lines[index].strip()
        index += 1
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            current = line[1:line.rindex("]")] if "]" in line else line[1:]
            sections.setdefault(current, {})
            continue
        at = min((p for p in (line.find("="), line.find(":")) if p >= 0), default=-1)
        if at < 0:
            raise StoreError(f"line {index} is not key = value")
        key, value = line[:at].strip().strip('"`'), line[at + 1:].lstrip()
        for quote in _INI_QUOTES:
            if value.startswith(quote):
                while quote not in value[len(quote):] and index < len(lines):
                    value += "\n" + lines[index]
                    index += 1
                value = value[len(quote):value.index(quote, len(quote))]
                break
        else:
            value = re.split(r"[#;]", value, maxsplit=1)[0].strip()
            if len(value) > 1 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
        sections[current][key] = value
    return [sections]


def _text(data: bytes) -> str:
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise StoreError("not UTF-8 text") from None


_BRANCHES: dict[Format, Callable[[bytes], list[Any]]] = {
    Format.YAML: _yaml, Format.JSON: _json, Format.BINARY: _json, Format.DOTENV: _dotenv, Format.INI: _ini}


@dataclass
class Loaded:
    branches: list[Branch]
    metadata: dict[str, Any]  # the raw ``sops`` metadata, unflattened


def load(data: bytes, fmt: Format) -> Loaded:
    """The branches of an encrypted file, and its metadata (StoreError when it has none, or is no such file)."""
    try:
        documents = _BRANCHES[fmt](data)
    except yaml.YAMLError as exc:
        raise StoreError(f"not valid YAML: {getattr(exc, 'problem', None) or 'a syntax error'}") from None
    except ValueError as exc:  # json's, or the readers' own
        raise StoreError(str(exc) if isinstance(exc, StoreError) else "not valid JSON") from None
    branches = [d if d is not None else {} for d in documents]
    if not branches or not all(isinstance(b, dict) for b in branches):
        raise StoreError("its documents are not maps")
    if fmt in (Format.DOTENV, Format.INI):
        return _flattened(branches[0], fmt)
    raw = branches[0].get("sops")
    for branch in branches:
        branch.pop("sops", None)
    if not isinstance(raw, dict):
        raise StoreError("it has no sops metadata")
    return Loaded(branches, raw)


def _flattened(branch: Branch, fmt: Format) -> Loaded:
    """dotenv's ``sops_*`` keys, INI's ``[sops]`` section: the metadata flattened with ``__map_``/``__list_``."""
    if fmt is Format.DOTENV:
        flat = {k[len("sops_"):]: branch.pop(k) for k in [k for k in branch if k.startswith("sops_")]}
    else:
        flat = {k: v.replace("\\n", "\n") for k, v in branch.pop("sops", {}).items()}
    if not flat:
        raise StoreError("it has no sops metadata")
    return Loaded([branch], _unflatten(flat))


def _unflatten(flat: dict[str, str]) -> dict[str, Any]:
    """``pgp__list_0__map_enc`` -> ``{"pgp": [{"enc": ...}]}``."""
    root: dict[str, Any] = {}
    for key, value in flat.items():
        tokens = re.split(r"(__map_|__list_)", key)
        steps = [("__map_", tokens[0]), *zip(tokens[1::2], tokens[2::2], strict=True)]
        node: Any = root
        for (kind, name), following in zip(steps, [*steps[1:], None], strict=True):
            slot = _slot(node, kind, name)
            if following is None:
                node[slot] = value
                continue
            if node[slot] is None:
                node[slot] = {} if following[0] == "__map_" else []
            node = node[slot]
    return root


def _slot(node: Any, kind: str, name: str) -> Any:
    """Where ``name`` goes in ``node`` (a list grown to hold index ``name``), checked against the node's kind."""
    if kind == "__list_" and isinstance(node, list) and name.isdigit() and int(name) < 1000:
        node.extend([None] * (int(name) + 1 - len(node)))
        return int(name)
    if kind == "__map_" and isinstance(node, dict):
        node.setdefault(name, None)
        return name
    raise StoreError("its flattened metadata is malformed")


def emit(branches: list[Branch], fmt: Format) -> bytes:
    """The plaintext file, in its own format (binary: the raw bytes of ``data``)."""
    if fmt is Format.BINARY:
        data = branches[0].get("data") if len(branches) == 1 else None
        if not isinstance(data, bytes | str):
            raise StoreError("a binary file holds one value, data")
        return data if isinstance(data, bytes) else data.encode()
    if fmt is Format.DOTENV:
        return "".join(f"{k}={str(v).replace(chr(10), chr(92) + 'n')}\n" for k, v in branches[0].items()).encode()
    if fmt is Format.INI:
        return "".join(f"[{name}]\n" + "".join(f"{k} = {v}\n" for k, v in values.items()) + "\n"
                       for name, values in branches[0].items() if values or name != "DEFAULT").encode()
    plain = [_plain(b) for b in branches]
    if fmt is Format.JSON:
        return (json.dumps(plain[0], indent="\t") + "\n").encode()
    return k8syaml.dump_all(plain).encode()


def _plain(value: Any) -> Any:
    """A decrypted tree as plain data: a timestamp as the text it was written as."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return str(value) if isinstance(value, GoTime) else value
