"""A job's shape per node: tasks, CPUs, memory and GPUs, independent of any particular node's load.

Conventions the controller follows when it builds a JobRequest:
- Without -N, a job with -n N > 1 may spread: min_nodes=1, max_nodes=num_tasks (no more nodes could
  ever be useful). With -N A[-B], min_nodes=A, max_nodes=B (0 = exactly A). With --ntasks-per-node
  and -n, the node count is at least ceil(n / ntasks-per-node).
- num_tasks below the node count is raised to one task per node.
- With -N A-B, spread_nodes is how many nodes it starts on when they are free (B, at most -n;
  ctld.jobs.spread_nodes): placement takes as many as can hold a task, down to A. Without it (no
  range, or --gpus) placement fills as few nodes as fit.
- --mem=0 (all of each node's memory) is passed as mem_per_node_mb == MEM_WHOLE_NODE.
"""

from __future__ import annotations

from ctld.sched import memo
from ctld.sched.model import Config, JobRequest, Node, Partition

MEM_WHOLE_NODE = -1


def node_count_range(job: JobRequest) -> tuple[int, int]:
    """(fewest, most) nodes the job may get; -w nodes raise the minimum to their count."""
    fewest = max(1, job.min_nodes, len(job.required_nodes))
    if job.ntasks_per_node > 0 and job.num_tasks > fewest * job.ntasks_per_node:
        fewest = -(-job.num_tasks // job.ntasks_per_node)  # -n 8 --ntasks-per-node=4: two nodes
    most = job.max_nodes if job.max_nodes > 0 else fewest
    return fewest, max(fewest, most)


def total_tasks(job: JobRequest, nodes: int) -> int:
    """Tasks to lay out over `nodes` nodes (at least one per node).

    --ntasks-per-node without -n means that many tasks on each node (num_tasks is then 1).
    """
    if job.ntasks_per_node > 0 and job.num_tasks <= 1:
        return nodes * job.ntasks_per_node
    return max(job.num_tasks, nodes, 1)


def even_spread(total: int, parts: int) -> list[int]:
    """Split `total` over `parts` as evenly as possible, the remainder on the first parts.

    Slurm's block layout for a fixed node count: -N2 -n3 gives 2+1, -N2 -n5 gives 3+2.
    """
    if parts <= 0:
        return []
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def cpus_for(job: JobRequest, tasks: int, gpus: int = 0) -> int:
    """CPUs a node needs for `tasks` tasks of this job holding `gpus` GPUs there.

    At least --cpus-per-task x tasks, and at least --cpus-per-gpu x GPUs when that is given.
    """
    return max(max(1, tasks) * max(1, job.cpus_per_task), job.cpus_per_gpu * gpus)


def mem_for(job: JobRequest, cpus: int, node: Node, part: Partition, config: Config, gpus: int = 0) -> int:
    """Memory (MB) the job takes on `node` when it uses `cpus` CPUs and `gpus` GPUs there.

    --mem, else --mem-per-cpu x CPUs, else --mem-per-gpu x GPUs (when it has GPUs there), else the
    partition's default (DefMemPerGPU x GPUs for a GPU job, DefMemPerCPU x CPUs), else the cluster's
    (the same two), else DefMemPerNode, else the whole node (Slurm with CR_*_Memory and no default
    does the same).
    """
    if job.mem_per_node_mb == MEM_WHOLE_NODE:
        return node.real_memory_mb
    if job.mem_per_node_mb > 0:
        return job.mem_per_node_mb
    if job.mem_per_cpu_mb > 0:
        return job.mem_per_cpu_mb * cpus
    if job.mem_per_gpu_mb > 0 and gpus > 0:
        return job.mem_per_gpu_mb * gpus
    for per_gpu, per_cpu in (
        (part.def_mem_per_gpu_mb, part.def_mem_per_cpu_mb),
        (config.def_mem_per_gpu_mb, config.def_mem_per_cpu_mb),
    ):
        if per_gpu > 0 and gpus > 0:
            return per_gpu * gpus
        if per_cpu > 0:
            return per_cpu * cpus
    if config.def_mem_per_node_mb > 0:
        return config.def_mem_per_node_mb
    return node.real_memory_mb


def gpus_for(job: JobRequest, tasks: int, share_of_total: int) -> int:
    """GPUs a node needs: --gpus-per-node, plus --gpus-per-task x its tasks, plus its share of -G."""
    return job.gpus.per_node + job.gpus.per_task * tasks + share_of_total


def sockets_for(node: Node, cpus: int) -> int:
    """Sockets `cpus` CPUs span on `node` at the least (what --gpus-per-socket multiplies)."""
    sockets = max(1, node.sockets)
    per_socket = max(1, node.cpus // sockets)
    return min(sockets, max(1, -(-cpus // per_socket)))


def job_gpus(job: JobRequest) -> int:
    """GPUs the job asks in all on its fewest nodes (--gpus, --gpus-per-node, --gpus-per-task,
    --gpus-per-socket counted as one socket per node)."""
    fewest, _ = node_count_range(job)
    return _gpus_on(job, fewest)


def _gpus_on(job: JobRequest, fewest: int) -> int:
    g = job.gpus
    return g.total + (g.per_node + g.per_socket) * fewest + g.per_task * total_tasks(job, fewest)


@memo.by_identity
def job_cpus(job: JobRequest) -> int:
    """The fewest CPUs the job needs in all: tasks x --cpus-per-task, or --cpus-per-gpu (or
    DefCpuPerGPU, already in the request) x its GPUs when that is more. The one estimate that
    placement, backfill, limits, priority and the simulator share."""
    fewest, _ = node_count_range(job)
    return cpus_for(job, total_tasks(job, fewest), _gpus_on(job, fewest))


def wants_gpus(job: JobRequest) -> bool:
    g = job.gpus
    return g.per_node > 0 or g.per_task > 0 or g.total > 0 or g.per_socket > 0


def is_exclusive(job: JobRequest, part: Partition) -> bool:
    """--exclusive, or a partition with OverSubscribe=EXCLUSIVE: the job takes whole nodes."""
    return job.exclusive or part.exclusive
