"""DefCpuPerGPU / DefMemPerGPU (slurm.conf, cluster-wide and per partition) for GPU jobs that give no
--cpus-per-gpu / --mem-per-gpu, and the one CPU estimate (tasks x -c, or CPUs per GPU x GPUs when
more) that placement, backfill, limits, priority and the simulator share."""

from __future__ import annotations

import dataclasses

import pytest

from ctld import jobs as jobrec
from ctld.record import JobRecord
from ctld.sched.model import Config, JobRequest, Node, Partition, Start
from ctld.sched.placement import Overlay, place
from ctld.sched.priority import job_tres
from ctld.sched.resources import job_cpus, mem_for
from shoal.conf.slurm import parse_slurm_conf
from shoal.v1 import jobs_pb2
from tests.unit.sched.builders import job, node, partition, snapshot

CONF = """ClusterName=c
SlurmctldHost=h
GresTypes=gpu
DefCpuPerGPU=4
DefMemPerGPU=10G
NodeName=n[1-2] CPUs=32 RealMemory=256000 Gres=gpu:h100:8
PartitionName=batch Nodes=n[1-2] Default=YES
PartitionName=small Nodes=n1 DefCpuPerGPU=2 DefMemPerGPU=2000
"""


@pytest.mark.parametrize(
    ("req", "cpus"),
    [
        (job(1).tasks(4).obj(), 4),
        (job(1).tasks(2).cpus_per_task(3).obj(), 6),
        (dataclasses.replace(job(1).gpus(2).obj(), cpus_per_gpu=8), 16),
        (dataclasses.replace(job(1).nodes(2).gpus_per_node(2).obj(), cpus_per_gpu=4), 16),
        (dataclasses.replace(job(1).tasks(3).gpus_per_task(1).obj(), cpus_per_gpu=2), 6),
        (dataclasses.replace(job(1).tasks(8).gpus(1).obj(), cpus_per_gpu=2), 8),
    ],
    ids=[
        "tasks",
        "cpus-per-task",
        "cpus-per-gpu-total",
        "cpus-per-gpu-per-node",
        "cpus-per-gpu-per-task",
        "tasks-outnumber",
    ],
)
def test_job_cpus_counts_cpus_per_gpu(req: JobRequest, cpus: int) -> None:
    assert job_cpus(req) == cpus
    assert job_tres(req, "cpu") == cpus  # priority's TRES and job size use the same count


def _spec_job(partition_name: str = "batch", **spec: object) -> JobRecord:
    info = JobRecord(job_id=7, partition=partition_name)
    info.spec.CopyFrom(jobs_pb2.JobSpec(**spec))  # type: ignore[arg-type]
    return info


@pytest.mark.parametrize(
    ("partition_name", "spec", "cpus_per_gpu"),
    [
        ("batch", {"gres": "gpu:2"}, 4),
        ("small", {"gres": "gpu:2"}, 2),
        ("batch", {"gres": "gpu:2", "cpus_per_gpu": 6}, 6),
        ("batch", {"gres": "gpu:2", "cpus_per_task": 3}, 0),
        ("batch", {}, 0),
    ],
    ids=["cluster-default", "partition-default", "own-cpus-per-gpu", "cpus-per-task-given", "no-gpus"],
)
def test_request_building_applies_def_cpu_per_gpu(
    partition_name: str, spec: dict[str, object], cpus_per_gpu: int
) -> None:
    cfg = parse_slurm_conf(CONF)
    req = jobrec.job_request(_spec_job(partition_name, **spec), {"n1": 1, "n2": 1}, cfg)
    assert req.cpus_per_gpu == cpus_per_gpu


def test_req_tres_of_a_gpu_job_counts_the_default_cpus() -> None:
    cfg = parse_slurm_conf(CONF)
    info = _spec_job(gres="gpu:2")
    jobrec.describe_request(info, jobrec.job_request(info, {"n1": 1, "n2": 1}, cfg), 20480)
    assert info.tres_req == "cpu=8,mem=20G,node=1,billing=8,gres/gpu=2"


N1 = Node(name="n1", cpus=32, real_memory_mb=256000)


@pytest.mark.parametrize(
    ("req", "part", "config", "mem"),
    [
        (job(1).gpus(2).obj(), Partition("p", ("n1",)), Config(def_mem_per_gpu_mb=10240), 20480),
        (
            job(1).gpus(2).obj(),
            Partition("p", ("n1",), def_mem_per_gpu_mb=2000),
            Config(def_mem_per_gpu_mb=10240),
            4000,
        ),
        (
            job(1).gpus(2).obj(),
            Partition("p", ("n1",), def_mem_per_cpu_mb=100),
            Config(def_mem_per_gpu_mb=10240),
            200,
        ),
        (
            job(1).tasks(2).obj(),
            Partition("p", ("n1",)),
            Config(def_mem_per_gpu_mb=10240, def_mem_per_cpu_mb=500),
            1000,
        ),
        (job(1).gpus(2).mem(3000).obj(), Partition("p", ("n1",)), Config(def_mem_per_gpu_mb=10240), 3000),
        (
            dataclasses.replace(job(1).gpus(2).obj(), mem_per_gpu_mb=1000),
            Partition("p", ("n1",)),
            Config(def_mem_per_gpu_mb=10240),
            2000,
        ),
    ],
    ids=[
        "cluster-def-mem-per-gpu",
        "partition-wins",
        "partition-def-mem-per-cpu-wins",
        "cpu-job-ignores-it",
        "own-mem",
        "own-mem-per-gpu",
    ],
)
def test_def_mem_per_gpu(req: JobRequest, part: Partition, config: Config, mem: int) -> None:
    assert mem_for(req, 2, N1, part, config, gpus=2 if req.gpus.total else 0) == mem


def test_gpu_job_placed_with_default_cpus_and_memory() -> None:
    cfg = parse_slurm_conf(CONF)
    req = jobrec.job_request(_spec_job(gres="gpu:2"), {"n1": 1}, cfg)
    n1 = node("n1").cpus(32).mem(256000).gpus(8, "h100").obj()
    snap = snapshot([n1], partitions=[partition("batch", ["n1"])], config=Config(def_mem_per_gpu_mb=10240))
    found = place(req, snap.partitions[0], snap, Overlay())
    assert isinstance(found, Start)
    (alloc,) = found.allocation
    assert (len(alloc.cpu_ids), alloc.mem_mb, len(alloc.gpu_indices)) == (8, 20480, 2)
