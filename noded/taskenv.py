"""The environment of each task of a job step, as Slurm 22.05's srun sets it, plus torch's variables.

Base: srun's environment (after --export) with login variables filled in, then the job's
SLURM_* variables (noded.env), then the step's: SLURM_STEP_*, SLURM_PROCID (global task id),
SLURM_LOCALID (index on this node), SLURM_NODEID (index of this node in the step), SLURM_GTIDS
(the task ids on this node), SLURM_NNODES/NTASKS/TASKS_PER_NODE of the step (SLURM_NODELIST stays the job's), srun's
address (see reference/slurm-22.05/21_*, 20_*).

Beyond Slurm, for torch.distributed's env:// initialisation (only where the user has not set
them): MASTER_ADDR (the step's first node's address), MASTER_PORT (from the job id), WORLD_SIZE,
RANK, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from noded.env import LOGIN_VARIABLES, slurm_variables
from noded.gpu.binding import split_cpus, task_gpus, visible_devices
from shoal.v1 import node_pb2

MASTER_PORT_BASE = 12000
MASTER_PORT_SPAN = 20000  # 12000-31999: below Linux's ephemeral range


def master_port(job_id: int) -> int:
    return MASTER_PORT_BASE + job_id % MASTER_PORT_SPAN


GPU_VARIABLES = ("CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "SLURM_GPUS_ON_NODE", "SLURM_STEP_GPUS")
# Variables of the job's own environment (batch script, salloc) that tasks only have by inheriting
# them through srun's environment: an srun that made its own allocation has none of them (22.05).
# SLURM_JOB_GPUS too: a step's tasks on every node see the batch host's value (22.05).
INHERITED_ONLY = (
    "SLURM_MEM_PER_CPU",
    "SLURM_MEM_PER_NODE",
    "SLURM_NODE_ALIASES",
    "SLURM_GPUS",
    "SLURM_GPUS_PER_NODE",
    "SLURM_GPUS_PER_TASK",
    "SLURM_JOB_GPUS",
    "SLURM_NTASKS_PER_NODE",
)


def step_gpu_env(
    req: node_pb2.LaunchTasksRequest,
    node: str,
    devices_constrained: bool,
    gpu_cpus: Mapping[int, Sequence[int]] | None = None,
) -> tuple[dict[str, str], dict[int, dict[str, str]]]:
    """(variables common to the node's tasks, per-task variables) for the step's GPUs on `node`.

    The step uses the GPUs it took (--gres/--gpus*) or else all the job's there (none when the job
    asked for none: an --exclusive job's, 22.05 measured); each task sees
    the ones --gpu-bind / --gpus-per-task give it. CUDA numbers them among the job's GPUs when the
    devices cgroup hides the others (tasks are in the job's cgroup), else by minor number.
    --gpu-bind=closest compares each task's block of the step's CPUs with the GPUs' affine CPUs
    (`gpu_cpus`); as in Slurm, --gpu-bind is ignored for a step of one task."""
    step = req.step
    index = next(i for i, n in enumerate(step.layout) if n.node == node)
    alloc = next((a for a in req.job.allocation if a.node == node), None)
    job_gpus = sorted(alloc.gpu_indices) if alloc is not None else []
    # a job that asked for no GPU holds a whole node's with --exclusive, but its steps see none (22.05)
    spec = req.job.spec
    asked = bool(spec.gpus or spec.gpus_per_node or spec.gpus_per_task or spec.gpus_per_socket) or (
        "gpu" in spec.gres
    )
    step_gpus = sorted(step.layout[index].gpu_indices) or (job_gpus if asked else [])
    if not step_gpus:
        return {}, {}
    here = list(step.layout[index].task_ids)
    common = {
        "SLURM_STEP_GPUS": ",".join(str(g) for g in step_gpus),
        "SLURM_GPUS_ON_NODE": str(len(step_gpus)),
    }
    per_task: dict[int, dict[str, str]] = {}
    bind = step.launch.gpu_bind if step.num_tasks > 1 else ""
    blocks = split_cpus(step.layout[index].cpu_ids or (alloc.cpu_ids if alloc is not None else ()), len(here))
    for local, gtid in enumerate(here):
        seen = task_gpus(
            step_gpus,
            local,
            len(here),
            step.launch.gpus_per_task,
            bind,
            task_cpus=blocks[local],
            gpu_cpus=gpu_cpus,
            map_relative=devices_constrained,
        )
        visible = visible_devices(job_gpus, seen, devices_constrained)
        per_task[gtid] = {"CUDA_VISIBLE_DEVICES": visible, "GPU_DEVICE_ORDINAL": visible}
        if step.launch.gpus_per_task and not bind:  # 22.05: each task's own GPUs (its per_task binding)
            per_task[gtid]["SLURM_STEP_GPUS"] = ",".join(str(g) for g in sorted(seen))
    return common, per_task


def task_environments(
    req: node_pb2.LaunchTasksRequest,
    node: str,
    base_env: Mapping[str, str],
    devices_constrained: bool = False,
    gpu_cpus: Mapping[int, Sequence[int]] | None = None,
) -> dict[int, dict[str, str]]:
    """Environment of every task of `req.step` on `node`, by global task id."""
    step = req.step
    launch = step.launch
    index = next(i for i, n in enumerate(step.layout) if n.node == node)
    here = list(step.layout[index].task_ids)
    user_env = dict(launch.environment)
    common = dict(user_env)
    for name in LOGIN_VARIABLES:
        if name not in common and name in base_env:
            common[name] = base_env[name]
    batch_like = node_pb2.LaunchBatchRequest(
        node=node,
        job=req.job,
        cluster_name=req.cluster_name,
        ctld_addr=req.ctld_addr,
        slurm_conf=req.slurm_conf,
        topology_addr=req.topology_addr,
        topology_addr_pattern=req.topology_addr_pattern,
    )
    common.update(slurm_variables(batch_like, node))
    for name in INHERITED_ONLY:
        if name in user_env:
            common[name] = user_env[name]
        else:
            common.pop(name, None)
    step_id = str(step.step_id)
    common.update(
        SLURM_STEP_ID=step_id,
        SLURM_STEPID=step_id,
        SLURM_STEP_NODELIST=step.nodes,
        SLURM_STEP_NUM_NODES=str(step.num_nodes),
        SLURM_STEP_NUM_TASKS=str(step.num_tasks),
        SLURM_STEP_TASKS_PER_NODE=step.tasks_per_node,
        SLURM_NNODES=str(step.num_nodes),
        SLURM_NTASKS=str(step.num_tasks),
        SLURM_NPROCS=str(step.num_tasks),
        SLURM_TASKS_PER_NODE=step.tasks_per_node,
        SLURM_NODEID=str(index),
        SLURM_CPUS_ON_NODE=str(step.layout[index].cpus),  # the step's: all the job's here unless --exact
        SLURM_GTIDS=",".join(str(t) for t in here),
        SLURM_LAUNCH_NODE_IPADDR=launch.io_host,
        SLURM_SRUN_COMM_HOST=launch.io_host,
        SLURM_SRUN_COMM_PORT=str(launch.io_port),
        SLURM_STEP_LAUNCHER_PORT=str(launch.io_port),
        SLURM_UMASK=f"{launch.umask:04o}",
    )
    if step.cpus_per_task:  # srun's -c (else the job's, inherited)
        common["SLURM_CPUS_PER_TASK"] = str(step.cpus_per_task)
    if not launch.own_allocation:  # srun inside an allocation (batch job, salloc) says the job's CPUs again
        common["SLURM_JOB_CPUS_PER_NODE_PACK_GROUP_0"] = common["SLURM_JOB_CPUS_PER_NODE"]
    if launch.distribution_given or not launch.own_allocation:
        kind, _, plane = step.distribution.partition("=")
        common["SLURM_DISTRIBUTION"] = kind or "block"
        if plane:
            common["SLURM_DIST_PLANESIZE"] = plane
    if launch.label:
        common["SLURM_LABELIO"] = "1"
    gpu_common, gpu_per_task = step_gpu_env(req, node, devices_constrained, gpu_cpus)
    holds_gpus = any(a.gpu_indices for a in req.job.allocation if a.node == node)
    if gpu_common or holds_gpus:  # holding GPUs the step may not see: none of the job's GPU values
        for name in GPU_VARIABLES:
            common.pop(name, None)  # the batch script's values (inherited through --export) do not apply
        common.update(gpu_common)
    torch = {
        "MASTER_ADDR": step.layout[0].addr or step.layout[0].node,
        "MASTER_PORT": str(master_port(step.job_id)),
        "WORLD_SIZE": str(step.num_tasks),
        "LOCAL_WORLD_SIZE": str(len(here)),
        "NODE_RANK": str(index),
    }
    out: dict[int, dict[str, str]] = {}
    for local, gtid in enumerate(here):
        env = dict(common)
        env.update(SLURM_PROCID=str(gtid), SLURM_LOCALID=str(local))
        env.update(gpu_per_task.get(gtid, {}))
        for key, value in {**torch, "RANK": str(gtid), "LOCAL_RANK": str(local)}.items():
            if key not in user_env:
                env[key] = value
        out[gtid] = env
    return out
