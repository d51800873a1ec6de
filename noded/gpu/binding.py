"""Which of a job's GPUs one task sees (--gpu-bind, --gpus-per-task), and how CUDA names them.

Pure functions over plain values (standard library only) so srun's task launcher (issue 3) and
the batch step call the same code:

    gpus = task_gpus(job_gpus=[2, 3, 6, 7], local_task=1, tasks_on_node=4, gpus_per_task=1)
    env["CUDA_VISIBLE_DEVICES"] = visible_devices(job_gpus, gpus, devices_constrained=True)

Binding forms: "" / "none" (every GPU of the job on the node); "closest" (the GPUs whose affine
CPUs overlap the task's CPUs, all when none do); "single:N" (each GPU shared by N consecutive
tasks); "map_gpu:a,b,..." (task i gets GPU number list[i % len]; numbers count the job's GPUs on
the node from 0); "per_task:N" (task i gets the i-th block of N). --gpus-per-task=N without
--gpu-bind acts as per_task:N, as in Slurm.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from shoal.gpubind import GpuBindError, parse_gpu_bind

__all__ = ["GpuBindError", "parse_gpu_bind", "task_gpus", "visible_devices"]


def task_gpus(
    job_gpus: Sequence[int],
    local_task: int,
    tasks_on_node: int,
    gpus_per_task: int = 0,
    bind: str = "",
    task_cpus: Sequence[int] = (),
    gpu_cpus: Mapping[int, Sequence[int]] | None = None,
) -> list[int]:
    """The GPU indices (minor numbers) task `local_task` of `tasks_on_node` sees on this node."""
    gpus = sorted(job_gpus)
    if not gpus:
        return []
    kind, numbers = parse_gpu_bind(bind)
    if kind == "none" and gpus_per_task > 0:
        kind, numbers = "per_task", [gpus_per_task]
    if kind == "per_task":
        size = numbers[0]
        block = gpus[local_task * size : (local_task + 1) * size]
        return block or gpus
    if kind == "single":
        return [gpus[min(local_task // numbers[0], len(gpus) - 1)]]
    if kind == "map_gpu":
        position = numbers[local_task % len(numbers)]
        return [gpus[position]] if position < len(gpus) else gpus
    if kind == "closest" and task_cpus and gpu_cpus:
        near = [g for g in gpus if set(gpu_cpus.get(g, ())) & set(task_cpus)]
        return near or gpus
    return gpus


def visible_devices(job_gpus: Sequence[int], seen: Sequence[int], devices_constrained: bool) -> str:
    """CUDA_VISIBLE_DEVICES for a task seeing `seen`: positions among the job's GPUs when the device
    cgroup hides the others (CUDA then numbers the visible ones from 0), else the minor numbers."""
    gpus = sorted(job_gpus)
    if devices_constrained:
        return ",".join(str(gpus.index(g)) for g in sorted(seen) if g in gpus)
    return ",".join(str(g) for g in sorted(seen))
