"""Slurm time formats: what users type for -t/--begin and what squeue/sinfo/scontrol print."""

from __future__ import annotations

import time

import pytest

from shoal.timefmt import (
    NOT_SET,
    UNLIMITED,
    format_duration,
    format_hms,
    format_limit_sinfo,
    format_limit_squeue,
    format_time_limit,
    format_timestamp,
    parse_datetime,
    parse_time_limit,
)


@pytest.mark.parametrize(
    ("text", "minutes"),
    [
        ("0", 0),
        ("5", 5),
        ("90", 90),
        ("0:30", 1),
        ("1:00", 1),
        ("1:01", 2),
        ("2:00:00", 120),
        ("1:30:30", 91),
        ("1-0", 1440),
        ("1-12", 2160),
        ("2-3:04", 2 * 1440 + 3 * 60 + 4),
        ("2-03:04:05", 2 * 1440 + 3 * 60 + 5),
        ("UNLIMITED", UNLIMITED),
        ("infinite", UNLIMITED),
        ("INFINITE", UNLIMITED),
        ("-1", UNLIMITED),
        (" 10 ", 10),
    ],
    ids=lambda v: repr(v),
)
def test_parse_time_limit(text: str, minutes: int) -> None:
    assert parse_time_limit(text) == minutes


@pytest.mark.parametrize(
    "text",
    ["", "abc", "-5", "1:2:3:4", "1-", "-1-0", "1h", "1.5", "1--2", "1-2:3:4:5", ":30", "5:"],
    ids=repr,
)
def test_parse_time_limit_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="Invalid time limit specification"):
        parse_time_limit(text)


@pytest.mark.parametrize(
    ("minutes", "text"),
    [(5, "00:05:00"), (0, "00:00:00"), (60, "01:00:00"), (1440, "1-00:00:00"), (1501, "1-01:01:00"),
     (UNLIMITED, "UNLIMITED"), (NOT_SET, "NONE")],
    ids=repr,
)  # fmt: skip
def test_format_time_limit_as_scontrol(minutes: int, text: str) -> None:
    assert format_time_limit(minutes) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0:00"), (3, "0:03"), (1800, "30:00"), (3600, "1:00:00"), (183845, "2-03:04:05"),
     (86399, "23:59:59"), (-5, "INVALID")],
    ids=repr,
)  # fmt: skip
def test_format_duration_as_squeue(seconds: int, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    ("minutes", "squeue", "sinfo"),
    [(30, "30:00", "30:00"), (120, "2:00:00", "2:00:00"), (60, "1:00:00", "1:00:00"),
     (UNLIMITED, "UNLIMITED", "infinite"), (NOT_SET, "Partition_Limit", "n/a")],
    ids=repr,
)  # fmt: skip
def test_format_limits(minutes: int, squeue: str, sinfo: str) -> None:
    assert format_limit_squeue(minutes) == squeue
    assert format_limit_sinfo(minutes) == sinfo


@pytest.mark.parametrize(
    ("seconds", "text"), [(3, "00:00:03"), (93784, "1-02:03:04"), (0, "00:00:00"), (-1, "00:00:00")], ids=repr
)
def test_format_hms_as_scontrol_runtime(seconds: int, text: str) -> None:
    assert format_hms(seconds) == text


def test_format_timestamp_is_local_iso_and_zero_is_unknown() -> None:
    ts = int(time.mktime((2026, 11, 29, 21, 39, 47, 0, 0, -1)))
    assert format_timestamp(ts) == "2026-11-29T21:39:47"
    assert format_timestamp(0) == "Unknown"
    assert format_timestamp(0, unknown="N/A") == "N/A"


def _local(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> int:
    return int(time.mktime((year, month, day, hour, minute, second, 0, 0, -1)))


NOW = _local(2026, 11, 29, 21, 39, 47)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("now", NOW),
        ("NOW", NOW),
        ("now+60", NOW + 60),
        ("now-60", NOW - 60),
        ("now+1hour", NOW + 3600),
        ("now+2hours", NOW + 7200),
        ("now+2days", NOW + 2 * 86400),
        ("now+10minutes", NOW + 600),
        ("now+10min", NOW + 600),
        ("now+30s", NOW + 30),
        ("now+1week", NOW + 7 * 86400),
        ("now+3weeks", NOW + 21 * 86400),
        ("22:00", _local(2026, 11, 29, 22, 0)),
        ("22:00:30", _local(2026, 11, 29, 22, 0, 30)),
        ("10:00", _local(2026, 11, 30, 10, 0)),
        ("10:00pm", _local(2026, 11, 29, 22, 0)),
        ("11:00 PM", _local(2026, 11, 29, 23, 0)),
        ("9:00am", _local(2026, 11, 30, 9, 0)),
        ("2027-01-02", _local(2027, 1, 2)),
        ("2027-01-02T10:30", _local(2027, 1, 2, 10, 30)),
        ("2027-01-02T10:30:15", _local(2027, 1, 2, 10, 30, 15)),
        ("2020-01-02T10:30", _local(2020, 1, 2, 10, 30)),
        ("12/25", _local(2026, 12, 25)),
        ("01/15", _local(2027, 1, 15)),
        ("12/25/27", _local(2027, 12, 25)),
        ("12.25.2027", _local(2027, 12, 25)),
        ("1225", _local(2026, 12, 25)),
        ("12/25T08:00", _local(2026, 12, 25, 8, 0)),
        ("midnight", _local(2026, 11, 30)),
        ("noon", _local(2026, 11, 30, 12)),
        ("teatime", _local(2026, 11, 30, 16)),
        ("today", _local(2026, 11, 29)),
        ("tomorrow", _local(2026, 11, 30)),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_parse_datetime(text: str, expected: int) -> None:
    assert parse_datetime(text, NOW) == expected


@pytest.mark.parametrize(
    "text",
    ["", "soon", "now+", "now+5parsecs", "now*5", "25:00", "12:60", "13:00pm", "2026-13-01", "2026-02-30",
     "13/01", "12/25/2027/1", "tomorrow tomorrow", "noon 10:00", "1"],
    ids=repr,
)  # fmt: skip
def test_parse_datetime_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_datetime(text, NOW)
