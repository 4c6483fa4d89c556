"""The CLI reference (docs/reference/cli.md), generated from the parser itself (so it cannot drift from it; a test
compares). ``python -m helmop.cli.reference`` prints it."""

from __future__ import annotations

import argparse

from .main import parser

COMMON = {"--kubeconfig", "--context", "--namespace", "-h"}  # every cluster verb's, said once under the table


def _subparsers(node: argparse.ArgumentParser) -> dict[str, tuple[argparse.ArgumentParser, str]]:
    """Each verb (by its first name, not its aliases) and what its help says it does."""
    for action in node._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {str(choice.dest): str(choice.help or "") for choice in action._choices_actions}
            seen: dict[int, str] = {}
            for name, sub in action.choices.items():
                seen.setdefault(id(sub), name)
            return {name: (sub, sub.description or helps.get(name, "")) for name, sub in action.choices.items()
                    if seen[id(sub)] == name}
    return {}


def _value(action: argparse.Action) -> str:
    if action.choices:
        return "|".join(map(str, action.choices))
    return str(action.metavar or action.dest.upper())


def _positional(action: argparse.Action) -> str:
    text = _value(action)
    if action.nargs == "*":
        return f"[{text} ...]"
    return f"[{text}]" if action.nargs == "?" else text


def _flag(action: argparse.Action) -> str:
    name = "/".join(sorted(action.option_strings, key=len))
    takes_value = action.nargs != 0 and not isinstance(action, argparse.BooleanOptionalAction)
    return f"`{name} {_value(action)}`" if takes_value else f"`{name}`"


def _rows(prefix: str, node: argparse.ArgumentParser, description: str) -> list[str]:
    subs = _subparsers(node)
    if subs:
        return [row for name, (sub, what) in subs.items() for row in _rows(f"{prefix} {name}", sub, what)]
    options = {o for a in node._actions for o in a.option_strings}
    common = COMMON if "--context" in options else {"-h"}
    positionals = [_positional(a) for a in node._actions if not a.option_strings]
    flags = [_flag(a) for a in node._actions if a.option_strings and not common & set(a.option_strings)]
    command = " ".join([prefix, *positionals]).replace("|", "\\|")
    what = " ".join(description.split()).replace("|", "\\|")
    return [f"| `{command}` | {', '.join(f.replace('|', chr(92) + '|') for f in flags)} | {what} |"]


def markdown() -> str:
    rows = [row for name, (sub, what) in _subparsers(parser()).items() for row in _rows(f"helmop {name}", sub, what)]
    return ("| command | flags | what it does |\n|---|---|---|\n" + "\n".join(rows) + "\n\n"
            "Every verb that talks to a cluster also takes `--kubeconfig FILE`, `--context NAME` and "
            "`-n/--namespace NS`, read as kubectl reads them; `--help` on any verb says more.\n")


if __name__ == "__main__":
    print(markdown(), end="")
