"""Slurm's time formats: limits in minutes, durations, timestamps and --begin style dates.

Every process shares these so that a limit typed as `-t 1-0` reads the same everywhere and prints
the way squeue, sinfo and scontrol print it. Pure functions: the current time is passed in.
"""

from __future__ import annotations

import datetime as _dt
import re
import time

UNLIMITED = -2
"""Minutes sentinel (proto): no limit ("UNLIMITED", "INFINITE")."""
NOT_SET = -1
"""Minutes sentinel (proto): not given, take the partition's."""

_UNLIMITED_WORDS = frozenset({"unlimited", "infinite", "-1"})
# re.ASCII everywhere: Slurm reads ASCII digits only, where \d and int() also take "１２" (fullwidth)
_DAYS_FORM = re.compile(r"(\d+)-(\d+)(?::(\d+)(?::(\d+))?)?", re.ASCII)
_CLOCK_FORM = re.compile(r"(\d+)(?::(\d+)(?::(\d+))?)?", re.ASCII)


def parse_time_limit(text: str) -> int:
    """A Slurm time limit ("30", "1:30", "2:00:00", "1-12", "1-0:30", "1-0:0:30", "UNLIMITED") -> minutes.

    Seconds round up to a whole minute, as Slurm does ("0:30" -> 1). "-1" means UNLIMITED, like Slurm.
    """
    seconds = parse_time_seconds(text)
    return UNLIMITED if seconds < 0 else (seconds + 59) // 60


def parse_time_seconds(text: str) -> int:
    """A Slurm time in the time-limit formats -> seconds (a bare number is minutes); -1 = UNLIMITED/-1."""
    value = text.strip()
    if value.lower() in _UNLIMITED_WORDS:
        return -1
    days = hours = minutes = seconds = 0
    match = _DAYS_FORM.fullmatch(value)
    if match:
        days, hours = int(match[1]), int(match[2])
        minutes = int(match[3] or 0)
        seconds = int(match[4] or 0)
    else:
        match = _CLOCK_FORM.fullmatch(value)
        if not match:
            raise ValueError("Invalid time limit specification")
        parts = [int(p) for p in match.groups() if p is not None]
        if len(parts) == 1:
            minutes = parts[0]
        elif len(parts) == 2:
            minutes, seconds = parts
        else:
            hours, minutes, seconds = parts
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def _d_hh_mm_ss(seconds: int) -> str:
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{hours:02d}:{minutes:02d}:{secs:02d}"


def format_time_limit(minutes: int) -> str:
    """Minutes as scontrol prints TimeLimit/MaxTime: "00:05:00", "1-00:00:00", "UNLIMITED", "NONE"."""
    if minutes == UNLIMITED:
        return "UNLIMITED"
    if minutes < 0:
        return "NONE"
    return _d_hh_mm_ss(minutes * 60)


def format_hms(seconds: int) -> str:
    """Seconds as scontrol prints RunTime: "00:00:03", "1-02:03:04" (negative clamps to zero)."""
    return _d_hh_mm_ss(max(seconds, 0))


def format_duration(seconds: int) -> str:
    """Seconds as squeue's TIME column: "0:00", "0:03", "30:00", "1:00:00", "2-03:04:05"."""
    if seconds < 0:
        return "INVALID"
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def format_limit_squeue(minutes: int) -> str:
    """A limit in minutes as squeue's TIME_LIMIT column ("30:00", "UNLIMITED", "Partition_Limit")."""
    if minutes == UNLIMITED:
        return "UNLIMITED"
    if minutes < 0:
        return "Partition_Limit"
    return format_duration(minutes * 60)


def format_limit_sinfo(minutes: int) -> str:
    """A limit in minutes as sinfo's TIMELIMIT column ("1:00:00", "infinite", "n/a")."""
    if minutes == UNLIMITED:
        return "infinite"
    if minutes < 0:
        return "n/a"
    return format_duration(minutes * 60)


def format_timestamp(ts: int, unknown: str = "Unknown") -> str:
    """Epoch seconds as Slurm prints times, in local time: "2026-11-29T21:39:47"; 0 -> `unknown`."""
    if ts <= 0:
        return unknown
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ts))


# --- --begin / -S style dates -------------------------------------------------------------------

_UNIT_SECONDS: dict[str, int] = {}
for _names, _secs in (
    (("", "s", "sec", "secs", "second", "seconds"), 1),
    (("m", "min", "mins", "minute", "minutes"), 60),
    (("h", "hr", "hrs", "hour", "hours"), 3600),
    (("d", "day", "days"), 86400),
    (("w", "wk", "wks", "week", "weeks"), 604800),
):
    for _name in _names:
        _UNIT_SECONDS[_name] = _secs

