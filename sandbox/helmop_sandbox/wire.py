"""The Kubernetes protobuf wire table, derived at build time from upstream's own definitions.

The field numbers of every built-in kind are facts of upstream's ``generated.proto`` files. Go programs
built with gogo protobuf (k8s.io/api up to 0.32) carry those files compiled, as gzipped
``FileDescriptorProto`` messages; helm 3.17, which ``scripts/install-tools`` installs, is one.
``python -m helmop_sandbox.wire BINARY`` extracts them into ``data/wire.json`` (``scripts/setup`` runs it):
per message, its fields' numbers, JSON names and types, and whether Go holds a scalar as a pointer
(gogoproto's ``nullable``), which decides whether a zero value means "unset".

Descriptors are read with :mod:`.protobuf`'s wire reader (the one that reads request bodies) rather than
the ``protobuf`` package: the JSON form Kubernetes gives these messages is its own, so the package's
JSON mapping could not serve, and a second decoder for one build step is not worth a dependency.
"""

from __future__ import annotations

import json
import re
import sys
import zlib
from pathlib import Path
from typing import Any

from . import schemas
from .protobuf import fields

TABLE = Path(__file__).parent / "data" / "wire.json"
_GZIP = re.compile(rb"\x1f\x8b\x08\x00\x00\x00\x00\x00")
_PROTO_TYPES = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 8: "bool", 9: "string",
                12: "bytes", 13: "uint32", 17: "sint32", 18: "sint64"}
_NULLABLE = 65001  # gogoproto.nullable, a FieldOptions extension


def _one(items: list[tuple[int, int | bytes]], number: int) -> Any:
    return next((value for n, value in items if n == number), None)


def _text(items: list[tuple[int, int | bytes]], number: int) -> str:
    value = _one(items, number)
    return value.decode() if isinstance(value, bytes) else ""


def _descriptors(binary: bytes) -> dict[str, bytes]:
    """``generated.proto`` path -> its FileDescriptorProto, for every gzipped one in the binary."""
    found: dict[str, bytes] = {}
    for match in _GZIP.finditer(binary):
        try:
            raw = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(binary[match.start():match.start() + (4 << 20)])
            name = _text(fields(raw), 1)
        except (zlib.error, ValueError, UnicodeDecodeError):
            continue
        if name.endswith("/generated.proto"):
            found[name] = raw
    return found


def _messages(prefix: str, raw_messages: list[bytes], out: dict[str, list[list[Any]]]) -> None:
    for raw in raw_messages:
        items = fields(raw)
        name = f"{prefix}.{_text(items, 1)}"
        entries: dict[str, list[Any]] = {}
        for nested in (v for n, v in items if n == 3 and isinstance(v, bytes)):
            nested_items = fields(nested)
            options = _one(nested_items, 7)
            if isinstance(options, bytes) and _one(fields(options), 7) == 1:  # map_entry
                key, value = (_field(f, entries={}) for f in (v for n, v in nested_items if n == 2))
                entries[_text(nested_items, 1)] = [key[2], value[2]]
        out[name] = [_field(f, entries) for f in (v for n, v in items if n == 2 and isinstance(v, bytes))]


def _field(raw: bytes | int, entries: dict[str, list[Any]]) -> list[Any]:
    """[number, json name, type, repeated, pointer] (``inline`` is appended later); type is a scalar
    name, a message's full name without the leading dot, or ``map:KEY:VALUE``."""
    assert isinstance(raw, bytes)
    items = fields(raw)
    type_number, type_name = _one(items, 5), _text(items, 6).lstrip(".")
    kind = _PROTO_TYPES.get(type_number, type_name)
    repeated = _one(items, 4) == 3
    short = type_name.rsplit(".", 1)[-1]
    if repeated and short in entries:
        kind, repeated = "map:" + ":".join(entries[short]), False
    options = _one(items, 8)
    pointer = not (isinstance(options, bytes) and _one(fields(options), _NULLABLE) == 0)
    return [_one(items, 3), _text(items, 1), kind, repeated, pointer]


def _squash(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _json_forms(messages: dict[str, list[list[Any]]]) -> None:
    """Fit field names to their JSON form, which the OpenAPI definitions (also upstream's) give: a name
    JSON spells differently (JSONSchemaProps' ``$ref``, ``x-kubernetes-*``) takes the JSON spelling, and
    each field gets whether JSON inlines it (Go's embedded ``json:",inline"`` structs such as IngressRule's
    IngressRuleValue or Volume's VolumeSource: a message field the definition lacks, while it has the
    embedded message's own fields)."""
    definitions = schemas.definitions()
    for name, entries in messages.items():
        properties = definitions.get("io.k8s." + name.removeprefix("k8s.io.").replace("_", "-"), {}).get(
            "properties", {})
        spelled = {_squash(p): p for p in properties}
        for entry in entries:
            _, field_name, kind, repeated, _ = entry
            if properties and field_name not in properties and _squash(field_name) in spelled:
                entry[1] = field_name = spelled[_squash(field_name)]
            embedded = {e[1] for e in messages.get(kind, [])}
            entry.append(bool(properties) and not repeated and field_name not in properties
                         and bool(embedded) and embedded <= set(properties))


def build(binary: bytes) -> dict[str, Any]:
    """The table from a gogo-built Go binary: ``files`` maps a proto's directory (``k8s.io/api/apps/v1``)
    to its package, ``messages`` a message's full name to its fields."""
    files: dict[str, str] = {}
    messages: dict[str, list[list[Any]]] = {}
    for path, raw in sorted(_descriptors(binary).items()):
        items = fields(raw)
        package = _text(items, 2)
        files[path.rsplit("/", 1)[0]] = package
        _messages(package, [v for n, v in items if n == 4 and isinstance(v, bytes)], messages)
    _json_forms(messages)
    if not messages:
        raise ValueError("no gzipped generated.proto descriptors found (a Go binary built with gogo protobuf "
                         "and k8s.io/api <= 0.32, such as helm 3.17, has them)")
    return {"files": files, "messages": messages}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m helmop_sandbox.wire GO_BINARY", file=sys.stderr)
        return 2
    table = build(Path(argv[0]).read_bytes())
    TABLE.parent.mkdir(parents=True, exist_ok=True)
    tmp = TABLE.with_suffix(".tmp")
    tmp.write_text(json.dumps(table, separators=(",", ":"), sort_keys=True))
    tmp.replace(TABLE)
    print(f"{TABLE}: {len(table['messages'])} messages from {len(table['files'])} generated.proto files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
