"""``helmop run``'s flags, generated from the settings' metadata (:class:`helmop.api.settings.Flag`), and the
:class:`Settings` built from what they parsed; and the chart's side of the same flags: which value of
deploy/helmop gives each (``python -m helmop.cli.runflags`` prints them)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

from helmop.api import settings
from helmop.api.settings import Flag, Settings

from .argtree import explained


def add(parser: argparse.ArgumentParser) -> None:
    """Every setting's flags, in the order of the settings' fields."""
    for flag in settings.flags():
        parser.add_argument(*(flag.name, *([flag.short] if flag.short else [])), **_options(flag))


def _options(flag: Flag) -> dict[str, Any]:
    """argparse's keywords for ``flag``: unset flags parse as None (a switch: False), the setting's default then."""
    options: dict[str, Any] = {"help": flag.help}
    if flag.negatable:
        options["action"] = argparse.BooleanOptionalAction
    elif flag.parse is None:
        options["action"] = "store_true"
    else:
        # a class (int) words its own refusal; a parser's ValueError says what is wrong
        options["type"] = flag.parse if isinstance(flag.parse, type) else explained(flag.parse)
        options.update({"metavar": flag.metavar} if flag.metavar else {})
        options.update({"choices": flag.choices} if flag.choices else {})
        options.update({"nargs": "?", "const": flag.optional_value} if flag.optional_value else {})
        options.update({"action": "append"} if flag.repeatable else {})
    return options


def built(args: argparse.Namespace) -> Settings:
    """The settings the flags say; a value a setting refuses ends the process, naming its flag."""
    try:
        made: Settings = settings.from_flags(vars(args))
    except ValueError as exc:
        raise SystemExit(f"helmop: {exc}") from None
    return made


def chart_values() -> Iterator[tuple[str, str]]:
    """(chart value, flag) for every flag the chart gives from a value of its own."""
    for flag in settings.flags():
        if flag.chart:
            yield flag.chart, flag.name


if __name__ == "__main__":
    for value, name in chart_values():
        print(f"{value}: {name}")
