"""Which of a job's GPUs one task sees (--gpu-bind, --gpus-per-task), and how CUDA names them.

Pure functions over plain values (standard library only) so srun's task launcher (issue 3) and
the batch step call the same code:

    gpus = task_gpus(job_gpus=[2, 3, 6, 7], local_task=1, tasks_on_node=4, gpus_per_task=1)
    env["CUDA_VISIBLE_DEVICES"] = visible_devices(job_gpus, gpus, devices_constrained=True)

Binding forms: "" / "none" (every GPU of the job on the node); "closest" (the GPUs whose affine
CPUs overlap the task's CPUs, all when none do); "single:N" (each GPU shared by N consecutive
tasks); "map_gpu:a,b,..." (task i gets GPU list[i % len]; "a*n" repeats; as Slurm, the numbers
count the step's GPUs on the node from 0 when devices are constrained, else they are the GPUs'
own indices); "per_task:N" (task i gets the i-th block of N). --gpus-per-task=N without
--gpu-bind acts as per_task:N, as in Slurm.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from shoal.gpubind import GpuBindError, parse_gpu_bind

__all__ = ["GpuBindError", "parse_gpu_bind", "split_cpus", "task_gpus", "visible_devices"]


def task_gpus(
    job_gpus: Sequence[int],
    local_task: int,
    tasks_on_node: int,
    gpus_per_task: int = 0,
    bind: str = "",
    task_cpus: Sequence[int] = (),
    gpu_cpus: Mapping[int, Sequence[int]] | None = None,
    map_relative: bool = True,
) -> list[int]:
    """The GPU indices (minor numbers) task `local_task` of `tasks_on_node` sees on this node.

    `job_gpus` are the GPUs the step uses there; map_gpu numbers are positions among them when
    `map_relative` (devices constrained), else GPU indices (one the step lacks gives all of them)."""
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
        if not map_relative:
            return [position] if position in gpus else gpus
        return [gpus[position]] if position < len(gpus) else gpus
    if kind == "closest" and task_cpus and gpu_cpus:
        near = [g for g in gpus if set(gpu_cpus.get(g, ())) & set(task_cpus)]
        return near or gpus
    return gpus


def split_cpus(cpus: Sequence[int], tasks: int) -> list[list[int]]:
    """The step's CPUs on a node dealt to its tasks in consecutive blocks (what --gpu-bind=closest
    compares with each GPU's affine CPUs); a task beyond the CPUs shares the last block."""
    ordered = sorted(cpus)
    if tasks <= 0 or not ordered:
        return [[] for _ in range(max(0, tasks))]
    per = max(1, len(ordered) // tasks)
    blocks = [ordered[i * per : (i + 1) * per] for i in range(tasks)]
    return [block or ordered[-per:] for block in blocks]


def visible_devices(job_gpus: Sequence[int], seen: Sequence[int], devices_constrained: bool) -> str:
    """CUDA_VISIBLE_DEVICES for a task seeing `seen`: positions among the job's GPUs when the device
    cgroup hides the others (CUDA then numbers the visible ones from 0), else the minor numbers."""
    gpus = sorted(job_gpus)
    if devices_constrained:
        return ",".join(str(gpus.index(g)) for g in sorted(seen) if g in gpus)
    return ",".join(str(g) for g in sorted(seen))
