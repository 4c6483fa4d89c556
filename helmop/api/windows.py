"""Deployment windows (issue 61): when changes to an object may go, as Argo CD's sync windows say it. A window
opens at each time of its 5-field cron ``schedule`` (in ``timeZone``, UTC by default) for ``duration``; ``mode``
allow or deny. Read from spec.windows (helmop's HelmRelease and ConfigSync), from the ``helmop.dev/windows``
annotation (Flux's kinds) or from the namespace's ``helmop-windows`` ConfigMap (key ``windows``), the last two
as YAML or JSON text. The decision is helmop.decisions.windows. Pure: zone names are checked against the
system's time zone database (zoneinfo), nothing else is read."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from croniter import CroniterBadDateError, CroniterError, croniter

from . import yamlc
from .durations import parse_duration
from .errors import SpecError, some
from .fields import optional_list

Mode = Literal["allow", "deny"]

MAX_WINDOWS = 20  # each is a cron evaluation on every reconcile of the object
MAX_TEXT = 16 << 10  # an annotation's or ConfigMap's YAML: 20 windows fit in far less
MAX_DURATION = 7 * 24 * 3600.0
MAX_SCHEDULE = 100
MAX_DURATION_TEXT = 40
MAX_ZONE = 64  # the longest IANA name is 32 characters
KEYS = ("schedule", "duration", "timeZone", "mode")

# Standard 5-field cron: numbers, month and weekday names, * ? , - /. croniter's extensions are refused: R is
# random (the window would move between reconciles), H needs a hash seed, L and # are not standard cron.
_FIELD = re.compile(r"[0-9A-Za-z*?,/-]+")
_NAMES = re.compile(r"[A-Za-z]+")
_MONTHS = {"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}
_DAYS = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"}
_ZONE = re.compile(r"[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*")  # no path tricks reach the zone database
_SOME_TIME = datetime(2000, 1, 1, tzinfo=UTC)  # a schedule must find a next time from here: it fires at all


@dataclass(frozen=True)
class Window:
    schedule: str  # 5-field cron, in time_zone
    duration: float  # seconds, > 0 and at most 7 days
    time_zone: str  # an IANA name; "UTC" by default
    mode: Mode


def parse_windows(raw: Any, where: str) -> tuple[Window, ...]:
    """The windows in ``raw``: a list (spec.windows), YAML or JSON text of one (the annotation's or ConfigMap's
    value), or None (none). SpecError naming ``where`` and the entry for anything else."""
    if isinstance(raw, str):
        raw = _load(raw, where)
    entries = optional_list(raw, where)
    if len(entries) > MAX_WINDOWS:
        raise SpecError("InvalidSpec", f"{where} has {len(entries)} windows, at most {MAX_WINDOWS} are allowed")
    return tuple(_window(entry, f"{where}[{i}]") for i, entry in enumerate(entries))


def _load(text: str, where: str) -> Any:
    if len(text) > MAX_TEXT:
        raise SpecError("InvalidSpec", f"{where} is {len(text)} characters long, at most {MAX_TEXT} are allowed")
    try:
        return yamlc.load(text)
    except yaml.YAMLError as exc:
        raise SpecError("InvalidSpec", f"{where} is not YAML or JSON: {str(exc)[:200]}") from None


def _window(entry: Any, where: str) -> Window:
    if not isinstance(entry, dict):
        raise SpecError("InvalidSpec", f"{where} must be a map with schedule, duration, timeZone and mode")
    unknown = sorted(str(key) for key in entry if key not in KEYS)
    if unknown:
        raise SpecError("InvalidSpec", f"{where} has unknown fields {some(unknown, 5, 40)}: a window takes "
                                       f"{', '.join(KEYS)}")
    mode = entry.get("mode")
    if mode not in ("allow", "deny"):
        raise SpecError("InvalidSpec", f"{where}.mode must be allow or deny, not {str(mode)[:40]!r}")
    return Window(schedule=_schedule(entry.get("schedule"), f"{where}.schedule"),
                  duration=_duration(entry.get("duration"), f"{where}.duration"),
                  time_zone=_zone(entry.get("timeZone"), f"{where}.timeZone"), mode=mode)


def _schedule(raw: Any, where: str) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise SpecError("InvalidSpec", f"{where} is required: a 5-field cron schedule such as '0 22 * * *'")
    if len(raw) > MAX_SCHEDULE:
        raise SpecError("InvalidSpec", f"{where} is {len(raw)} characters long, at most {MAX_SCHEDULE} are allowed")
    fields = raw.split()
    problem = _syntax(fields)
    if not problem:
        try:
            croniter(raw, _SOME_TIME).get_next(datetime)
        except CroniterBadDateError:
            problem = "it names no date that exists (such as 30 February)"
        except CroniterError as exc:  # out of range, a bad step or range
            problem = str(exc).removeprefix(f"[{raw}] ")[:200]
    if problem:
        raise SpecError("InvalidSpec", f"{where} {raw!r} is not a 5-field cron schedule (minute hour day-of-month "
                                       f"month day-of-week): {problem}")
    return " ".join(fields)


def _syntax(fields: list[str]) -> str:
    """What is wrong with the fields, beyond what croniter checks; "" when nothing."""
    if len(fields) != 5:
        return f"{len(fields)} fields"
    for i, field in enumerate(fields):
        if not _FIELD.fullmatch(field):
            return f"{field!r} has characters other than digits, names and * ? , - /"
        names = {name.lower() for name in _NAMES.findall(field)} - (_MONTHS if i == 3 else _DAYS if i == 4 else set())
        if names:
            return f"{field!r} names {some(sorted(names), 3, 20)}, not a month (4th field) or weekday (5th)"
    return ""


def _duration(raw: Any, where: str) -> float:
    if not isinstance(raw, str) or not raw:
        raise SpecError("InvalidSpec", f"{where} is required: a duration such as 1h or 30m")
    if len(raw) > MAX_DURATION_TEXT:
        raise SpecError("InvalidSpec", f"{where} is {len(raw)} characters long, at most {MAX_DURATION_TEXT} are "
                                       "allowed")
    try:
        seconds = parse_duration(raw)
    except ValueError as exc:
        raise SpecError("InvalidSpec", f"{where}: {exc}") from None
    if not 0 < seconds <= MAX_DURATION:
        raise SpecError("InvalidSpec", f"{where} {raw!r} must be more than 0 and at most 7 days (168h)")
    return seconds


def _zone(raw: Any, where: str) -> str:
    if raw is None or raw == "":
        return "UTC"
    if not isinstance(raw, str) or len(raw) > MAX_ZONE or not _ZONE.fullmatch(raw):
        raise SpecError("InvalidSpec", f"{where} {str(raw)[:MAX_ZONE]!r} is not a time zone name such as "
                                       "Europe/Berlin or UTC")
    try:
        ZoneInfo(raw)
    except (ZoneInfoNotFoundError, ValueError):
        raise SpecError("InvalidSpec", f"{where} {raw!r} is not a known time zone (IANA names such as "
                                       "America/New_York)") from None
    return raw
