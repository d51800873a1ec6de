"""Submission in the controller (no daemons): what squeue shows of a job before any scheduling cycle."""

from __future__ import annotations

import pytest

from ctld.controller import Controller
from shoal.v1 import jobs_pb2
from tests.unit.ctld.builders import submit

CASES = [
    # (id, state the first job is in, the dependent's hold, the dependent's reason at submission)
    ("target-pending", jobs_pb2.PENDING, False, "Dependency"),
    ("target-running", jobs_pb2.RUNNING, False, "Dependency"),
    ("target-completed", jobs_pb2.COMPLETED, False, "None"),
    ("target-failed", jobs_pb2.FAILED, False, "DependencyNeverSatisfied"),
    ("held-keeps-its-reason", jobs_pb2.PENDING, True, "JobHeldUser"),
]


@pytest.mark.parametrize(("target_state", "hold", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_afterok_reason_shows_from_submission(
    controller: Controller, target_state: jobs_pb2.JobState, hold: bool, reason: str
) -> None:
    """As Slurm, `squeue` right after `sbatch --dependency` says why the job waits (no cycle needed)."""
    first = submit(controller)
    controller.jobs[first].state = target_state
    dependent = submit(controller, dependency=f"afterok:{first}", hold=hold)
    assert controller.jobs[dependent].state_reason == reason
