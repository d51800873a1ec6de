"""How a step that srun reports ended is recorded, as measured on the real 22.05 (2026-12-01):
a task that exits 143 itself is FAILED 143:0 (sacct shows 15:0), a task killed by a signal makes
the step CANCELLED 0:sig (TERM, KILL, INT, USR1; also beside a task that exited 143)."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.v1 import controller_pb2, jobs_pb2
from tests.unit.ctld.harness import ROOT, Harness, cluster, job


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness.of(cluster().nodes(1, cpus=4), tmp_path)


@pytest.mark.parametrize(
    ("exit_code", "task_signal", "expected"),
    [
        (0, 0, (jobs_pb2.COMPLETED, 0, 0)),
        (143, 0, (jobs_pb2.FAILED, 143, 0)),
        (100, 0, (jobs_pb2.FAILED, 100, 0)),
        (143, 15, (jobs_pb2.CANCELLED, 0, 15)),
        (137, 9, (jobs_pb2.CANCELLED, 0, 9)),
        (130, 2, (jobs_pb2.CANCELLED, 0, 2)),
        (138, 10, (jobs_pb2.CANCELLED, 0, 10)),
    ],
    ids=["ok", "exit-143", "exit-100", "sigterm", "sigkill", "sigint", "sigusr1"],
)
def test_step_record(h: Harness, exit_code: int, task_signal: int, expected: tuple[int, int, int]) -> None:
    job_id = h.submit(job().time(30).tasks(1))
    h.schedule()
    h.effects()
    req = controller_pb2.CreateStepRequest(job_id=job_id, num_tasks=1)
    req.launch.argv.append("sh")
    h.ctl.create_step(req, ROOT)
    h.effects()
    h.ctl.complete_step(
        controller_pb2.CompleteStepRequest(
            job_id=job_id, step_id=0, exit_code=exit_code, task_signal=task_signal
        ),
        ROOT,
    )
    step = next(s for s in h.ctl.jobs[job_id].steps if s.step_id == 0)
    assert (step.state, step.exit_code, step.exit_signal) == expected