_NAMED_TIMES = {
    "midnight": (0, 0),
    "elevenses": (11, 0),
    "noon": (12, 0),
    "fika": (15, 0),
    "teatime": (16, 0),
}
_NOW_FORM = re.compile(r"now(?:([+-])(\d+)([a-z]*))?", re.ASCII)
_TIME_FORM = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2}))?\s*(am|pm)?", re.ASCII)
_ISO_DATE = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})", re.ASCII)
_US_DATE = re.compile(r"(\d{1,2})([/.])(\d{1,2})(?:\2(\d{2}|\d{4}))?", re.ASCII)
_PACKED_DATE = re.compile(r"(\d{2})(\d{2})(\d{2})?", re.ASCII)
_DATE_T_TIME = re.compile(r"([\d/.-]+)t(\d.*)", re.ASCII)


def _bad(text: str) -> ValueError:
    return ValueError(f"Invalid time specification: {text}")


def _epoch(day: _dt.date, hms: tuple[int, int, int]) -> int:
    """Local wall-clock date and time -> epoch seconds (the time zone comes from time.localtime)."""
    struct = (day.year, day.month, day.day, hms[0], hms[1], hms[2], 0, 0, -1)
    return int(time.mktime(struct))


def _parse_clock(token: str, text: str) -> tuple[int, int, int] | None:
    match = _TIME_FORM.fullmatch(token)
    if not match:
        return None
    hour, minute, second = int(match[1]), int(match[2]), int(match[3] or 0)
    meridian = match[4]
    if meridian:
        if not 1 <= hour <= 12:
            raise _bad(text)
        hour = hour % 12 + (12 if meridian == "pm" else 0)
    if hour > 23 or minute > 59 or second > 59:
        raise _bad(text)
    return hour, minute, second


def _parse_date(token: str, today: _dt.date, text: str) -> tuple[_dt.date, bool] | None:
    """A date token -> (date, year_given); None when the token is not a date form."""
    try:
        match = _ISO_DATE.fullmatch(token)
        if match:
            return _dt.date(int(match[1]), int(match[2]), int(match[3])), True
        match = _US_DATE.fullmatch(token) or _PACKED_DATE.fullmatch(token)
        if match:
            groups = match.groups()
            month, day = int(groups[0]), int(groups[2] if len(groups) == 4 else groups[1])
            year_text = groups[-1]
            if year_text is None:
                return _dt.date(today.year, month, day), False
            year = int(year_text)
            return _dt.date(year + 2000 if year < 100 else year, month, day), True
    except ValueError:
        raise _bad(text) from None
    return None


def parse_datetime(text: str, now: int) -> int:
    """A Slurm --begin/-S time -> epoch seconds, relative to `now` (epoch seconds).

    Forms: "now", "now+60" (seconds), "now+2hours" (seconds|minutes|hours|days|weeks, short forms),
    "HH:MM[:SS] [AM|PM]" (today, or tomorrow if already past), "YYYY-MM-DD[THH:MM[:SS]]",
    "MM/DD[/YY]", "MMDD[YY]", "midnight", "noon", "teatime", "today", "tomorrow"; a date and a
    time may be combined with "T" or a space.
    """
    value = text.strip().lower()
    if not value:
        raise _bad(text)
    match = _NOW_FORM.fullmatch(value.replace(" ", ""))
    if match:
        if match[1] is None:
            return now
        unit = _UNIT_SECONDS.get(match[3])
        if unit is None:
            raise _bad(text)
        offset = int(match[2]) * unit
        return now + offset if match[1] == "+" else now - offset

    today = _dt.date.fromtimestamp(now)
    day: _dt.date | None = None
    year_given = False
    clock: tuple[int, int, int] | None = None
    tokens: list[str] = []
    for token in value.split():
        joined = _DATE_T_TIME.fullmatch(token)
        tokens.extend(joined.groups() if joined else (token,))
    if len(tokens) >= 2 and tokens[-1] in ("am", "pm"):
        tokens[-2:] = [tokens[-2] + tokens[-1]]
    for token in tokens:
        if token in _NAMED_TIMES and clock is None:
            clock = (*_NAMED_TIMES[token], 0)
        elif token == "today" and day is None:
            day, year_given = today, True
        elif token == "tomorrow" and day is None:
            day, year_given = today + _dt.timedelta(days=1), True
        elif clock is None and (parsed := _parse_clock(token, text)) is not None:
            clock = parsed
        elif day is None and (dated := _parse_date(token, today, text)) is not None:
            day, year_given = dated
        else:
            raise _bad(text)

    if day is None:
        # A bare time of day: today, or tomorrow once it has passed.
        if clock is None:
            raise _bad(text)
        result = _epoch(today, clock)
        if result < now:
            result = _epoch(today + _dt.timedelta(days=1), clock)
        return result
    result = _epoch(day, clock or (0, 0, 0))
    if not year_given and result < now:
        try:
            result = _epoch(day.replace(year=day.year + 1), clock or (0, 0, 0))
        except ValueError:
            raise _bad(text) from None
    return result
