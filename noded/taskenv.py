"""The environment of each task of a job step, as Slurm 22.05's srun sets it, plus torch's variables.

Base: srun's environment (after --export) with login variables filled in, then the job's
SLURM_* variables (noded.env), then the step's: SLURM_STEP_*, SLURM_PROCID (global task id),
SLURM_LOCALID (index on this node), SLURM_NODEID (index of this node in the step), SLURM_GTIDS
(the task ids on this node), SLURM_NNODES/NTASKS/NODELIST/TASKS_PER_NODE of the step, srun's
address (see reference/slurm-22.05/21_*, 20_*).

Beyond Slurm, for torch.distributed's env:// initialisation (only where the user has not set
them): MASTER_ADDR (the step's first node's address), MASTER_PORT (from the job id), WORLD_SIZE,
RANK, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK.
"""

from __future__ import annotations

from collections.abc import Mapping

from noded.env import LOGIN_VARIABLES, slurm_variables
from shoal.v1 import node_pb2

MASTER_PORT_BASE = 12000
MASTER_PORT_SPAN = 20000  # 12000-31999: below Linux's ephemeral range


def master_port(job_id: int) -> int:
    return MASTER_PORT_BASE + job_id % MASTER_PORT_SPAN


def task_environments(
    req: node_pb2.LaunchTasksRequest, node: str, base_env: Mapping[str, str]
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
    )
    common.update(slurm_variables(batch_like, node))
    step_id = str(step.step_id)
    common.update(
        SLURM_STEP_ID=step_id,
        SLURM_STEPID=step_id,
        SLURM_STEP_NODELIST=step.nodes,
        SLURM_STEP_NUM_NODES=str(step.num_nodes),
        SLURM_STEP_NUM_TASKS=str(step.num_tasks),
        SLURM_STEP_TASKS_PER_NODE=step.tasks_per_node,
        SLURM_NODELIST=step.nodes,
        SLURM_NNODES=str(step.num_nodes),
        SLURM_NTASKS=str(step.num_tasks),
        SLURM_NPROCS=str(step.num_tasks),
        SLURM_TASKS_PER_NODE=step.tasks_per_node,
        SLURM_NODEID=str(index),
        SLURM_GTIDS=",".join(str(t) for t in here),
        SLURM_LAUNCH_NODE_IPADDR=launch.io_host,
        SLURM_SRUN_COMM_HOST=launch.io_host,
        SLURM_SRUN_COMM_PORT=str(launch.io_port),
        SLURM_STEP_LAUNCHER_PORT=str(launch.io_port),
        SLURM_UMASK=f"{launch.umask:04o}",
    )
    if step.cpus_per_task > 1:
        common["SLURM_CPUS_PER_TASK"] = str(step.cpus_per_task)
    if launch.distribution_given or req.job.spec.ntasks_per_node:
        common["SLURM_DISTRIBUTION"] = step.distribution
    if launch.label:
        common["SLURM_LABELIO"] = "1"
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
        for key, value in {**torch, "RANK": str(gtid), "LOCAL_RANK": str(local)}.items():
            if key not in user_env:
                env[key] = value
        out[gtid] = env
    return out
