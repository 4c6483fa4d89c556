"""YAML with the meaning Kubernetes gives it: the values Go's ``sigs.k8s.io/yaml`` produces (go-yaml v2's
resolution, then JSON), which is what helm, kubectl and the API server see. PyYAML's SafeLoader reads
YAML 1.1 its own way, and a chart, a values file or a manifest must not mean one thing to helmop and
another to helm.

Where the two differ, go-yaml decides (``kubectl create --dry-run=client -o json`` is the oracle of
tests/unit/test_k8syaml.py):

* ``=`` is the string "=" (PyYAML: the YAML 1.1 "value" tag, which it cannot construct);
* ``y``/``Y``/``n``/``N`` are booleans, like yes/no/on/off/true/false in their three spellings;
* timestamps and dates stay strings; ``1:20`` (sexagesimal) is a string;
* numbers as Go's ``ParseInt(s, 0, 64)``/``ParseUint``/``ParseFloat`` read them: ``0777`` and ``0o17``
  octal, ``0x1F``, ``0b101``, ``1e3``, ``1_000``; an integer past 64 bits is a float;
* ``.inf`` and ``.nan`` have no JSON form: an error, as in kubectl;
* ``!!binary`` is the decoded text; map keys become strings (``true``, ``1``), a key that is null, a list
  or a map is an error.
"""

from __future__ import annotations

import functools
import json
import math
import re
from typing import Any

import yaml
from yaml._yaml import CParser

_BOOL = {**dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
         **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False)}
_SPECIAL_FLOAT = re.compile(r"^[-+]?\.(inf|Inf|INF)$|^\.(nan|NaN|NAN)$")
# go-yaml v2's yamlStyleFloat, applied after underscores are removed
_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
INT, FLOAT, STR = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:str"


class Resolver(yaml.resolver.BaseResolver):
    """go-yaml v2's implicit types for plain scalars: null, bool, merge by pattern; numbers as Go parses them.
    Used by the dumper too, so a string Go would read as something else is written quoted."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is yaml.ScalarNode and implicit[0] and value[:1] in _NUMBER_START and value not in _BOOL:
            return number_tag(str(value))
        return super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]


Resolver.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile("^(" + "|".join(_BOOL) + ")$"),
                               list("yYnNtTfFoO"))
Resolver.add_implicit_resolver("tag:yaml.org,2002:null", re.compile(r"^(~|null|Null|NULL|)$"), ["~", "n", "N", ""])
Resolver.add_implicit_resolver("tag:yaml.org,2002:merge", re.compile(r"^<<$"), ["<"])
_NUMBER_START = set("-+.0123456789")


def number_tag(text: str) -> str:
    """What go-yaml v2 makes of a plain scalar that starts like a number."""
    if _SPECIAL_FLOAT.match(text):
        return FLOAT
    plain = text.replace("_", "")
    if _go_int(plain) is not None:
        return INT
    return FLOAT if _FLOAT.match(plain) else STR


def go_number(text: str) -> int | float | None:
    """A plain scalar as Go's YAML reads a number (underscores dropped; an integer past 64 bits is a float), None
    when it is none (``.inf``/``.nan`` aside: the caller decides what those are)."""
    plain = text.replace("_", "")
    number = _go_int(plain)
    if number is not None:
        return number
    return float(plain) if _FLOAT.match(plain) else None


def _go_int(text: str) -> int | None:
    """``strconv.ParseInt(text, 0, 64)``, else ``ParseUint``: None when Go would not read it as an integer."""
    sign, digits = (-1, text[1:]) if text[:1] == "-" else (1, text[1:] if text[:1] == "+" else text)
    prefixes = {"0x": 16, "0X": 16, "0o": 8, "0O": 8, "0b": 2, "0B": 2}
    base = prefixes.get(digits[:2], 0)
    if base:
        digits = digits[2:]
    elif len(digits) > 1 and digits[0] == "0":
        base, digits = 8, digits[1:]
    else:
        base = 10
    if not digits or not digits.isalnum():
        return None
    try:
        value = sign * int(digits, base)
    except ValueError:
        return None
    return value if -(1 << 63) <= value < (1 << 64) else None


class Constructor(yaml.constructor.SafeConstructor):
    def construct_number(self, node: yaml.ScalarNode) -> Any:
        """An int or a float as Go parses it (also for an explicit !!int or !!float)."""
        text = str(node.value)
        if _SPECIAL_FLOAT.match(text):
            raise yaml.constructor.ConstructorError(None, None, f"{text} has no JSON form (as in kubectl)",
                                                    node.start_mark)
        value = go_number(text)
        if value is None:
            raise yaml.constructor.ConstructorError(None, None, f"{text!r} is not a number", node.start_mark)
        if math.isinf(value):
            raise yaml.constructor.ConstructorError(None, None, f"{text} is out of range", node.start_mark)
        return value

    def construct_go_bool(self, node: yaml.ScalarNode) -> bool:
        if str(node.value) not in _BOOL:  # an explicit !!bool on something else
            raise yaml.constructor.ConstructorError(None, None, f"{node.value!r} is not a boolean", node.start_mark)
        return _BOOL[str(node.value)]

    def construct_binary_text(self, node: yaml.ScalarNode) -> str:
        return bytes(self.construct_yaml_binary(node)).decode("utf-8", errors="replace")

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        mapping = super().construct_mapping(node, deep=deep)
        if all(isinstance(key, str) for key in mapping):
            return mapping
        return {_key(key, node): value for key, value in mapping.items()}


def _key(key: Any, node: yaml.Node) -> str:
    """A map key as sigs.k8s.io/yaml writes it into JSON."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return str(key)
    if isinstance(key, float):
        return repr(key) if not key.is_integer() else str(int(key))
    raise yaml.constructor.ConstructorError(None, None, f"invalid map key: {key!r}", node.start_mark)


