"""Whether changes may go now, by an object's deployment windows (helmop.api.windows), as Argo CD decides for
its sync windows: with no window, always; with allow windows, only while one is open; never while a deny window
is open (deny wins over allow). A window is open from each time of its schedule, inclusive, for its duration,
exclusive: [start, start + duration). Schedules run in their time zone as croniter runs them (a time in a
spring-forward gap moves to the hour after it; one in a fall-back's repeated hour comes twice). Pure.

This runs on every reconcile of an object with windows, so no check walks a schedule's ticks: a window is open
at t when its first start after t - duration is not after t (one cron step), and the search for the next
opening jumps from window edge to window edge, with a bound on the cron steps it may take."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter

from helmop.api.windows import Window

LOOK_AHEAD = timedelta(days=366)  # an opening further away than this is reported as none
CRON_STEPS = 1000  # the search's budget of cron evaluations (each ~0.1 ms): windows that keep closing what
# others open (a deny on every allow) would otherwise be followed for a year of edges


@dataclass(frozen=True)
class Closed:
    """Changes wait: ``why`` in words for a condition message, ``opens_at`` (UTC) the first moment changes may go,
    None when there is none within LOOK_AHEAD (or the search's budget)."""

    why: str
    opens_at: datetime | None


def gate(windows: Sequence[Window], now: datetime) -> Closed | None:
    """None when changes may go at ``now`` (an aware datetime) under ``windows`` (from parse_windows);
    else why not and when they may."""
    if now.tzinfo is None:
        raise ValueError("gate needs an aware datetime: a naive one would be read in the machine's local time")
    if not windows:
        return None
    now = now.astimezone(UTC)
    allows = [_Schedule(w) for w in windows if w.mode == "allow"]
    denies = [_Schedule(w) for w in windows if w.mode == "deny"]
    deny = next((d for d in denies if d.open_at(now)), None)
    if deny:
        why = f"inside the deny window {deny.window.schedule} ({deny.window.time_zone})"
    elif allows and not any(a.open_at(now) for a in allows):
        why = "outside the allow windows"
    else:
        return None
    return Closed(why, _opening(allows, denies, now, steps=max(1, CRON_STEPS // (2 * len(windows)))))


def describe(window: Window) -> str:
    """A window in a few words, e.g. "allow 0 9 * * 2-4 for 7h (UTC)"."""
    return f"{window.mode} {window.schedule} for {_span(window.duration)} ({window.time_zone})"


def _opening(allows: list[_Schedule], denies: list[_Schedule], now: datetime, steps: int) -> datetime | None:
    """The first moment after ``now`` (closed) at which no deny window is open and, if there are allow windows,
    one is. Only two kinds of moment can be it: a deny window's end and an allow window's start; each step
    jumps to the next candidate that the windows open at the current one leave (every step takes at most two
    cron evaluations per window)."""
    moment, horizon = now, now + LOOK_AHEAD
    for _ in range(steps):
        ends = [d.end_after(moment) for d in denies if d.open_at(moment)]
        if ends:
            moment = max(ends)  # each of these denies stays open until its own end
        elif allows and not any(a.open_at(moment) for a in allows):
            moment = min(a.start_after(moment) for a in allows)  # no allow opens before its next start
        else:
            return moment
        if moment > horizon:
            return None
    return None


class _Schedule:
    """One window's schedule, evaluated at UTC instants: durations are spans of real time, so arithmetic is
    done in UTC and only the cron sees the window's zone."""

    def __init__(self, window: Window) -> None:
        self.window = window
        self.zone = ZoneInfo(window.time_zone)
        self.span = timedelta(seconds=window.duration)
        self.cron = croniter(window.schedule, datetime(2000, 1, 1, tzinfo=self.zone))  # moved by each call

    def start_after(self, moment: datetime) -> datetime:
        """The first start strictly after ``moment``."""
        return self.cron.get_next(datetime, start_time=moment.astimezone(self.zone)).astimezone(UTC)

    def open_at(self, moment: datetime) -> bool:
        # a start in (moment - span, moment]: the first one after moment - span
        return self.start_after(moment - self.span) <= moment

    def end_after(self, moment: datetime) -> datetime:
        """Where the window open at ``moment`` ends: its latest start up to ``moment`` (inclusive, hence the
        microsecond: get_prev is strict), plus the span."""
        start = self.cron.get_prev(datetime, start_time=(moment + timedelta(microseconds=1)).astimezone(self.zone))
        return start.astimezone(UTC) + self.span


def _span(seconds: float) -> str:
    """Seconds as a duration is written: 7h, 1h30m, 45s."""
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return (f"{hours:g}h" if hours else "") + (f"{minutes:g}m" if minutes else "") + (f"{secs:g}s" if secs else "")
