"""--array specifications: the forms sbatch accepts, the ones it refuses, and how squeue prints ids."""

from __future__ import annotations

import pytest

from shoal.arrayspec import ArraySpec, format_task_ids, parse_array, task_step

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


@pytest.mark.parametrize("text", ["1001", "0-1001", "5,2000"], ids=["single", "range", "list"])
def test_max_array_size(text: str) -> None:
    with pytest.raises(ValueError, match=r"\(task id exceeds MaxArraySize\)$"):
        parse_array(text)


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
