"""Semantic versions and Helm's version constraints (the Masterminds/semver syntax).

``^1.2``, ``~1.2.3``, ``>=1.0 <2.0``, ``1.2.x``, ``1.0 - 1.4``, ``a || b``. As in Helm, a
pre-release version only matches a constraint that mentions a pre-release, and an empty
constraint means the newest stable version.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

_VERSION = re.compile(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")


@dataclass(frozen=True, order=False)
class Version:
    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...] = ()
    text: str = ""

    @classmethod
    def parse(cls, text: str) -> Version | None:
        m = _VERSION.match(text.strip())
        if not m:
            return None
        pre = tuple(int(p) if p.isdigit() else p for p in m.group(4).split(".")) if m.group(4) else ()
        return cls(int(m.group(1)), int(m.group(2) or 0), int(m.group(3) or 0), pre, text)

    def key(self) -> tuple[int, int, int, int, tuple[tuple[int, int | str], ...]]:
        # A release sorts after its pre-releases; numeric identifiers before alphanumeric ones.
        pre = tuple((0, p) if isinstance(p, int) else (1, p) for p in self.pre)
        return (self.major, self.minor, self.patch, 0 if self.pre else 1, pre)

    def __lt__(self, other: Version) -> bool:
        return self.key() < other.key()


Check = Callable[[Version], bool]
_TERM = re.compile(r"^(\^|~>|~|>=|=>|<=|=<|>|<|!=|=)?\s*v?([0-9xX*]+(?:\.[0-9xX*]+){0,2}(?:-[0-9A-Za-z.-]+)?)$")


def _bounds(text: str) -> tuple[Version, int]:
    """The version a term names (wildcards as 0) and how many parts were given before any wildcard."""
    core, _, pre = text.partition("-")
    parts = core.split(".")
    given = 0
    numbers = []
    for part in parts:
        if part in ("x", "X", "*"):
            break
        numbers.append(int(part))
        given += 1
    numbers += [0] * (3 - len(numbers))
    version = Version.parse(".".join(map(str, numbers)) + (f"-{pre}" if pre else ""))
    assert version is not None
    return version, given


def _bump(v: Version, part: int) -> Version:
    if part == 0:
        return Version(v.major + 1, 0, 0)
    if part == 1:
        return Version(v.major, v.minor + 1, 0)
    return Version(v.major, v.minor, v.patch + 1)


def _range(low: Version, high: Version | None) -> Check:
    return lambda v: not v < low and (high is None or v < high)


def _term(term: str) -> Check:
    m = _TERM.match(term)
    if not m:
        raise ValueError(f"invalid version constraint term {term!r}")
    op, text = m.group(1) or "=", m.group(2)
    v, given = _bounds(text)
    if op == "^":
        return _caret(v, given)
    if op in ("~", "~>"):
        return _range(v, _bump(v, 0 if given == 1 else 1))
    if op in ("=", "!=") and given < 3:
        inside = _range(v, _bump(v, given - 1)) if given else (lambda _v: True)
        return inside if op == "=" else (lambda x: not inside(x))
    return _comparison(op, v, given)


def _caret(v: Version, given: int) -> Check:
    """^: up to the next change of the first nonzero part given."""
    first = next((i for i, n in enumerate((v.major, v.minor, v.patch)) if n), None)
    if given == 0:
        return lambda _v: True
    part = min(first if first is not None else given - 1, given - 1)
    return _range(v, _bump(v, part))


def _comparison(op: str, v: Version, given: int) -> Check:
    """=, !=, >, <, >= and <= of ``v`` (of which ``given`` parts were written)."""
    rules: dict[str, Check] = {
        "=": lambda x: x.key() == v.key(),
        "!=": lambda x: x.key() != v.key(),
        ">": (lambda x: v < x) if given == 3 else (lambda x: not x < _bump(v, max(given - 1, 0))),
        "<": lambda x: x < v,
        ">=": lambda x: not x < v,
        "=>": lambda x: not x < v,
    }
    # <= with a partial version includes the whole named range (<=1.2 admits 1.2.9)
    return rules.get(op) or ((lambda x: not v < x) if given == 3 else (lambda x: x < _bump(v, max(given - 1, 0))))


def _and_group(text: str) -> tuple[list[Check], bool]:
    text = re.sub(r"\s*-\s+", " - ", text.strip())
    hyphen = re.fullmatch(r"(\S+) - (\S+)", text)
    if hyphen:
        return [_term(">=" + hyphen.group(1)), _term("<=" + hyphen.group(2))], "-" in hyphen.group(1)
    text = re.sub(r"(\^|~>|~|>=|=>|<=|=<|>|<|!=|=)\s+", r"\1", text)
    terms = [t for t in re.split(r"[,\s]+", text) if t]
    if not terms:
        return [lambda _v: True], False
    mentions_pre = any("-" in t.lstrip("<>=!~^") for t in terms)
    return [_term(t) for t in terms], mentions_pre


class Constraint:
    def __init__(self, text: str) -> None:
        self.text = text.strip()
        self.groups = [_and_group(g) for g in (self.text or "*").split("||")]

    def allows(self, version: Version) -> bool:
        for checks, pre_ok in self.groups:
            if version.pre and not pre_ok:
                continue
            if all(check(version) for check in checks):
                return True
        return False


def highest(versions: Iterable[str], constraint: str) -> str | None:
    """The highest of ``versions`` that satisfies ``constraint`` (ValueError for a bad constraint)."""
    rule = Constraint(constraint)
    parsed = [v for v in (Version.parse(t) for t in versions) if v is not None]
    matching = [v for v in parsed if rule.allows(v)]
    return max(matching, key=Version.key).text if matching else None
