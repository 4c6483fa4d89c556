"""The Kubernetes protobuf wire format, both ways, for every built-in kind of the wire table.

Typed clients (helm, kubectl's ``create`` verbs, client-go controllers) send bodies as
``application/vnd.kubernetes.protobuf``: the magic ``k8s\\0`` then a ``runtime.Unknown`` envelope
{1: typeMeta{1: apiVersion, 2: kind}, 2: raw message}. A 415 reply does not make them fall back to JSON.
Messages are read and written with the table of :mod:`.wire` (derived from upstream's descriptors); the
JSON form follows the API server's: scalars Go holds by value are left out when zero, Time is RFC 3339,
Quantity and IntOrString are their JSON scalars, RawExtension/FieldsV1/JSON carry raw JSON.
A field the table does not know (newer than its 1.32 definitions) is dropped on the way in, as an API
server of that version does; an object with such a field is answered as JSON, never truncated.
"""

from __future__ import annotations

import base64
import functools
import json
import struct
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .errors import ApiError
from .store import VersionCache

MAGIC = b"k8s\x00"
MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
_TABLE = Path(__file__).parent / "data" / "wire.json"  # written by `python -m helmop_sandbox.wire`
_META = "k8s.io.apimachinery.pkg.apis.meta.v1"
_UNKNOWN = "k8s.io.apimachinery.pkg.runtime.Unknown"
_INTEGERS = {"int64", "int32", "uint64", "uint32", "sint32", "sint64"}

Field = tuple[int, str, str, bool, bool, bool]  # number, JSON name, type, repeated, held by pointer, inlined


class Unencodable(Exception):
    """An object (or part of it) the table cannot express: answer JSON instead."""


@functools.cache
def _table() -> tuple[dict[str, str], dict[str, dict[int, Field]], dict[str, dict[str, Field]]]:
    try:
        raw = json.loads(_TABLE.read_text())
    except FileNotFoundError:
        raise ApiError("UnsupportedMediaType", "the sandbox's protobuf table is not built "
                       "(python -m helmop_sandbox.wire <helm 3 binary>, as scripts/setup does); send JSON") from None
    by_number: dict[str, dict[int, Field]] = {}
    by_name: dict[str, dict[str, Field]] = {}
    for message, entries in raw["messages"].items():
        typed = [(int(e[0]), str(e[1]), str(e[2]), bool(e[3]), bool(e[4]), bool(e[5])) for e in entries]
        by_number[message] = {f[0]: f for f in typed}
        by_name[message] = {f[1]: f for f in typed}
    return raw["files"], by_number, by_name


def message_for(api_version: str, kind: str) -> str | None:
    """The full protobuf message name of a built-in kind (None: not in the table)."""
    files, messages, _ = _table()
    group, _, version = api_version.rpartition("/")
    label = group.split(".")[0] if group else "core"
    directory = {"apiextensions": "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions",
                 "internal": "k8s.io/api/apiserverinternal"}.get(label, f"k8s.io/api/{label}")
    for candidate in (f"{directory}/{version}", f"k8s.io/apimachinery/pkg/apis/meta/{version}"):
        package = files.get(candidate)
        if package and f"{package}.{kind}" in messages:
            return f"{package}.{kind}"
    return None


# --- reading ------------------------------------------------------------------------------------------


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, varint value or length-delimited/fixed bytes) in wire order."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            out.append((number, value))
            continue
        if wire == 2:
            size, pos = _varint(data, pos)
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        if pos + size > len(data):
            raise ValueError("truncated field")
        out.append((number, data[pos:pos + size]))
        pos += size
    return out


