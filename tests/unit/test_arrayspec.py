"""--array specifications: the forms sbatch accepts, the ones it refuses, and how squeue prints ids."""

from __future__ import annotations

import pytest

from shoal.arrayspec import ArraySpec, check_array, format_task_ids, parse_array, task_step

GOOD = [
    ("0-15", tuple(range(16)), 0),
    ("0-15%4", tuple(range(16)), 4),
    ("1,3,5", (1, 3, 5), 0),
    ("0-9:2", (0, 2, 4, 6, 8), 0),
    ("1-5,10%2", (1, 2, 3, 4, 5, 10), 2),
    ("7", (7,), 0),
    ("3,1,3,2", (1, 2, 3), 0),
    ("0-1000", tuple(range(1001)), 0),
    (" 1-3 ", (1, 2, 3), 0),
]


@pytest.mark.parametrize("text,ids,throttle", GOOD, ids=[g[0] for g in GOOD])
def test_parse_good(text: str, ids: tuple[int, ...], throttle: int) -> None:
    assert parse_array(text) == ArraySpec(task_ids=ids, max_running=throttle)


BAD = ["", "x", "-1", "1--3", "5-1", "0-9:0", "0-9:-1", "1,,2", "1-3%", "1-3%0", "1-3%x", "%2", "1.5", "1-"]


@pytest.mark.parametrize("text", BAD, ids=[b or "empty" for b in BAD])
def test_parse_bad(text: str) -> None:
    with pytest.raises(ValueError, match=r"^Invalid job array specification$"):
        parse_array(text)


@pytest.mark.parametrize(
    "text",
    ["1001", "0-1001", "5,2000", "1-99999999999", "0-4000000000:1000"],
    ids=["single", "range", "list", "huge", "huge-step"],
)
def test_max_array_size(text: str) -> None:
    """22.05 says only "Invalid job array specification" (checked on the real one: -a 1-99999999999), and
    refuses at once: the ids are never built (a huge range used to grow ctld to gigabytes)."""
    with pytest.raises(ValueError, match=r"^Invalid job array specification$"):
        parse_array(text)


@pytest.mark.parametrize(
    "text", ["１-3", "1-３", "1-3%２", "٣"], ids=["fullwidth", "fullwidth-end", "throttle", "arabic"]
)
def test_only_ascii_digits(text: str) -> None:
    with pytest.raises(ValueError, match=r"^Invalid job array specification$"):
        parse_array(text)


def test_syntax_check_expands_nothing() -> None:
    """sbatch checks the syntax only; a range of 10**10 ids is as cheap as three."""
    ranges, throttle = check_array("1-9999999999,7%5")
    assert (ranges[0][-1], len(ranges[0]), throttle) == (9999999999, 9999999999, 5)


def test_max_array_size_configurable() -> None:
    assert parse_array("0-4999", max_size=5000).count == 5000
    with pytest.raises(ValueError):
        parse_array("10", max_size=10)


FORMAT = [
    ([1, 2, 3, 5, 7, 8, 9], "1-3,5,7-9"),
    ([4], "4"),
    ([3, 1, 2], "1-3"),
    ([0, 2, 4], "0,2,4"),
    ([], ""),
]


@pytest.mark.parametrize("ids,want", FORMAT, ids=[f[1] or "empty" for f in FORMAT])
def test_format_task_ids(ids: list[int], want: str) -> None:
    assert format_task_ids(ids) == want


def test_env_helpers() -> None:
    spec = parse_array("0-9:3")
    assert (spec.count, spec.min_id, spec.max_id, spec.step) == (4, 0, 9, 3)
    assert parse_array("1,2,5").step == 1
    assert task_step([7]) == 1
