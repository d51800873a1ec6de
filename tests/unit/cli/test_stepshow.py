"""How `scontrol show step` reads its step id, as measured on the real 22.05 (2026-12-01, scenario 216):
the step part is a number, a word there is step 0, and a job alone names all of its steps."""

from __future__ import annotations

import pytest

from cli.stepshow import read_step_id


@pytest.mark.parametrize(
    ("text", "read"),
    [
        ("12.3", "12.3"),
        ("12.extern", "12.0"),  # 22.05: `Job step 12.0 not found` for a job without step 0
        ("12.batch", "12.0"),
        ("12.2x", "12.2"),
        ("12", "12"),  # every step of job 12
        ("", ""),  # every step
    ],
    ids=["number", "extern", "batch", "number-then-word", "job", "all"],
)
def test_step_ids_read_as_22_05(text: str, read: str) -> None:
    assert read_step_id(text) == read
