"""Steps inside an allocation follow Slurm 22.05: dedicated CPUs/GPUs by default (--exclusive says
so explicitly), --overlap opts out. Each case: one step already running, then a second one asks."""

from __future__ import annotations

import pytest

from ctld.sched.steps import AllocNode, StepRefused, StepRequest, layout_step
from ctld.steps import _busy, _busy_gpus
from shoal.v1 import jobs_pb2

ALLOC = [AllocNode("node1", 4, gpus=(0, 1))]  # the job: 4 CPUs and 2 GPUs on one node


def running(cpus: int, gpus: tuple[int, ...] = (), overlap: bool = False) -> jobs_pb2.JobInfo:
    job = jobs_pb2.JobInfo(job_id=1)
    step = job.steps.add(step_id=0, state=jobs_pb2.RUNNING, overlap=overlap)
    step.layout.add(node="node1", cpus=cpus, gpu_indices=gpus)
    return job


def second(job: jobs_pb2.JobInfo, req: StepRequest) -> str:
    try:
        layout_step(ALLOC, _busy(job), req, _busy_gpus(job))
    except StepRefused as refused:
        return "waits" if refused.retry else refused.message
    return "runs"


@pytest.mark.parametrize(
    ("first", "req", "outcome"),
    [
        (running(3), StepRequest(num_tasks=2), "waits"),
        (running(1), StepRequest(num_tasks=1), "waits"),
        (running(1), StepRequest(num_tasks=1, exact=True), "runs"),
        (running(3), StepRequest(num_tasks=2, exclusive=True), "waits"),
        (running(3), StepRequest(num_tasks=1, exclusive=True), "runs"),
        (running(3), StepRequest(num_tasks=2, overlap=True), "runs"),
        (running(4, overlap=True), StepRequest(num_tasks=4), "runs"),
        (running(4, overlap=True), StepRequest(num_tasks=4, exclusive=True), "runs"),
        (running(1, gpus=(0, 1)), StepRequest(num_tasks=1, gpus_per_node=1), "waits"),
        (running(1, gpus=(0, 1)), StepRequest(num_tasks=1, gpus_per_node=1, exclusive=True), "waits"),
        (running(1, gpus=(0, 1)), StepRequest(num_tasks=1, gpus_per_node=1, overlap=True), "runs"),
        (
            running(1),
            StepRequest(num_tasks=1, exclusive=True, overlap=True),
            "--exclusive and --overlap are mutually exclusive",
        ),
    ],
    ids=[
        "default-waits-for-held-cpus",
        "default-takes-all-the-job-cpus-so-waits-for-any-held",
        "exact-takes-a-free-cpu",
        "exclusive-waits-for-held-cpus",
        "exclusive-takes-the-free-cpu",
        "overlap-shares-held-cpus",
        "overlap-step-holds-nothing",
        "overlap-step-holds-nothing-for-exclusive",
        "default-waits-for-held-gpus",
        "exclusive-waits-for-held-gpus",
        "overlap-shares-held-gpus",
        "exclusive-with-overlap-refused",
    ],
)
def test_second_step(first: jobs_pb2.JobInfo, req: StepRequest, outcome: str) -> None:
    assert second(first, req) == outcome
