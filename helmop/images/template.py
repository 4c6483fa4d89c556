"""A commit message template: the subset of Go's text/template (and of Sprig's hermetic functions) Flux's commit
message templates use, rendered with bounds (steps, output, nesting). What the subset cannot express is refused
by name (``a function 'sha1sum'``, ``{{with}}``), never rendered differently. Pure.

Actions: ``{{ pipeline }}`` (fields ``.A.B``, ``$``, ``$var.A``, strings, numbers, ``( ... )``, ``|``),
``{{ $v := ... }}`` and ``{{ $v = ... }}``, ``{{ if }}``/``{{ else }}``/``{{ else if }}``, ``{{ range }}`` (with
``$k, $v :=`` and ``{{ else }}``), ``{{ end }}``, comments, and ``{{-``/``-}}`` trimming."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

MAX_OUTPUT = 64 << 10
MAX_STEPS = 100_000
MAX_DEPTH = 32


class TemplateError(ValueError):
    """The template cannot be rendered: the message says what and where."""


_ACTION = re.compile(r"\{\{(-[ \t\r\n])?(.*?)([ \t\r\n]-)?\}\}", re.S)
_TOKEN = re.compile(r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<raw>`[^`]*`)|(?P<num>-?\d+)|(?P<op>:=|=|\||\(|\)|,)'
                    r'|(?P<var>\$\w*(?:\.\w+)*)|(?P<field>(?:\.\w+)+|\.)|(?P<ident>[A-Za-z_]\w*))')


@dataclass
class _Node:
    kind: str  # text | pipe | assign | declare | if | range
    text: str = ""
    pipe: list[Any] = field(default_factory=list)
    names: tuple[str, ...] = ()
    body: list[_Node] = field(default_factory=list)
    other: list[_Node] = field(default_factory=list)


def render(template: str, data: Any) -> str:
    """``template`` with ``data`` as ``.``; TemplateError for what cannot be rendered."""
    try:
        nodes, rest = _parse(_lex(template), 0)
        if rest is not None:
            raise TemplateError(f"unexpected {{{{{rest}}}}}")
        run = _Run()
        run.block(nodes, data, {"$": data})
    except RecursionError:  # parentheses nested without end (the parser recurses on each)
        raise TemplateError("the template nests too deeply") from None
    return "".join(run.out)


def _lex(template: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos, trim_next = 0, False
    for m in _ACTION.finditer(template):
        text = template[pos:m.start()]
        text = text.lstrip() if trim_next else text
        out.append(("text", text.rstrip() if m.group(1) else text))
        action = m.group(2).strip()
        if not (action.startswith("/*") and action.endswith("*/")):
            out.append(("action", action))
        trim_next, pos = bool(m.group(3)), m.end()
    tail = template[pos:]
    if "{{" in tail:
        raise TemplateError("an action is not closed: '{{' without '}}'")
    out.append(("text", tail.lstrip() if trim_next else tail))
    return out


def _parse(tokens: list[tuple[str, str]], depth: int) -> tuple[list[_Node], str | None]:
    """Nodes until an ``end``/``else`` (returned with it); the tokens are consumed from the list's front."""
    if depth > MAX_DEPTH:
        raise TemplateError(f"actions nested deeper than {MAX_DEPTH}")
    nodes: list[_Node] = []
    while tokens:
        kind, text = tokens.pop(0)
        if kind == "text":
            nodes.append(_Node("text", text))
            continue
        word = text.split(None, 1)[0] if text else ""
        if word in ("end", "else"):
            return nodes, text
        if word in ("if", "range"):
            nodes.append(_block(word, text[len(word):].strip(), tokens, depth))
        elif word in ("with", "define", "template", "block", "break", "continue"):
            raise TemplateError(f"{{{{{word}}}}} is not in helmop's template subset (fields, variables, if, "
                                "range, functions)")
        else:
            nodes.append(_statement(text))
    return nodes, None


def _block(word: str, head: str, tokens: list[tuple[str, str]], depth: int) -> _Node:
    names: tuple[str, ...] = ()
    declared = re.match(r"^(\$\w+)(?:\s*,\s*(\$\w+))?\s*:=\s*(.*)$", head, re.S)
    if word == "range" and declared:
        names = tuple(n for n in declared.groups()[:2] if n)
        head = declared.group(3)
    node = _Node(word, pipe=_pipeline(head), names=names)
    node.body, ending = _parse(tokens, depth + 1)
    if ending is not None and ending.startswith("else"):
        rest = ending[4:].strip()
        if rest.startswith("if "):  # else if: an if inside the else branch, sharing its end
            node.other = [_block("if", rest[3:].strip(), tokens, depth + 1)]
            return node
        node.other, ending = _parse(tokens, depth + 1)
    if ending != "end":
        raise TemplateError(f"{{{{{word}}}}} has no {{{{end}}}}")
    return node


