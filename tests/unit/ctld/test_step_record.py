"""What a step's record carries for `scontrol show step`, as measured on the real 22.05 (2026-12-01):
its memory in TRES is what it holds on every node summed, the job's memory there when it asks none
(`sbatch -N2 --mem=3000` + `srun -N2`: mem=6000M; `srun --mem-per-cpu=100 -n4`: 400M); its TimeLimit
is its own (UNLIMITED), not the job's; SrunHost:Pid names the srun that made it."""

from __future__ import annotations

import pytest

from ctld.record import JobRecord
from ctld.sched import steps as layout
from ctld.steps import fill_step
from shoal.timefmt import UNLIMITED
from shoal.v1 import controller_pb2, jobs_pb2


def _step(asked: tuple[int, ...]) -> jobs_pb2.JobStep:
    job = JobRecord(job_id=7, user_id=1001, time_limit_min=30)
    job.allocation = [
        jobs_pb2.NodeAlloc(node="node1", cpus=2, mem_mb=3000),
        jobs_pb2.NodeAlloc(node="node2", cpus=2, mem_mb=3000),
    ]
    found = layout.StepLayout(
        nodes=("node1", "node2"),
        task_ids=((0,), (1,)),
        cpus=(2, 2),
        cpu_ids=((0, 1), (0, 1)),
        gpus=((), ()),
        mem_mb=asked,
        distribution="cyclic",
    )
    req = controller_pb2.CreateStepRequest(job_id=7, srun_host="login1", srun_pid=4242)
    req.launch.argv.append("sleep")
    step = jobs_pb2.JobStep()
    fill_step(step, job, req, found, 100, lambda name: name)
    return step


@pytest.mark.parametrize(
    ("asked", "mem"), [((0, 0), 6000), ((200, 200), 400)], ids=["asks-none-the-jobs", "asks-some"]
)
def test_step_memory_is_what_it_holds_on_all_its_nodes(asked: tuple[int, ...], mem: int) -> None:
    assert _step(asked).mem_mb == mem


def test_step_has_its_own_time_limit_and_names_its_srun() -> None:
    step = _step((0, 0))
    assert step.time_limit_min == UNLIMITED
    assert (step.srun_host, step.srun_pid) == ("login1", 4242)
