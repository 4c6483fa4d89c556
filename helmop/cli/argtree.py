"""Argparse trees built from tables: a verb is a row (its name, help and arguments), so that the functions
building the parser stay short and adding a verb or a flag is adding a row."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Arg:
    """One ``add_argument`` call: its names (or a positional's) and its keywords. ``default_from``: a default read
    when the parser is built, not when the table is (an environment variable's)."""

    names: tuple[str, ...]
    options: Mapping[str, Any]
    default_from: Callable[[], Any] | None = None


def arg(*names: str, default_from: Callable[[], Any] | None = None, **options: Any) -> Arg:
    return Arg(names, options, default_from)


@dataclass(frozen=True)
class Verb:
    """A verb (or a sub-verb): its name and help, its arguments in the order ``--help`` lists them, and what runs
    it. ``description`` is the verb's own ``--help`` text (None: none, as argparse has it)."""

    name: str
    help: str
    args: tuple[Arg, ...] = ()
    run: Callable[[argparse.Namespace], int] | None = None
    description: str | None = None
    aliases: tuple[str, ...] = ()
    defaults: Mapping[str, Any] = field(default_factory=dict)


def explained(parse: Callable[[str], T]) -> Callable[[str], T]:
    """An argparse type from a parser whose ValueError says what is wrong (argparse shows that message)."""
    def convert(text: str) -> T:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


def add_args(parser: argparse.ArgumentParser, args: Iterable[Arg]) -> argparse.ArgumentParser:
    for one in args:
        later = {"default": one.default_from()} if one.default_from else {}
        parser.add_argument(*one.names, **one.options, **later)
    return parser


def add(parsers: argparse._SubParsersAction[argparse.ArgumentParser], verb: Verb) -> argparse.ArgumentParser:
    """The verb's parser, added to ``parsers`` with its arguments and what runs it."""
    options: dict[str, Any] = {"aliases": list(verb.aliases)} if verb.aliases else {}
    if verb.description is not None:
        options["description"] = verb.description
    sub: argparse.ArgumentParser = parsers.add_parser(verb.name, help=verb.help, **options)
    add_args(sub, verb.args)
    defaults = {**verb.defaults, **({"run": verb.run} if verb.run else {})}
    if defaults:
        sub.set_defaults(**defaults)
    return sub