def _statement(text: str) -> _Node:
    assigned = re.match(r"^(\$\w+)\s*(:=|=)\s*(.*)$", text, re.S)
    if assigned:
        kind = "declare" if assigned.group(2) == ":=" else "assign"
        return _Node(kind, names=(assigned.group(1),), pipe=_pipeline(assigned.group(3)))
    return _Node("pipe", pipe=_pipeline(text))


def _pipeline(text: str) -> list[Any]:
    """Commands (each a list of operands, a nested pipeline a list inside) separated by '|'."""
    tokens, pos = [], 0
    while pos < len(text.rstrip()):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise TemplateError(f"cannot read {text[pos:pos + 40].strip()!r} in an action")
        tokens.append((m.lastgroup, m.group(m.lastgroup or "")))
        pos = m.end()
    commands, rest = _commands(tokens)
    if rest:
        raise TemplateError(f"unexpected {rest[0][1]!r} in an action")
    if not commands or any(not c for c in commands):
        raise TemplateError(f"an empty command in {{{{{text}}}}}")
    return commands


def _commands(tokens: list[tuple[str | None, str]]) -> tuple[list[Any], list[tuple[str | None, str]]]:
    commands: list[Any] = [[]]
    while tokens:
        kind, value = tokens[0]
        if value == ")":
            break
        tokens = tokens[1:]
        if value == "|":
            commands.append([])
        elif value == "(":
            inner, tokens = _commands(tokens)
            if not tokens or tokens[0][1] != ")":
                raise TemplateError("a '(' is not closed")
            tokens = tokens[1:]
            commands[-1].append(("pipe", inner))
        else:
            commands[-1].append((kind, value))
    return commands, tokens


class _Run:
    def __init__(self) -> None:
        self.out: list[str] = []
        self.size = 0
        self.steps = 0

    def step(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise TemplateError(f"the template takes more than {MAX_STEPS} steps")

    def write(self, text: str) -> None:
        self.size += len(text)
        if self.size > MAX_OUTPUT:
            raise TemplateError(f"the message is longer than {MAX_OUTPUT >> 10} KiB")
        self.out.append(text)

    def block(self, nodes: list[_Node], dot: Any, scope: dict[str, Any]) -> None:
        for node in nodes:
            self.step()
            if node.kind == "text":
                self.write(node.text)
            elif node.kind == "pipe":
                self.write(show(self.pipe(node.pipe, dot, scope)))
            elif node.kind in ("declare", "assign"):
                if node.kind == "assign" and node.names[0] not in scope:
                    raise TemplateError(f"variable {node.names[0]} is assigned before it is declared")
                scope[node.names[0]] = self.pipe(node.pipe, dot, scope)
            elif node.kind == "if":
                self.block(node.body if truth(self.pipe(node.pipe, dot, scope)) else node.other, dot, dict(scope))
            else:
                self.range(node, dot, scope)

    def range(self, node: _Node, dot: Any, scope: dict[str, Any]) -> None:
        value = self.pipe(node.pipe, dot, scope)
        if isinstance(value, dict):
            pairs = [(k, value[k]) for k in sorted(value)]
        elif isinstance(value, list | tuple):
            pairs = list(enumerate(value))
        elif value is None:
            pairs = []
        else:
            raise TemplateError(f"range over {type(value).__name__}, which is not a list or a map")
        if not pairs:
            self.block(node.other, dot, dict(scope))
        for key, item in pairs:
            inner = dict(scope)
            if len(node.names) == 2:
                inner[node.names[0]], inner[node.names[1]] = key, item
            elif node.names:
                inner[node.names[0]] = item
            self.block(node.body, item, inner)

    def pipe(self, commands: list[Any], dot: Any, scope: dict[str, Any]) -> Any:
        value: Any = _NOTHING
        for command in commands:
            self.step()
            value = self.command(command, dot, scope, value)
        return value

    def command(self, command: list[Any], dot: Any, scope: dict[str, Any], piped: Any) -> Any:
        kind, word = command[0]
        if kind == "ident" and word not in ("true", "false", "nil"):
            function = FUNCTIONS.get(word)
            if function is None:
                raise TemplateError(f"the function {word!r} is not in helmop's template subset (it has "
                                    f"{', '.join(sorted(FUNCTIONS))})")
            args = [self.operand(x, dot, scope) for x in command[1:]]
            return _call(word, function, [*args, *(() if piped is _NOTHING else (piped,))])
        if len(command) > 1 or piped is not _NOTHING:
            raise TemplateError(f"{word!r} is not a function: it cannot take arguments")
        return self.operand(command[0], dot, scope)

    def operand(self, token: tuple[str, Any], dot: Any, scope: dict[str, Any]) -> Any:
        kind, word = token
        if kind == "pipe":
            return self.pipe(word, dot, scope)
        if kind == "str":
            return word[1:-1].encode().decode("unicode_escape")
        if kind == "raw":
            return word[1:-1]
        if kind == "num":
            return int(word)
        if kind == "ident":
            return {"true": True, "false": False, "nil": None}.get(word, word)
        if kind == "var":
            name, *path = word.split(".")
            if name not in scope:
                raise TemplateError(f"undefined variable {name}")
            return _fields(scope[name], path, word)
        return dot if word == "." else _fields(dot, word.split(".")[1:], word)


_NOTHING = object()


def _fields(value: Any, path: list[str], written: str) -> Any:
    for name in path:
        if isinstance(value, dict):
            value = value.get(name)
        elif name in getattr(value, "FIELDS", ()):
            value = getattr(value, name)
        else:
            raise TemplateError(f"{written}: can't evaluate field {name} in {type(value).__name__}")
    return value


def truth(value: Any) -> bool:
    return bool(value) if value is not None else False


def show(value: Any) -> str:
    """A value printed as Go's fmt prints it (%v)."""
    if value is None or value is _NOTHING:
        return "<no value>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + " ".join(show(v) for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{show(k)}:{show(value[k])}" for k in sorted(value)) + "]"
    return str(value)


