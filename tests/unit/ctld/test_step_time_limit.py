"""A step's own time limit (`srun -t` inside an allocation), as measured on the real 22.05
(2026-12-01): the step's tasks are terminated once its run time reaches the limit, the step ends
TIMEOUT (sacct 0:15 for a task SIGTERM ended) when its srun reports the tasks gone, and the job runs
on. A step without -t has no limit of its own, though its job has one."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.timefmt import UNLIMITED
from shoal.v1 import controller_pb2, jobs_pb2
from tests.unit.ctld.harness import ROOT, Harness, SignalStep, cluster, job


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness.of(cluster().nodes(1, cpus=4), tmp_path)


def _running_job(h: Harness) -> int:
    job_id = h.submit(job().time(30).tasks(2))
    h.schedule()
    h.effects()
    return job_id


def _step(h: Harness, job_id: int, minutes: int = 0) -> jobs_pb2.JobStep:
    req = controller_pb2.CreateStepRequest(job_id=job_id, num_tasks=1, exact=True, time_limit_min=minutes)
    req.launch.argv.append("sleep")
    step = h.ctl.create_step(req, ROOT).step
    h.effects()
    return step


def _shown(h: Harness, job_id: int) -> dict[int, jobs_pb2.JobStep]:
    reply = h.ctl.get_steps(controller_pb2.GetStepsRequest(step_ids=[str(job_id)]))
    return {s.step_id: s for s in reply.steps}


def test_step_is_terminated_at_its_own_limit_and_the_job_goes_on(h: Harness) -> None:
    job_id = _running_job(h)
    limited, free = _step(h, job_id, minutes=1), _step(h, job_id)
    assert (limited.time_limit_min, free.time_limit_min) == (1, UNLIMITED)
    h.advance(59)
    h.tick()
    assert [e for e in h.effects() if isinstance(e, SignalStep)] == []
    h.advance(2)
    h.tick()
    h.tick()  # once: a step being ended is not signalled again
    node = limited.layout[0].node
    assert [e for e in h.effects() if isinstance(e, SignalStep)] == [SignalStep(node, job_id, 0, 0)]
    assert _shown(h, job_id)[0].state == jobs_pb2.RUNNING  # until srun reports its tasks gone (22.05)
    done = h.ctl.complete_step(
        controller_pb2.CompleteStepRequest(job_id=job_id, step_id=0, exit_code=143, task_signal=15), ROOT
    )
    assert done.timed_out_at == int(h.clock())
    step = next(s for s in h.ctl.jobs[job_id].steps if s.step_id == 0)
    assert (step.state, step.exit_code, step.exit_signal) == (jobs_pb2.TIMEOUT, 0, 15)
    assert h.state(job_id) == "RUNNING"
    assert _shown(h, job_id)[1].state == jobs_pb2.RUNNING  # the step without -t runs on


def test_a_step_that_ends_in_time_is_not_timed_out(h: Harness) -> None:
    job_id = _running_job(h)
    _step(h, job_id, minutes=1)
    h.advance(30)
    done = h.ctl.complete_step(controller_pb2.CompleteStepRequest(job_id=job_id, step_id=0), ROOT)
    assert done.timed_out_at == 0
    h.advance(60)
    h.tick()
    assert [e for e in h.effects() if isinstance(e, SignalStep)] == []
    assert h.ctl.jobs[job_id].steps[0].state == jobs_pb2.COMPLETED


def test_an_srun_told_to_retry_is_listed_as_waiting_until_it_gets_its_step(h: Harness) -> None:
    """22.05's scontrol show step lists a waiting srun as J.TDB, State=PENDING; squeue -s does not."""
    job_id = _running_job(h)
    h.ctl.create_step(controller_pb2.CreateStepRequest(job_id=job_id, num_tasks=2, exact=True), ROOT)
    req = controller_pb2.CreateStepRequest(job_id=job_id, num_tasks=1, exact=True, srun_host="login1")
    req.srun_pid, req.time_limit_min = 4242, 2
    assert h.ctl.create_step(req, ROOT).retry

    def listed(include_waiting: bool) -> list[tuple[int, int]]:
        ask = controller_pb2.GetStepsRequest(step_ids=[str(job_id)], include_waiting=include_waiting)
        return [(s.step_id, s.state) for s in h.ctl.get_steps(ask).steps]

    assert listed(True) == [(-4, jobs_pb2.RUNNING), (0, jobs_pb2.RUNNING), (-3, jobs_pb2.PENDING)]
    assert listed(False) == [(-4, jobs_pb2.RUNNING), (0, jobs_pb2.RUNNING)]
    h.advance(5)  # it stopped asking (Ctrl-C): no longer listed
    assert listed(True) == listed(False)
    assert h.ctl.create_step(req, ROOT).retry
    h.ctl.complete_step(controller_pb2.CompleteStepRequest(job_id=job_id, step_id=0), ROOT)
    assert not h.ctl.create_step(req, ROOT).retry
    assert listed(True) == [(-4, jobs_pb2.RUNNING), (1, jobs_pb2.RUNNING)]
