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


@pytest.mark.parametrize(
    ("target_state", "hold", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_afterok_reason_shows_from_submission(
    controller: Controller, target_state: jobs_pb2.JobState, hold: bool, reason: str
) -> None:
    """As Slurm, `squeue` right after `sbatch --dependency` says why the job waits (no cycle needed)."""
    first = submit(controller)
    controller.jobs[first].state = target_state
    dependent = submit(controller, dependency=f"afterok:{first}", hold=hold)
    assert controller.jobs[dependent].state_reason == reason


@pytest.mark.parametrize(
    ("later", "hold", "reason"),
    [(3600, False, "BeginTime"), (3600, True, "JobHeldUser"), (0, False, "None")],
    ids=["begin-later", "held-and-later", "begin-now"],
)
def test_begin_time_reason_shows_from_submission(
    controller: Controller, later: int, hold: bool, reason: str
) -> None:
    """22.05's squeue says BeginTime right after `sbatch --begin=now+1hour` (measured), not after a cycle."""
    job = submit(controller, begin_time=controller.state.now() + later, hold=hold)
    assert controller.jobs[job].state_reason == reason


@pytest.mark.parametrize(
    ("spec", "nodes"),
    [
        ({"num_tasks": 3}, 1),
        ({"num_tasks": 6}, 2),  # 6 CPUs on 4-CPU nodes
        ({"num_tasks": 2, "cpus_per_task": 3}, 2),  # a task never spans two nodes
        ({"cpus_per_task": 8}, 1),  # one task: one node, however big
        ({"min_nodes": 3}, 3),
    ],
    ids=["fits-one", "needs-two", "task-per-node", "one-big-task", "asked"],
)
def test_a_pending_jobs_node_count_is_slurms_estimate(
    controller: Controller, spec: dict[str, int], nodes: int
) -> None:
    """As squeue's NODES for a pending job in 22.05 (checked on the real one: -n 20 on 16-CPU nodes shows 2)."""
    job_id = submit(controller, **spec)
    assert controller.jobs[job_id].num_nodes == nodes


def test_show_config_has_max_array_size_when_the_file_sets_none(controller: Controller) -> None:
    """`scontrol show config | grep MaxArraySize` (workflow tools size their arrays by it); 22.05: 1001."""
    entries = {e.key: e.value for e in controller.get_config().entries}
    assert entries["MaxArraySize"] == "1001"