def _length(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    return sum(len(v) for v in value if isinstance(v, str)) if isinstance(value, list | tuple) else 0


def _call(name: str, function: Any, args: list[Any]) -> Any:
    """A function of the subset on ``args``, no value of it longer than a message may be: its arguments are
    measured first (``replace`` by what it would make), its result after; a wrong call is a TemplateError."""
    size = sum(_length(a) for a in args)
    if name == "replace" and len(args) == 3:
        old, new, text = (show(a) for a in args)
        size = len(text) + (text.count(old) if old else len(text) + 1) * len(new)
    if size > MAX_OUTPUT:
        raise TemplateError(f"{name} would make a value longer than {MAX_OUTPUT >> 10} KiB")
    try:
        result = function(*args)
    except (TypeError, ValueError, IndexError, KeyError) as exc:
        raise TemplateError(f"{name}: {str(exc)[:200]}") from None
    if _length(result) > MAX_OUTPUT:
        raise TemplateError(f"{name} made a value longer than {MAX_OUTPUT >> 10} KiB")
    return result


def _printf(form: str, *args: Any) -> str:
    values = iter(args)

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "%%":
            return "%"
        value = next(values, None)
        return f'"{show(value)}"' if m.group(1) == "q" else show(value)

    return re.sub(r"%%|%([svdq])", one, form)


FUNCTIONS: dict[str, Any] = {
    "print": lambda *a: "".join(show(v) for v in a),
    "println": lambda *a: " ".join(show(v) for v in a) + "\n",
    "printf": lambda form, *a: _printf(str(form), *a),
    "lower": lambda s: show(s).lower(),
    "upper": lambda s: show(s).upper(),
    "title": lambda s: show(s).title(),
    "trim": lambda s: show(s).strip(),
    "trimPrefix": lambda p, s: show(s).removeprefix(show(p)),
    "trimSuffix": lambda p, s: show(s).removesuffix(show(p)),
    "replace": lambda old, new, s: show(s).replace(show(old), show(new)),
    "contains": lambda sub, s: show(sub) in show(s),
    "hasPrefix": lambda p, s: show(s).startswith(show(p)),
    "hasSuffix": lambda p, s: show(s).endswith(show(p)),
    "quote": lambda *a: " ".join(f'"{show(v)}"' for v in a),
    "toString": show,
    "trunc": lambda n, s: show(s)[:n] if n >= 0 else show(s)[n:],
    "join": lambda sep, items: show(sep).join(show(v) for v in items or ()),
    "sha256sum": lambda s: hashlib.sha256(show(s).encode()).hexdigest(),
    "default": lambda d, v=None: v if truth(v) else d,
    "len": lambda v: len(v) if v is not None else 0,
    "not": lambda v: not truth(v),
    "and": lambda *a: next((v for v in a if not truth(v)), a[-1] if a else None),
    "or": lambda *a: next((v for v in a if truth(v)), a[-1] if a else None),
    "eq": lambda a, *b: any(a == x for x in b),
    "ne": lambda a, b: a != b,
}