def _rfc3339(data: bytes, micro: bool) -> str | None:
    values = dict(fields(data))
    seconds, nanos = values.get(1, 0), values.get(2, 0)
    if not isinstance(seconds, int) or not isinstance(nanos, int):
        raise ValueError("invalid Time")
    if not data:
        return None  # the zero Time, which JSON writes as null
    moment = datetime.fromtimestamp(_signed(seconds), UTC)
    if micro:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{nanos // 1000:06d}Z"
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _duration(nanoseconds: int) -> str:
    """Go's time.Duration.String() for the whole seconds JSON carries in practice."""
    if nanoseconds == 0:
        return "0s"
    sign, rest = ("-", -nanoseconds) if nanoseconds < 0 else ("", nanoseconds)
    hours, rest = divmod(rest, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    seconds = f"{rest / 1e9:.9f}".rstrip("0").rstrip(".")
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if hours or minutes else "") + f"{seconds}s"
    return sign + text


def _raw_json(data: bytes) -> Any:
    raw = dict(fields(data)).get(1, b"")
    return json.loads(raw) if isinstance(raw, bytes) and raw else None


def _special(name: str, data: bytes) -> tuple[bool, Any]:
    """Messages whose JSON form is not an object of their fields."""
    short = name.rsplit(".", 1)[-1]
    if name == f"{_META}.Time":
        return True, _rfc3339(data, micro=False)
    if name == f"{_META}.MicroTime":
        return True, _rfc3339(data, micro=True)
    if name == f"{_META}.Duration":
        return True, _duration(_signed(int(dict(fields(data)).get(1, 0))))
    if short in ("RawExtension", "FieldsV1") or name.endswith("apiextensions.v1.JSON"):
        return True, _raw_json(data)
    if short == "Quantity":
        return True, dict(fields(data)).get(1, b"").decode()  # type: ignore[union-attr]
    if short == "IntOrString":
        values = dict(fields(data))
        if values.get(1, 0) == 1:
            return True, values.get(3, b"").decode()  # type: ignore[union-attr]
        return True, _signed(int(values.get(2, 0)))
    if short in ("JSONSchemaPropsOrBool", "JSONSchemaPropsOrArray", "JSONSchemaPropsOrStringArray"):
        decoded = _message(data, name)
        schema = decoded.get("schema")
        other = {"JSONSchemaPropsOrBool": "allows", "JSONSchemaPropsOrArray": "jSONSchemas",
                 "JSONSchemaPropsOrStringArray": "property"}[short]
        return True, schema if schema is not None else decoded.get(other, False if other == "allows" else [])
    return False, None


def _scalar(kind: str, raw: int | bytes) -> Any:
    if kind == "string":
        return raw.decode() if isinstance(raw, bytes) else str(raw)
    if kind == "bytes":
        return base64.b64encode(raw).decode() if isinstance(raw, bytes) else ""
    if kind == "bool":
        return bool(raw)
    if kind in _INTEGERS:
        if not isinstance(raw, int):
            raise ValueError(f"expected a varint for {kind}")
        return _signed(raw) if kind in ("int64", "int32") else raw
    if kind in ("double", "float") and isinstance(raw, bytes):
        return struct.unpack("<d" if kind == "double" else "<f", raw)[0]
    raise ValueError(f"unexpected {kind} value")


def _value(kind: str, raw: int | bytes) -> Any:
    if kind in _INTEGERS or kind in ("string", "bytes", "bool", "double", "float"):
        return _scalar(kind, raw)
    if not isinstance(raw, bytes):
        raise ValueError(f"expected a message of type {kind}")
    special, value = _special(kind, raw)
    return value if special else _message(raw, kind)


def _map_entry(kind: str, raw: int | bytes) -> tuple[str, Any]:
    _, key_kind, value_kind = kind.split(":", 2)
    if not isinstance(raw, bytes):
        raise ValueError("map entry is not a message")
    values = dict(fields(raw))
    key = _value(key_kind, values.get(1, b"" if key_kind == "string" else 0))
    value = _value(value_kind, values.get(2, b"" if value_kind in ("string", "bytes") or "." in value_kind else 0))
    return str(key), value


def _is_zero(value: Any) -> bool:
    return value is None or (not isinstance(value, float) and value in ("", 0, False))


def _message(data: bytes, name: str) -> dict[str, Any]:
    table = _table()[1].get(name)
    if table is None:
        raise ValueError(f"message {name} is not in the wire table")
    out: dict[str, Any] = {}
    for number, raw in fields(data):
        field = table.get(number)
        if field is None:
            continue  # newer than the table: dropped, as an API server of the table's version does
        _, key, kind, repeated, pointer, inline = field
        if inline:
            out.update(_value(kind, raw))  # Go's embedded struct: its fields are the parent's in JSON
        elif kind.startswith("map:"):
            entry_key, entry_value = _map_entry(kind, raw)
            out.setdefault(key, {})[entry_key] = entry_value
        elif repeated:
            out.setdefault(key, []).append(_value(kind, raw))
        else:
            value = _value(kind, raw)
            if value is None or (not pointer and "." not in kind and _is_zero(value)):
                out.pop(key, None)  # a by-value zero is "unset": its JSON omits it
            else:
                out[key] = value
    return out


def decode(body: bytes) -> dict[str, Any]:
    """A protobuf request body as the equivalent JSON object; 415 for kinds the table lacks."""
    if not body.startswith(MAGIC):
        raise ApiError("UnsupportedMediaType", "protobuf body does not start with the k8s magic prefix")
    try:
        envelope = fields(body[len(MAGIC):])
        type_meta = dict(fields(next((v for n, v in envelope if n == 1 and isinstance(v, bytes)), b"")))
        api_version = type_meta.get(1, b"").decode()  # type: ignore[union-attr]
        kind = type_meta.get(2, b"").decode()  # type: ignore[union-attr]
        name = message_for(api_version, kind)
        if name is None:
            raise ApiError("UnsupportedMediaType",
                           f"the sandbox has no protobuf definition of {api_version} {kind!r}; send JSON")
        raw = next((v for n, v in envelope if n == 2 and isinstance(v, bytes)), b"")
        obj = _message(raw, name)
    except (ValueError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ApiError("BadRequest", f"invalid protobuf body: {exc}") from exc
    return {"apiVersion": api_version, "kind": kind, **obj}


# --- writing ------------------------------------------------------------------------------------------


def _key(number: int, wire: int) -> bytes:
    return _uvarint(number << 3 | wire)


def _uvarint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _delimited(number: int, payload: bytes) -> bytes:
    return _key(number, 2) + _uvarint(len(payload)) + payload


def _parse_time(text: Any) -> tuple[int, int]:
    if not isinstance(text, str):
        raise Unencodable("a time that is not a string")
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return int(moment.timestamp()), moment.microsecond * 1000


def _encode_special(name: str, value: Any) -> bytes | None:
    short = name.rsplit(".", 1)[-1]
    if name in (f"{_META}.Time", f"{_META}.MicroTime"):
        seconds, nanos = _parse_time(value)
        return _key(1, 0) + _uvarint(seconds) + (_key(2, 0) + _uvarint(nanos) if nanos else b"")
    if short in ("RawExtension", "FieldsV1") or name.endswith("apiextensions.v1.JSON"):
        return _delimited(1, json.dumps(value, separators=(",", ":")).encode())
    if short == "Quantity":
        return _delimited(1, str(value).encode())
    if short == "IntOrString":
        if isinstance(value, str):
            return _key(1, 0) + _uvarint(1) + _delimited(3, value.encode())
        return _key(1, 0) + _uvarint(0) + _key(2, 0) + _uvarint(int(value))
    if short == "JSONSchemaPropsOrBool":
        return encode_message({"allows": True, "schema": value} if isinstance(value, dict) else {"allows": value},
                              name)
    if short in ("JSONSchemaPropsOrArray", "JSONSchemaPropsOrStringArray"):
        many = "jSONSchemas" if short == "JSONSchemaPropsOrArray" else "property"
        return encode_message({"schema": value} if isinstance(value, dict) else {many: value}, name)
    if name == f"{_META}.Duration":
        raise Unencodable(short)  # no built-in kind's reply carries one; JSON serves it
    return None


def _encode_value(number: int, kind: str, value: Any) -> bytes:
    if kind == "string":
        if not isinstance(value, str):
            raise Unencodable(f"field {number}: {value!r} is not a string")
        return _delimited(number, value.encode())
    if kind == "bytes":
        return _delimited(number, base64.b64decode(value))
    if kind == "bool":
        return _key(number, 0) + _uvarint(1 if value else 0)
    if kind in _INTEGERS:
        if isinstance(value, bool) or not isinstance(value, int):
            raise Unencodable(f"field {number}: {value!r} is not an integer")
        return _key(number, 0) + _uvarint(value)
    if kind in ("double", "float"):
        return _key(number, 1 if kind == "double" else 5) + struct.pack("<d" if kind == "double" else "<f", value)
    special = _encode_special(kind, value)
    if special is not None:
        return _delimited(number, special)
    if not isinstance(value, dict):
        raise Unencodable(f"field {number}: {value!r} is not an object")
    return _delimited(number, encode_message(value, kind))


def _stored(obj: dict[str, Any], name: str) -> bytes:
    """A stored object's message, cached by uid and resourceVersion: a version never changes, and lists
    (informers' and helm's) send the same objects again and again."""
    meta = obj.get("metadata") or {}
    if meta.get("uid") is None or meta.get("resourceVersion") is None:
        return encode_message(obj, name)
    return _ENCODED.get(("protobuf", name, meta["uid"], meta["resourceVersion"]), lambda: encode_message(obj, name))


_ENCODED = VersionCache(50_000)


def encode_message(obj: dict[str, Any], name: str) -> bytes:
    """One message; raises :class:`Unencodable` for any field the table does not have."""
    table = _table()[2].get(name)
    if table is None:
        raise Unencodable(name)
    out = bytearray()
    inlined: set[str] = set()
    for number, _, kind, _, _, inline in table.values():
        if inline:
            part = {k: v for k, v in obj.items() if k in _table()[2].get(kind, {})}
            inlined.update(part)
            out += _delimited(number, encode_message(part, kind))
    for key, value in obj.items():
        field = table.get(key)
        if key in inlined or (field is None and key in ("apiVersion", "kind")):
            continue  # inlined above; the envelope's TypeMeta carries apiVersion and kind
        if field is None:
            raise Unencodable(f"{name}.{key}")
        number, _, kind, repeated, _, _ = field
        if value is None:
            continue
        if kind.startswith("map:"):
            _, key_kind, value_kind = kind.split(":", 2)
            for entry_key, entry_value in value.items():
                entry = _encode_value(1, key_kind, entry_key)
                entry += _encode_value(2, value_kind, entry_value) if entry_value is not None else b""
                out += _delimited(number, entry)
        elif repeated and key == "items" and name.endswith("List"):
            out += b"".join(_delimited(number, _stored(item, kind)) for item in value)
        elif repeated:
            for item in value:
                out += _encode_value(number, kind, item)
        else:
            out += _encode_value(number, kind, value)
    return bytes(out)


def encode(obj: dict[str, Any]) -> bytes:
    """An object (list, Status, ...) as a protobuf body, or :class:`Unencodable`."""
    api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
    name = message_for(api_version, kind)
    if name is None:
        raise Unencodable(f"{api_version} {kind}")
    type_meta = _delimited(1, api_version.encode()) + _delimited(2, kind.encode())
    return MAGIC + _delimited(1, type_meta) + _delimited(2, _stored(obj, name))


def wants(accept: str) -> bool:
    """Whether protobuf comes before JSON in an Accept header (client-go's typed clients)."""
    for media in accept.split(","):
        kind = media.strip().split(";")[0]
        if kind == MEDIA_TYPE and ";" not in media:
            return True
        if kind in ("application/json", "*/*", "application/yaml"):
            return False
    return False
