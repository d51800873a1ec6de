"""Exit codes as 22.05 shows them (measured 2026-12-01): sacct's ExitCode takes 128 off a code of
128 or more (`exit 143` -> 15:0), and srun's own allocation ends with a task's signal only when a
task was killed by one (`exit 143` -> 143:0; `kill -TERM $$` -> 0:15)."""

from __future__ import annotations

import pytest

from cli.sacct import exit_code_text
from cli.srun import allocation_exit
from cli.stepio import TaskExit


@pytest.mark.parametrize(
    ("code", "sig", "shown"),
    [
        (0, 0, "0:0"),
        (100, 0, "100:0"),
        (127, 0, "127:0"),
        (128, 0, "0:0"),
        (129, 0, "1:0"),
        (143, 0, "15:0"),
        (200, 0, "72:0"),
        (255, 0, "127:0"),
        (0, 15, "0:15"),
    ],
)
def test_sacct_exit_code(code: int, sig: int, shown: str) -> None:
    assert exit_code_text(code, sig) == shown


@pytest.mark.parametrize(
    ("exits", "status", "expected"),
    [
        ({0: TaskExit("n1", 143, 0)}, 143, (143, 0)),
        ({0: TaskExit("n1", 0, 15)}, 143, (0, 15)),
        ({0: TaskExit("n1", 143, 0), 1: TaskExit("n1", 0, 15)}, 143, (0, 15)),
        ({0: TaskExit("n1", 3, 0), 1: TaskExit("n1", 7, 0)}, 7, (7, 0)),
        ({0: TaskExit("n1", 0, 0)}, 0, (0, 0)),
        ({}, 1, (1, 0)),
        ({}, 137, (0, 9)),
    ],
    ids=["exit-143", "sigterm", "exit-143-and-sigterm", "highest-code", "ok", "no-tasks", "no-tasks-signal"],
)
def test_srun_own_allocation_exit(exits: dict[int, TaskExit], status: int, expected: tuple[int, int]) -> None:
    assert allocation_exit(exits, status) == expected