Constructor.yaml_constructors = {
    **yaml.constructor.SafeConstructor.yaml_constructors, INT: Constructor.construct_number,
    FLOAT: Constructor.construct_number, "tag:yaml.org,2002:bool": Constructor.construct_go_bool,
    "tag:yaml.org,2002:binary": Constructor.construct_binary_text,
    "tag:yaml.org,2002:timestamp": Constructor.construct_yaml_str}  # an explicit !!timestamp: as written


class PyLoader(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser, yaml.composer.Composer,
               Constructor, Resolver):
    """The pure-Python parser with Kubernetes' meaning of scalars: slower, but it names the line of an error
    where libyaml may name the end of the stream."""

    def __init__(self, stream: str | bytes) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        Constructor.__init__(self)
        Resolver.__init__(self)


class CLoader(CParser, Constructor, Resolver):
    """libyaml's parser with Kubernetes' meaning of scalars."""

    def __init__(self, stream: str | bytes) -> None:
        CParser.__init__(self, stream)
        Constructor.__init__(self)
        Resolver.__init__(self)


class Dumper(yaml.emitter.Emitter, yaml.serializer.Serializer, yaml.representer.SafeRepresenter, Resolver):
    """YAML that Go reads back as the same data: a string Go would take for a bool, a number or null
    (``y``, ``0777``, ``1e3``) is quoted."""

    def __init__(self, stream: Any, **options: Any) -> None:
        yaml.emitter.Emitter.__init__(self, stream, width=options.get("width"),
                                      allow_unicode=options.get("allow_unicode"))
        yaml.serializer.Serializer.__init__(self, explicit_start=options.get("explicit_start"))
        yaml.representer.SafeRepresenter.__init__(self, sort_keys=options.get("sort_keys", True))
        Resolver.__init__(self)


def dump_all(documents: list[Any]) -> str:
    """Documents as YAML that means the same to Go (block style, keys in their order)."""
    return str(yaml.dump_all(documents, Dumper=Dumper, sort_keys=False))


KEPT = 16 << 10  # objects up to this size (as JSON) have their YAML text kept by :func:`dump`


def dump(obj: Any) -> str:
    """One document, as :func:`dump_all` writes it. Small ones' text is kept by their content: the dump is pure
    Python, and a thousand ConfigSyncs of one revision dump the same few objects (their build's largest CPU)."""
    key = json.dumps(obj)
    return _dumped(key) if len(key) <= KEPT else dump_all([obj])


@functools.lru_cache(maxsize=256)
def _dumped(key: str) -> str:
    """The YAML text of the object whose JSON is ``key`` (the key is the content: a hit is the same object)."""
    return dump_all([json.loads(key)])
