"""Array specifications as a script sees them in SLURM_ARRAY_TASK_COUNT/MIN/MAX/STEP."""

from __future__ import annotations

import pytest

from noded.arrayspec import ArraySpecError, parse_array_spec


@pytest.mark.parametrize(
    ("spec", "count", "lo", "hi", "step"),
    [
        ("0-15%4", 16, 0, 15, 1),
        ("1,3,5", 3, 1, 5, 2),
        ("0-9:2", 5, 0, 8, 2),
        ("7", 1, 7, 7, 1),
        ("1-3,10", 4, 1, 10, 1),
    ],
    ids=["range-throttled", "list", "stepped", "single", "mixed"],
)
def test_parse_array_spec(spec: str, count: int, lo: int, hi: int, step: int) -> None:
    shape = parse_array_spec(spec)
    assert (shape.count, shape.min, shape.max, shape.step) == (count, lo, hi, step)


@pytest.mark.parametrize("spec", ["", "a-b", "5-1", "0-9:0", "-3"], ids=["empty", "words", "reversed", "step0", "neg"])
def test_bad_array_spec(spec: str) -> None:
    with pytest.raises(ArraySpecError, match="Invalid job array specification"):
        parse_array_spec(spec)
