"""Deployment windows (issue 61), pure: spec.windows and its YAML text as helmop reads them, and the gate that
holds changes outside allow windows and inside deny windows, with the moment they may go."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from helmop.api.errors import SpecError
from helmop.api.windows import Window, parse_windows
from helmop.decisions.windows import Closed, describe, gate

WHERE = "spec.windows"
TUESDAY = datetime(2025, 3, 4, tzinfo=UTC)  # midnight UTC, Tuesday 4 March 2025


def at(day: datetime, hour: int, minute: int = 0) -> datetime:
    return day + timedelta(hours=hour, minutes=minute)


def windows(*entries: tuple[str, str, str] | tuple[str, str, str, str]) -> tuple[Window, ...]:
    """(mode, schedule, duration[, timeZone]) each, through the real parser."""
    return parse_windows([{"mode": e[0], "schedule": e[1], "duration": e[2], **({"timeZone": e[3]} if len(e) > 3
                                                                                  else {})} for e in entries], WHERE)


def entry(**fields: Any) -> list[dict[str, Any]]:
    return [{"mode": "allow", "schedule": "0 9 * * *", "duration": "1h", **fields}]


@pytest.mark.parametrize(("raw", "message"), [
    ({"mode": "allow"}, r"^spec\.windows must be a list$"),
    (entry() * 21, r"^spec\.windows has 21 windows, at most 20 are allowed$"),
    (["0 9 * * *"], r"^spec\.windows\[0\] must be a map"),
    (entry(kind="allow", applications=["*"]), r"^spec\.windows\[0\] has unknown fields applications, kind: a window "
                                              r"takes schedule, duration, timeZone, mode$"),
    (entry(mode="block"), r"^spec\.windows\[0\]\.mode must be allow or deny, not 'block'$"),
    (entry(mode=None), r"^spec\.windows\[0\]\.mode must be allow or deny, not 'None'$"),
    (entry(schedule=None), r"^spec\.windows\[0\]\.schedule is required"),
    (entry(schedule="0 " * 60), r"^spec\.windows\[0\]\.schedule is 120 characters long, at most 100"),
    (entry(schedule="0 0 9 * * *"), r"\.schedule '0 0 9 \* \* \*' is not a 5-field cron schedule .*: 6 fields$"),
    (entry(schedule="@daily"), r"is not a 5-field cron schedule .*: 1 fields$"),
    (entry(schedule="R 9 * * *"), r"'R' names r, not a month \(4th field\) or weekday \(5th\)$"),  # random
    (entry(schedule="0 9 L * *"), r"'L' names l, not a month"),
    (entry(schedule="0 9 * * 1#2"), r"'1#2' has characters other than digits, names and \* \? , - /$"),
    (entry(schedule="0 9 * mon *"), r"'mon' names mon, not a month"),
    (entry(schedule="0 24 * * *"), r"is not a 5-field cron schedule .*: is not acceptable, out of range$"),
    (entry(schedule="*/0 * * * *"), r"is not a 5-field cron schedule .*: step '0' in field 0 is not acceptable$"),
    (entry(schedule="0 9 30 2 *"), r"it names no date that exists \(such as 30 February\)$"),
    (entry(duration=None), r"^spec\.windows\[0\]\.duration is required: a duration such as 1h or 30m$"),
    (entry(duration=3600), r"^spec\.windows\[0\]\.duration is required"),  # a number is no Go duration
    (entry(duration="soon"), r"^spec\.windows\[0\]\.duration: invalid duration 'soon'"),
    (entry(duration="-1h"), r"^spec\.windows\[0\]\.duration: invalid duration '-1h'"),
    (entry(duration="0s"), r"^spec\.windows\[0\]\.duration '0s' must be more than 0 and at most 7 days \(168h\)$"),
    (entry(duration="168h1s"), r"^spec\.windows\[0\]\.duration '168h1s' must be more than 0 and at most 7 days"),
    (entry(duration="1h" + " " * 40), r"^spec\.windows\[0\]\.duration is 42 characters long, at most 40"),
    (entry(timeZone="Mars/Olympus_Mons"), r"^spec\.windows\[0\]\.timeZone 'Mars/Olympus_Mons' is not a known time "
                                          r"zone"),
    (entry(timeZone="../../etc/passwd"), r"timeZone '\.\./\.\./etc/passwd' is not a time zone name such as"),
    (entry(timeZone=2), r"timeZone '2' is not a time zone name"),
    (entry(timeZone="A" * 65), r"timeZone 'A{64}' is not a time zone name"),
    ("[{mode: allow", r"^spec\.windows is not YAML or JSON: "),
    ("#" * (16 << 10) + "\n[]", r"^spec\.windows is 16387 characters long, at most 16384 are allowed$"),
    ("mode: allow", r"^spec\.windows must be a list$"),
])
def test_each_bad_input_is_refused_with_what_is_wrong(raw: Any, message: str) -> None:
    with pytest.raises(SpecError, match=message) as caught:
        parse_windows(raw, WHERE)
    assert caught.value.reason == "InvalidSpec" and not caught.value.transient


def test_the_entry_at_fault_is_named() -> None:
    with pytest.raises(SpecError, match=r"^metadata\.annotations\[helmop\.dev/windows\]\[1\]\.duration: invalid"):
        parse_windows([*entry(), *entry(duration="an hour")], "metadata.annotations[helmop.dev/windows]")


def test_a_list_or_its_yaml_or_json_text_reads_the_same() -> None:
    listed = parse_windows([{"schedule": "0  9 * JAN-mar mon-FRI", "duration": "1h30m", "mode": "allow"},
                            {"schedule": "0 22 * * *", "duration": "45s", "mode": "deny", "timeZone": "Europe/Berlin"}],
                           WHERE)
    assert listed == (Window("0 9 * JAN-mar mon-FRI", 5400.0, "UTC", "allow"),
                      Window("0 22 * * *", 45.0, "Europe/Berlin", "deny"))
    assert parse_windows("- schedule: '0  9 * JAN-mar mon-FRI'\n  duration: 1h30m\n  mode: allow\n"
                         "- {schedule: '0 22 * * *', duration: 45s, mode: deny, timeZone: Europe/Berlin}\n",
                         WHERE) == listed
    assert parse_windows('[{"schedule": "0  9 * JAN-mar mon-FRI", "duration": "1h30m", "mode": "allow"}, '
                         '{"schedule": "0 22 * * *", "duration": "45s", "mode": "deny", "timeZone": "Europe/Berlin"}]',
                         WHERE) == listed
    assert parse_windows(None, WHERE) == parse_windows([], WHERE) == parse_windows("", WHERE) == ()
    assert parse_windows(entry(timeZone=""), WHERE)[0].time_zone == "UTC"
    assert parse_windows(entry(duration="168h", schedule="0 9 29 2 *"), WHERE)[0].duration == 7 * 24 * 3600


def test_no_windows_never_hold_changes() -> None:
    assert gate((), TUESDAY) is None


def test_an_allow_window_is_open_from_its_start_until_just_before_its_end() -> None:
    allow = windows(("allow", "0 9 * * 2-4", "7h"))  # Tuesday to Thursday, 09:00 to 16:00
    assert gate(allow, at(TUESDAY, 9)) is None  # exactly at the start: open
    assert gate(allow, at(TUESDAY, 16) - timedelta(microseconds=1)) is None
    assert gate(allow, at(TUESDAY, 16)) == Closed("outside the allow windows", at(TUESDAY, 24 + 9))  # the end: closed
    assert gate(allow, at(TUESDAY, 9) - timedelta(microseconds=1)) == Closed("outside the allow windows",
                                                                             at(TUESDAY, 9))
    assert gate(allow, at(TUESDAY, 3 * 24 + 16)) == Closed("outside the allow windows",  # Friday: next Tuesday
                                                           at(TUESDAY, 7 * 24 + 9))


def test_a_deny_window_holds_changes_until_its_end() -> None:
    deny = windows(("deny", "0 22 * * *", "1h30m"))
    assert gate(deny, at(TUESDAY, 21, 59)) is None
    why = "inside the deny window 0 22 * * * (UTC)"
    assert gate(deny, at(TUESDAY, 22)) == Closed(why, at(TUESDAY, 23, 30))
    assert gate(deny, at(TUESDAY, 23, 29)) == Closed(why, at(TUESDAY, 23, 30))
    assert gate(deny, at(TUESDAY, 23, 30)) is None


def test_deny_wins_over_an_open_allow_window() -> None:
    both = windows(("allow", "0 9 * * *", "8h"), ("deny", "0 12 * * *", "1h"))
    assert gate(both, at(TUESDAY, 11)) is None
    # the allow window is still open when the deny window ends: changes go then
    assert gate(both, at(TUESDAY, 12, 30)) == Closed("inside the deny window 0 12 * * * (UTC)", at(TUESDAY, 13))
    assert gate(both, at(TUESDAY, 17)) == Closed("outside the allow windows", at(TUESDAY, 24 + 9))


def test_the_next_opening_skips_what_a_deny_window_covers() -> None:
    # the allow window opens inside a deny window: changes go when the deny ends, the allow still open
    covered = windows(("allow", "0 9 * * *", "1h"), ("deny", "30 8 * * *", "1h"))
    assert gate(covered, at(TUESDAY, 8)) == Closed("outside the allow windows", at(TUESDAY, 9, 30))
    # on Wednesdays the deny outlasts the allow window: the next opening is Thursday's
    wednesday = TUESDAY + timedelta(days=1)
    weekly = windows(("allow", "0 9 * * *", "1h"), ("deny", "0 9 * * 3", "2h"))
    assert gate(weekly, at(wednesday, 9, 30)) == Closed("inside the deny window 0 9 * * 3 (UTC)", at(wednesday, 33))
    assert gate(weekly, at(TUESDAY, 12)) == Closed("outside the allow windows", at(wednesday, 33))
    # the first deny window named is the one reported
    assert gate(windows(("deny", "0 9 * * *", "1h"), ("deny", "0 8 * * *", "2h")), at(TUESDAY, 9, 30)) == Closed(
        "inside the deny window 0 9 * * * (UTC)", at(TUESDAY, 10))


def test_overlapping_windows_count_from_their_latest_start() -> None:
    # 09:00 for 2h and 10:00 for 2h: one closed stretch from 09:00 to 12:00
    deny = windows(("deny", "0 9,10 * * *", "2h"))
    assert gate(deny, at(TUESDAY, 9, 30)) == Closed("inside the deny window 0 9,10 * * * (UTC)", at(TUESDAY, 12))
    assert gate(deny, at(TUESDAY, 12)) is None
    # every minute for a week (10080 starts behind any moment): always closed, found without walking them
    assert gate(windows(("deny", "* * * * *", "168h")), TUESDAY) == Closed("inside the deny window * * * * * (UTC)",
                                                                          None)


def test_schedules_run_in_their_time_zone_across_daylight_saving() -> None:
    berlin = windows(("allow", "0 9 * * *", "1h", "Europe/Berlin"))
    saturday, monday = datetime(2025, 3, 29, tzinfo=UTC), datetime(2025, 3, 31, tzinfo=UTC)  # CEST from 30 March
    assert gate(berlin, at(saturday, 8, 30)) is None  # 09:30 CET
    assert gate(berlin, at(monday, 7, 30)) is None  # 09:30 CEST
    assert gate(berlin, at(monday, 8, 30)) == Closed("outside the allow windows", at(monday, 24 + 7))
    # the opening after Saturday's window is Sunday's, an hour earlier in UTC
    assert gate(berlin, at(saturday, 10)) == Closed("outside the allow windows", at(saturday, 24 + 7))
    # 02:30 does not exist on 30 March in Berlin: croniter opens the window at 03:00 CEST (01:00 UTC)
    gap = windows(("allow", "30 2 * * *", "1h", "Europe/Berlin"))
    assert gate(gap, at(saturday, 12)) == Closed("outside the allow windows", at(saturday, 24 + 1))
    # a duration is real time: 24h from midnight on the 23-hour day ends at 01:00 local the next day
    day = windows(("deny", "0 0 30 3 *", "24h", "Europe/Berlin"))
    assert gate(day, at(saturday, 24 + 22, 30)) == Closed("inside the deny window 0 0 30 3 * (Europe/Berlin)",
                                                          at(saturday, 24 + 23))
    assert gate(day, at(saturday, 24 + 23)) is None


def test_an_opening_is_looked_for_a_year_ahead_and_no_further() -> None:
    leap_day = windows(("allow", "0 9 29 2 *", "1h"))
    assert gate(leap_day, datetime(2027, 3, 4, tzinfo=UTC)) == Closed("outside the allow windows",
                                                                     datetime(2028, 2, 29, 9, tzinfo=UTC))
    assert gate(leap_day, TUESDAY) == Closed("outside the allow windows", None)  # 2028 is too far


def test_windows_that_never_open_say_so() -> None:
    # a deny window over every allow window: each day's opening is closed again
    assert gate(windows(("allow", "0 9 * * *", "1h"), ("deny", "0 9 * * *", "1h")), at(TUESDAY, 9, 30)) == Closed(
        "inside the deny window 0 9 * * * (UTC)", None)


def test_the_moment_must_be_aware() -> None:
    assert gate(windows(("allow", "0 9 * * *", "1h")), datetime(2025, 3, 4, 9, 30, tzinfo=UTC)) is None
    with pytest.raises(ValueError, match="aware datetime"):
        gate(windows(("allow", "0 9 * * *", "1h")), datetime(2025, 3, 4, 9, 30))


def test_an_aware_moment_in_any_zone_is_the_same_instant() -> None:
    berlin_noon = datetime.fromisoformat("2025-03-04T13:00:00+01:00")
    assert gate(windows(("deny", "0 12 * * *", "1h")), berlin_noon) == Closed(
        "inside the deny window 0 12 * * * (UTC)", at(TUESDAY, 13))


def test_windows_are_described_in_a_few_words() -> None:
    described = [describe(w) for w in windows(("allow", "0 9 * * 2-4", "7h"),
                                              ("deny", "0 22 * * *", "1h30m", "Europe/Berlin"),
                                              ("allow", "*/5 * * * *", "45s"), ("deny", "0 0 * * 6", "168h"),
                                              ("allow", "0 0 * * *", "1.5s"))]
    assert described == ["allow 0 9 * * 2-4 for 7h (UTC)", "deny 0 22 * * * for 1h30m (Europe/Berlin)",
                         "allow */5 * * * * for 45s (UTC)", "deny 0 0 * * 6 for 168h (UTC)",
                         "allow 0 0 * * * for 1.5s (UTC)"]
