"""Steps and GPUs: which of the job's GPUs a step takes (pure layout), and what each task sees
(CUDA_VISIBLE_DEVICES, GPU_DEVICE_ORDINAL, SLURM_STEP_GPUS) under --gpu-bind / --gpus-per-task."""

from __future__ import annotations

import pytest

from ctld.sched.steps import AllocNode, StepRefused, StepRequest, layout_step
from noded.taskenv import task_environments
from shoal.v1 import jobs_pb2, node_pb2

GPU_NODES = [AllocNode("node1", 4, (2, 3, 6, 7)), AllocNode("node2", 4, (0, 1, 4, 5))]


@pytest.mark.parametrize(
    ("req", "busy", "gpus"),
    [
        (StepRequest(min_nodes=2, num_tasks=2), {}, ((), ())),
        (StepRequest(min_nodes=2, num_tasks=2, gpus_per_node=2), {}, ((2, 3), (0, 1))),
        (StepRequest(min_nodes=2, num_tasks=2, gpus_total=3), {}, ((2, 3), (0,))),
        (StepRequest(min_nodes=2, num_tasks=3, gpus_per_task=1), {}, ((2, 3), (0,))),
        (StepRequest(num_tasks=1, gpus_per_node=2), {"node1": frozenset({2, 6})}, ((3, 7),)),
        (StepRequest(num_tasks=1, gpus_per_node=4, overlap=True), {"node1": frozenset({2})}, ((2, 3, 6, 7),)),
    ],
    ids=["none-asked-sees-all", "per-node", "total-spread", "per-task", "skips-busy", "overlap-shares"],
)
def test_step_takes_gpus(
    req: StepRequest, busy: dict[str, frozenset[int]], gpus: tuple[tuple[int, ...], ...]
) -> None:
    assert layout_step(GPU_NODES, {}, req, busy).gpus == gpus


@pytest.mark.parametrize(
    ("req", "busy", "message", "retry"),
    [
        (
            StepRequest(num_tasks=1, gpus_per_node=5),
            {},
            "Invalid generic resource (gres) specification",
            False,
        ),
        (
            StepRequest(num_tasks=1, gpus_per_node=2),
            {"node1": frozenset({2, 3, 6})},
            "Requested nodes are busy",
            True,
        ),
    ],
    ids=["more-than-the-job-has", "held-by-another-step"],
)
def test_step_gpu_refusals(
    req: StepRequest, busy: dict[str, frozenset[int]], message: str, retry: bool
) -> None:
    with pytest.raises(StepRefused) as info:
        layout_step(GPU_NODES, {}, req, busy)
    assert (info.value.message, info.value.retry) == (message, retry)


def _request(
    job_gpus: list[int],
    step_gpus: list[int],
    tasks: list[int],
    bind: str = "",
    per_task: int = 0,
    user_env: dict[str, str] | None = None,
) -> node_pb2.LaunchTasksRequest:
    job = jobs_pb2.JobInfo(job_id=6, nodes="node1", num_nodes=1)
    job.spec.gres = f"gpu:{len(job_gpus)}"  # the job asked for the GPUs it holds
    job.allocation.add(node="node1", cpus=4, gpu_indices=job_gpus)
    step = jobs_pb2.JobStep(job_id=6, step_id=0, nodes="node1", num_nodes=1, num_tasks=len(tasks))
    step.layout.add(node="node1", addr="127.0.0.2", task_ids=tasks, cpus=len(tasks), gpu_indices=step_gpus)
    step.launch.argv.append("true")
    step.launch.gpu_bind = bind
    step.launch.gpus_per_task = per_task
    step.launch.environment.update(user_env or {})
    return node_pb2.LaunchTasksRequest(node="node1", job=job, step=step, cluster_name="c", ctld_addr="h:6817")


GPU_VARS = (
    "CUDA_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
    "SLURM_STEP_GPUS",
    "SLURM_GPUS_ON_NODE",
    "SLURM_JOB_GPUS",
)


