"""--cpus-per-gpu, --mem-per-gpu and --gpus-per-socket (issue 4): what a job is given on a node.

Each case goes the controller's way: a submitted JobSpec -> the core's JobRequest -> placement ->
the allocation recorded on the job, whose AllocTRES `scontrol show job` prints.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from ctld.decisions import apply_start
from ctld.jobs import describe_request, job_request
from ctld.record import JobRecord
from ctld.sched.model import Node, NodeUsage, Pend, Refusal, Start
from ctld.sched.placement import Overlay, could_ever_run, place
from shoal.v1 import jobs_pb2
from tests.unit.gpu.fixtures import described_node
from tests.unit.sched.builders import node, partition, snapshot

PLAIN = node("n1").cpus(16).mem(64000).gpus(4).obj()  # DefMemPerCPU=1000 (the builders' snapshot)


def submitted(**spec: object) -> JobRecord:
    return JobRecord(job_id=7, user_id=1000, partition="batch", spec=jobs_pb2.JobSpec(**spec))  # type: ignore[arg-type]


def started(target: Node, info: JobRecord) -> tuple[Start | str, JobRecord]:
    req = job_request(info, {target.name: target})
    snap = snapshot((target,), [req])
    found = place(req, partition("batch", [target.name]), snap, Overlay())
    if isinstance(found, Start):
        apply_start(info, found, 100, {})
    return found, info


PLAIN_CASES = [
    # (spec, AllocTRES on the one node)
    (dict(gpus_per_node="2", cpus_per_gpu=4), "cpu=8,mem=8000M,node=1,billing=8,gres/gpu=2"),
    (dict(gpus_per_node="2", cpus_per_gpu=1, cpus_per_task=6), "cpu=6,mem=6000M,node=1,billing=6,gres/gpu=2"),
    (dict(gpus_per_node="2", mem_per_gpu_mb=10000), "cpu=1,mem=20000M,node=1,billing=1,gres/gpu=2"),
    (
        dict(gpus_per_node="2", mem_per_gpu_mb=10000, cpus_per_gpu=3),
        "cpu=6,mem=20000M,node=1,billing=6,gres/gpu=2",
    ),
    (dict(num_tasks=2, gpus_per_task="1", cpus_per_gpu=2), "cpu=4,mem=4000M,node=1,billing=4,gres/gpu=2"),
    (dict(gpus="3", cpus_per_gpu=5), "cpu=15,mem=15000M,node=1,billing=15,gres/gpu=3"),
    (
        dict(gpus_per_node="2", mem_per_cpu_mb=500, cpus_per_gpu=2),
        "cpu=4,mem=2000M,node=1,billing=4,gres/gpu=2",
    ),
    (dict(gpus_per_node="1"), "cpu=1,mem=1000M,node=1,billing=1,gres/gpu=1"),
]


@pytest.mark.parametrize(
    ("spec", "tres"),
    PLAIN_CASES,
    ids=[
        "cpus-per-gpu-raises-cpus",
        "cpus-per-task-larger-wins",
        "mem-per-gpu-instead-of-defmempercpu",
        "mem-and-cpus-per-gpu",
        "gpus-per-task-times-cpus-per-gpu",
        "total-gpus-times-cpus-per-gpu",
        "mem-per-cpu-counts-the-raised-cpus",
        "neither-given-unchanged",
    ],
)
def test_per_gpu_cpus_and_memory_show_in_alloc_tres(spec: dict[str, object], tres: str) -> None:
    found, info = started(PLAIN, submitted(**spec))
    assert isinstance(found, Start)
    assert info.tres_alloc == tres
    a = info.allocation[0]
    assert len(a.cpu_ids) == a.cpus


def test_more_cpus_per_gpu_than_the_node_has_can_never_run() -> None:
    info = submitted(gpus_per_node="3", cpus_per_gpu=8)  # 24 CPUs on a 16-CPU node
    req = job_request(info, {PLAIN.name: PLAIN})
    assert could_ever_run(req, snapshot((PLAIN,), [req])) == Refusal(
        "Requested node configuration is not available"
    )


def test_cpus_per_gpu_waits_for_enough_free_cpus() -> None:
    busy = node("n1").cpus(16).mem(64000).gpus(4).used(cpus=range(10), mem=10000).obj()
    found, _ = started(busy, submitted(gpus_per_node="2", cpus_per_gpu=4))  # 8 CPUs, 6 free
    assert found == Pend("Resources", busy=True)


def per_socket(gpu_indices: object, target: Node) -> Counter[int]:
    numa = {g.index: g.numa_node for g in target.gpus}
    return Counter(numa[i] for i in gpu_indices)  # type: ignore[attr-defined]


DGX = described_node("d1", "dgx_h100")  # 112 CPUs on 2 sockets, GPUs 0-3 on NUMA 0, 4-7 on NUMA 1


@pytest.mark.parametrize(
    ("spec", "gpus_on_socket"),
    [
        (dict(gpus_per_socket="2"), {0: 2}),
        (dict(gpus_per_socket="2", cpus_per_task=60), {0: 2, 1: 2}),
        (dict(gpus_per_socket="1", num_tasks=2, cpus_per_task=56), {0: 1, 1: 1}),
        (dict(gpus_per_socket="3", cpus_per_task=100, cpus_per_gpu=2), {0: 3, 1: 3}),
    ],
    ids=["one-socket-used", "cpus-span-two-sockets", "two-tasks-fill-two-sockets", "with-cpus-per-gpu"],
)
def test_gpus_per_socket_takes_that_many_from_each_socket_used(
    spec: dict[str, object], gpus_on_socket: dict[int, int]
) -> None:
    found, info = started(DGX, submitted(**spec))
    assert isinstance(found, Start)
    assert dict(per_socket(info.allocation[0].gpu_indices, DGX)) == gpus_on_socket
    assert info.num_gpus == sum(gpus_on_socket.values())


def test_gpus_per_socket_waits_when_a_used_socket_lacks_free_gpus() -> None:
    busy = dataclasses.replace(DGX, usage=NodeUsage(gpu_indices=frozenset({0, 1, 2}), jobs=1))
    one, _ = started(busy, submitted(gpus_per_socket="1"))
    assert isinstance(one, Start)  # one socket: socket 0 still has GPU 3 (or socket 1 has four)
    two, _ = started(busy, submitted(gpus_per_socket="2", cpus_per_task=60))
    assert two == Pend("Resources", busy=True)  # both sockets needed, socket 0 has one free


def test_pending_job_request_counts_cpus_per_gpu() -> None:
    info = submitted(gpus_per_node="2", cpus_per_gpu=4, mem_per_gpu_mb=10000)
    req = job_request(info, {PLAIN.name: PLAIN})
    describe_request(info, req, 20000)
    assert info.tres_req == "cpu=8,mem=20000M,node=1,billing=8,gres/gpu=2"
