"""Dependency= and squeue %E as 22.05 shows them (scenarios 140, 144, 145 and the running one)."""

from __future__ import annotations

import pytest

from cli.show import job_lines
from shoal.depshow import shown_dependency
from shoal.v1 import jobs_pb2


@pytest.mark.parametrize(
    ("given", "never", "shown"),
    [
        ("afterok:12", False, "afterok:12(unfulfilled)"),
        ("afterok:12:12", False, "afterok:12(unfulfilled)"),  # 144: a job waited for once
        ("afterany:7", False, "afterany:7(unfulfilled)"),
        ("after:5+3:6", False, "after:5+3(unfulfilled),after:6+3(unfulfilled)"),  # the +time for each
        ("afterok:12?afterany:13", False, "afterok:12(unfulfilled)?afterany:13(unfulfilled)"),
        ("12", False, "afterany:12(unfulfilled)"),
        ("afterok:30_2,singleton", False, "afterok:30_2(unfulfilled),singleton(unfulfilled)"),
        ("afternotok:346", True, "afternotok:346(failed)"),
        ("", False, "(null)"),
    ],
    ids=[
        "one",
        "twice",
        "afterany",
        "plus time",
        "any of",
        "bare id",
        "task and singleton",
        "failed",
        "none",
    ],
)
def test_pending_job(given: str, never: bool, shown: str) -> None:
    assert shown_dependency(given, pending=True, never=never) == shown


def test_a_job_that_is_no_longer_pending_shows_null() -> None:
    assert shown_dependency("afterok:12", pending=False, never=False) == "(null)"


def test_scontrol_show_job_line() -> None:
    job = jobs_pb2.JobInfo(job_id=345, state=jobs_pb2.PENDING, state_reason="Dependency")
    job.spec.dependency = "afterok:344"
    line = next(line for line in job_lines(job, now=0) if "JobState=" in line)
    assert line.strip() == "JobState=PENDING Reason=Dependency Dependency=afterok:344(unfulfilled)"
