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


def _step(h: Harness, job_id: int) -> int:
    req = controller_pb2.CreateStepRequest(job_id=job_id, num_tasks=1)
    req.launch.argv.append("sh")
    step_id = h.ctl.create_step(req, ROOT).step.step_id
    h.effects()
    return step_id


def _derived(h: Harness, job_id: int) -> tuple[int, int]:
    info = h.ctl.jobs[job_id]
    return info.derived_exit_code, info.derived_exit_signal


def test_derived_exit_code_is_the_highest_steps_status_as_2205(h: Harness) -> None:
    """Scenario 246 (22.05): steps ending 1:0, 0:15 and 2:0 give the job DerivedExitCode 2:0 while the
    script exits 0; a step cancelled alone (scancel J.0) counts as 0:9."""
    job_id = h.submit(job().time(30).tasks(1))
    h.schedule()
    h.effects()
    for exit_code, task_signal in ((1, 0), (143, 15), (2, 0)):
        step_id = _step(h, job_id)
        h.ctl.complete_step(
            controller_pb2.CompleteStepRequest(
                job_id=job_id, step_id=step_id, exit_code=exit_code, task_signal=task_signal
            ),
            ROOT,
        )
    assert _derived(h, job_id) == (2, 0)
    h.finish(job_id, exit_code=0)
    assert (h.ctl.jobs[job_id].exit_code, _derived(h, job_id)) == (0, (2, 0))

    other = h.submit(job().time(30).tasks(1))
    h.schedule()
    h.effects()
    step_id = _step(h, other)
    h.ctl.signal_jobs(controller_pb2.SignalJobsRequest(job_ids=[f"{other}.{step_id}"]), ROOT)
    assert _derived(h, other) == (0, 9)


def test_steps_ended_with_their_job_leave_it_0_0(h: Harness) -> None:
    """22.05: a job cancelled while its step runs keeps DerivedExitCode 0:0 (its step shows 0:15)."""
    job_id = h.submit(job().time(30).tasks(1))
    h.schedule()
    h.effects()
    _step(h, job_id)
    h.cancel(job_id)
    assert _derived(h, job_id) == (0, 0)