@pytest.mark.parametrize(
    ("req", "constrained", "want"),
    [
        # reference 22_env_srun_N2_n4_gpu1: three tasks on node1 share its one GPU, no SLURM_JOB_GPUS
        (_request([0], [0], [0, 1, 2]), True, {t: ("0", "0", "0", "1", None) for t in (0, 1, 2)}),
        # --gpus-per-task: SLURM_STEP_GPUS is each task's own GPUs (tests/compat/layouts/batch_dgx.txt)
        (
            _request([2, 3], [], [0, 1], per_task=1),
            True,
            {0: ("0", "0", "2", "2", None), 1: ("1", "1", "3", "2", None)},
        ),
        (
            _request([2, 3], [], [0, 1], per_task=1),
            False,
            {0: ("2", "2", "2", "2", None), 1: ("3", "3", "3", "2", None)},
        ),
        (
            _request([2, 3, 6, 7], [6, 7], [0, 1], bind="single:1"),
            True,
            {0: ("2", "2", "6,7", "2", None), 1: ("3", "3", "6,7", "2", None)},
        ),
        (
            _request([2, 3, 6, 7], [], [0, 1], bind="map_gpu:3,0"),
            True,
            {0: ("3", "3", "2,3,6,7", "4", None), 1: ("0", "0", "2,3,6,7", "4", None)},
        ),
        (
            _request([2, 3, 6, 7], [], [0, 1], bind="map_gpu:7,2"),
            False,
            {0: ("7", "7", "2,3,6,7", "4", None), 1: ("2", "2", "2,3,6,7", "4", None)},
        ),
        (
            _request([2, 3, 6, 7], [6, 7], [0, 1], bind="map_gpu:1,0"),
            True,
            {0: ("3", "3", "6,7", "2", None), 1: ("2", "2", "6,7", "2", None)},
        ),
        (_request([2, 3], [], [0], bind="map_gpu:1"), True, {0: ("0,1", "0,1", "2,3", "2", None)}),
        (
            _request([2, 3, 6, 7], [], [0, 1], bind="per_task:2"),
            True,
            {0: ("0,1", "0,1", "2,3,6,7", "4", None), 1: ("2,3", "2,3", "2,3,6,7", "4", None)},
        ),
        (
            _request([2, 3], [], [0], user_env={"SLURM_JOB_GPUS": "2,3", "CUDA_VISIBLE_DEVICES": "0,1"}),
            True,
            {0: ("0,1", "0,1", "2,3", "2", "2,3")},
        ),
        (
            _request([], [], [0], user_env={"CUDA_VISIBLE_DEVICES": "mine"}),
            True,
            {0: ("mine", None, None, None, None)},
        ),
    ],
    ids=[
        "reference-gpu1",
        "per-task-constrained",
        "per-task-minor-numbers",
        "step-subset-single",
        "map-gpu-relative-when-constrained",
        "map-gpu-global-ids-otherwise",
        "map-gpu-counts-the-step-gpus",
        "one-task-ignores-gpu-bind",
        "per-task-2",
        "inside-batch-job",
        "no-gpus-untouched",
    ],
)
def test_task_gpu_environment(
    req: node_pb2.LaunchTasksRequest, constrained: bool, want: dict[int, tuple[str | None, ...]]
) -> None:
    envs = task_environments(req, "node1", {}, devices_constrained=constrained)
    assert {t: tuple(env.get(v) for v in GPU_VARS) for t, env in envs.items()} == want


def test_closest_uses_the_step_cpus_and_the_node_gpu_affinity() -> None:
    """Two tasks of a step on CPUs 0-1 and 56-57 of a DGX H100 (GPUs 0-3 near 0-55, 4-7 near 56-111)."""
    req = _request([0, 1, 4, 5], [], [0, 1], bind="closest")
    del req.step.layout[0].cpu_ids[:]
    req.step.layout[0].cpu_ids.extend([0, 1, 56, 57])
    affinity = {g: range(0, 56) if g < 4 else range(56, 112) for g in range(8)}
    envs = task_environments(req, "node1", {}, devices_constrained=True, gpu_cpus=affinity)
    assert [envs[t]["CUDA_VISIBLE_DEVICES"] for t in (0, 1)] == ["0,1", "2,3"]
