"""The batch script's environment, compared with what Slurm 22.05 sets for the same job shape."""

from __future__ import annotations

from pathlib import Path

import pytest

from noded.env import batch_environment, slurm_variables
from shoal.counts import compress_counts
from shoal.v1 import node_pb2
from tests.unit.noded.noded_builders import job, launch

REFERENCE = Path("/work/shared/reference/slurm-22.05")


def reference_batch_env(name: str) -> dict[str, str]:
    """The SLURM/CUDA/GPU variables a reference batch script printed (before its srun part)."""
    output = (REFERENCE / name).read_text().split(".out ---\n", 1)[1]
    lines = output.split("=== srun", 1)[0].splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


class Node:
    def __init__(self, name: str) -> None:
        self.name = name


def envjob_4() -> node_pb2.LaunchBatchRequest:
    """sbatch -N2 --ntasks-per-node=2 --gres=gpu:2 -J envjob (reference 20), DefMemPerCPU=1000."""
    info = (
        job(4)
        .name("envjob")
        .spec(ntasks_per_node=2, submit_dir="/tmp/realslurm-golden-work", gres="gpu:2")
        .set(num_tasks=4, min_memory_cpu_mb=1000)
        .node("node1", cpus=2, tasks=2, gpus=[0, 1])
        .node("node2", cpus=2, tasks=2, gpus=[0, 1])
        .obj()
    )
    return launch(info)


@pytest.mark.skipif(not REFERENCE.exists(), reason="reference samples not present")
def test_envjob_matches_reference_exactly() -> None:
    want = reference_batch_env("20_env_batch_N2_tpn2_gpu2.txt")
    want.pop("SLURM_TASK_PID")  # filled in by stepd
    got = slurm_variables(envjob_4(), "node1")
    assert got == want


def test_directives_job_sees_its_options() -> None:
    """Reference 31: --ntasks=3 --cpus-per-task=2 --mem-per-cpu=500M -p debug -A physics."""
    info = (
        job(9)
        .name("dirtest")
        .spec(num_tasks=3, cpus_per_task=2, mem_per_cpu_mb=500)
        .set(partition="debug", account="physics", num_tasks=3)
        .node("node1", cpus=6, tasks=3, gpus=[0])
        .obj()
    )
    env = slurm_variables(launch(info), "node1")
    line = (
        f"name={env['SLURM_JOB_NAME']} part={env['SLURM_JOB_PARTITION']} ntasks={env['SLURM_NTASKS']} "
        f"cpt={env['SLURM_CPUS_PER_TASK']} acct={env['SLURM_JOB_ACCOUNT']}"
    )
    assert line == "name=dirtest part=debug ntasks=3 cpt=2 acct=physics"
    assert env["SLURM_MEM_PER_CPU"] == "500"
    assert env["SLURM_JOB_CPUS_PER_NODE"] == "6"


@pytest.mark.parametrize(
    ("builder", "present", "absent"),
    [
        (
            job(1).node("n1", cpus=1),
            {"SLURM_TASKS_PER_NODE": "1", "SLURM_CPUS_ON_NODE": "1"},
            [
                "SLURM_NTASKS",
                "SLURM_NPROCS",
                "SLURM_CPUS_PER_TASK",
                "SLURM_NTASKS_PER_NODE",
                "CUDA_VISIBLE_DEVICES",
                "SLURM_ARRAY_JOB_ID",
                "SLURM_MEM_PER_CPU",
                "SLURM_MEM_PER_NODE",
            ],
        ),
        (
            job(2).spec(mem_per_node_mb=4000).node("n1", cpus=4).node("n2", cpus=4).node("n3", cpus=2),
            {
                "SLURM_MEM_PER_NODE": "4000",
                "SLURM_JOB_CPUS_PER_NODE": "4(x2),2",
                "SLURM_JOB_NODELIST": "n[1-3]",
                "SLURM_NNODES": "3",
                "SLURM_TASKS_PER_NODE": "4(x2),2",
            },
            ["SLURM_MEM_PER_CPU", "SLURM_NTASKS"],
        ),
        (
            job(57).spec(array="0-15%4").set(array_job_id=50, array_task_id=7).node("n1"),
            {
                "SLURM_ARRAY_JOB_ID": "50",
                "SLURM_ARRAY_TASK_ID": "7",
                "SLURM_ARRAY_TASK_COUNT": "16",
                "SLURM_ARRAY_TASK_MIN": "0",
                "SLURM_ARRAY_TASK_MAX": "15",
                "SLURM_ARRAY_TASK_STEP": "1",
                "SLURM_JOB_ID": "57",
            },
            [],
        ),
        (
            job(5).node("n1", cpus=2, gpus=[2, 3]),
            {
                "CUDA_VISIBLE_DEVICES": "2,3",
                "GPU_DEVICE_ORDINAL": "2,3",
                "SLURM_JOB_GPUS": "2,3",
                "SLURM_GPUS_ON_NODE": "2",
            },
            [],
        ),
        (
            job(6).spec(cpus_per_task=4).node("n1", cpus=8),
            {"SLURM_CPUS_PER_TASK": "4", "SLURM_TASKS_PER_NODE": "2"},
            ["SLURM_NTASKS"],
        ),
    ],
    ids=["minimal", "mem-per-node-uneven", "array-task", "gpus-not-from-zero", "cpus-per-task"],
)
def test_variables_by_job_shape(builder, present: dict[str, str], absent: list[str]) -> None:  # type: ignore[no-untyped-def]
    env = slurm_variables(launch(builder.obj()), "n1")
    assert {k: env.get(k) for k in present} == present
    assert [k for k in absent if k in env] == []


def test_local_gpu_index_when_devices_are_isolated() -> None:
    env = slurm_variables(launch(job(5).node("n1", gpus=[2, 3]).obj()), "n1", local_gpu_index=True)
    assert (env["CUDA_VISIBLE_DEVICES"], env["SLURM_JOB_GPUS"]) == ("0,1", "2,3")


def test_submitted_environment_is_kept_and_login_variables_fill_gaps() -> None:
    info = job(7).spec(environment={"FOO": "bar", "HOME": "/submitted/home", "SLURM_JOB_ID": "stale"})
    env = batch_environment(
        launch(info.node("n1").obj()), Node("n1"), {"HOME": "/home/alice", "SHELL": "/bin/bash", "OTHER": "x"}
    )
    assert env["FOO"] == "bar"
    assert env["HOME"] == "/submitted/home"
    assert env["SHELL"] == "/bin/bash"
    assert "OTHER" not in env
    assert env["SLURM_JOB_ID"] == "7"


@pytest.mark.parametrize(
    ("counts", "want"),
    [([2, 2], "2(x2)"), ([4], "4"), ([1, 2, 2, 2, 1], "1,2(x3),1"), ([], "")],
    ids=["pair", "single", "runs", "empty"],
)
def test_compress_counts(counts: list[int], want: str) -> None:
    assert compress_counts(counts) == want
