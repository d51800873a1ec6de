"""The environment of a batch script: the submitted environment plus the variables Slurm sets.

The set of SLURM_* variables and their formats follow Slurm 22.05's batch step (see
reference/slurm-22.05/20_env_batch_*): only what Slurm sets, only when it sets it.
SLURM_TASK_PID is added by stepd, which alone knows the script's pid.

Login variables: the submitted environment is kept as is (sbatch already applied --export).
Where it lacks HOME, USER, LOGNAME, SHELL or PATH (--export=NONE), the values from `base_env`
(noded fills it from the user's passwd entry) are used, so that scripts still find a home and
a shell.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from shoal.arrayspec import parse_array
from shoal.counts import compress_counts
from shoal.hookenv import job_environment
from shoal.v1 import jobs_pb2, node_pb2

# Kept from base_env only where the submitted environment lacks them.
LOGIN_VARIABLES = ("HOME", "USER", "LOGNAME", "SHELL", "PATH")

# Fields 4 and 5 of SLURM_WORKING_CLUSTER: Slurm's RPC protocol version and select plugin id.
# Tools (srun inside the job) only pass them back; shoal keeps Slurm 22.05's values.
_PROTOCOL_VERSION = 9728
_SELECT_PLUGIN_ID = 109


class NodeName(Protocol):
    """The part of shoal.conf's NodeConf that the environment needs."""

    @property
    def name(self) -> str: ...


def _tasks_per_node(job: jobs_pb2.JobInfo) -> list[int]:
    """Tasks on each allocated node: as allocated, else (or for an --exclusive job without -n and
    --ntasks-per-node) derived from the CPUs as Slurm does."""
    cpt = job.spec.cpus_per_task or 1
    spec = job.spec
    result: list[int] = []
    whole = spec.exclusive and not spec.num_tasks and not spec.ntasks_per_node
    for alloc in job.allocation:
        if whole:  # 22.05: `sbatch -N1 --exclusive` sees SLURM_TASKS_PER_NODE=16 on 16 CPUs
            result.append(max(1, alloc.cpus // cpt))
        elif alloc.tasks:
            result.append(alloc.tasks)
        elif spec.ntasks_per_node:
            result.append(spec.ntasks_per_node)
        else:
            result.append(max(1, alloc.cpus // cpt))
    return result


def _num_tasks(job: jobs_pb2.JobInfo) -> int:
    """SLURM_NTASKS: -n as given, or derived from --ntasks-per-node (0 = not set at all)."""
    spec = job.spec
    if spec.num_tasks:
        return job.num_tasks or spec.num_tasks
    if spec.ntasks_per_node:
        return job.num_tasks or spec.ntasks_per_node * max(1, len(job.allocation) or job.num_nodes)
    return 0


def _gpu_env(alloc: jobs_pb2.NodeAlloc | None, local_gpu_index: bool) -> dict[str, str]:
    """CUDA_VISIBLE_DEVICES & co for the GPUs this node gives the job (none: nothing set).

    Without device isolation (no cgroup ConstrainDevices) the job sees every GPU of the node,
    so the visible devices are the allocated indices themselves; with isolation they are 0..n-1.
    """
    if alloc is None or not alloc.gpu_indices:
        return {}
    indices = list(alloc.gpu_indices)
    visible = list(range(len(indices))) if local_gpu_index else indices
    visible_text = ",".join(str(i) for i in visible)
    return {
        "CUDA_VISIBLE_DEVICES": visible_text,
        "GPU_DEVICE_ORDINAL": visible_text,
        "SLURM_JOB_GPUS": ",".join(str(i) for i in indices),
        "SLURM_GPUS_ON_NODE": str(len(indices)),
    }


def gpu_request_variables(spec: jobs_pb2.JobSpec) -> dict[str, str]:
    """SLURM_GPUS / SLURM_GPUS_PER_NODE / SLURM_GPUS_PER_TASK: the job's --gpus* options as given
    (22.05 sets them for those options only, never for --gres)."""
    given = {
        "SLURM_GPUS": spec.gpus,
        "SLURM_GPUS_PER_NODE": spec.gpus_per_node,
        "SLURM_GPUS_PER_TASK": spec.gpus_per_task,
    }
    return {name: value for name, value in given.items() if value}


def _array_env(job: jobs_pb2.JobInfo) -> dict[str, str]:
    if job.array_job_id == 0 or job.array_task_id < 0:
        return {}
    env = {
        "SLURM_ARRAY_JOB_ID": str(job.array_job_id),
        "SLURM_ARRAY_TASK_ID": str(job.array_task_id),
    }
    try:
        shape = parse_array(job.spec.array, max_size=1 << 31)
    except ValueError:
        return env
    env.update(
        SLURM_ARRAY_TASK_COUNT=str(shape.count),
        SLURM_ARRAY_TASK_MAX=str(shape.max_id),
        SLURM_ARRAY_TASK_MIN=str(shape.min_id),
        SLURM_ARRAY_TASK_STEP=str(shape.step),
    )
    return env


def _working_cluster(cluster: str, ctld_addr: str) -> str:
    host, _, port = ctld_addr.rpartition(":")
    if not host:
        host, port = ctld_addr, "6817"
    return f"{cluster}:{host}:{port}:{_PROTOCOL_VERSION}:{_SELECT_PLUGIN_ID}"


def slurm_variables(
    req: node_pb2.LaunchBatchRequest, node: str, local_gpu_index: bool = False
) -> dict[str, str]:
    """Only the SLURM_* (and GPU) variables of the batch step on `node`."""
    job = req.job
    spec = job.spec
    alloc = next((a for a in job.allocation if a.node == node), None)
    num_nodes = len(job.allocation) or job.num_nodes or 1
    cpus_per_node = [a.cpus for a in job.allocation]
    env: dict[str, str] = {
        "SLURM_JOB_ID": str(job.job_id),
        "SLURM_JOBID": str(job.job_id),
        "SLURM_JOB_NAME": spec.name,
        "SLURM_JOB_NODELIST": job.nodes,
        "SLURM_NODELIST": job.nodes,
        "SLURM_JOB_NUM_NODES": str(num_nodes),
        "SLURM_NNODES": str(num_nodes),
        "SLURM_JOB_CPUS_PER_NODE": compress_counts(cpus_per_node),
        "SLURM_TASKS_PER_NODE": compress_counts(_tasks_per_node(job)),
        "SLURM_CPUS_ON_NODE": str(alloc.cpus if alloc else job.num_cpus),
        "SLURM_JOB_PARTITION": job.partition,
        "SLURM_JOB_ACCOUNT": job.account,
        "SLURM_JOB_QOS": job.qos,
        "SLURM_JOB_UID": str(job.user_id),
        "SLURM_JOB_GID": str(job.group_id),
        "SLURM_JOB_USER": job.user_name,
        "SLURM_SUBMIT_DIR": spec.submit_dir or spec.work_dir,
        "SLURM_SUBMIT_HOST": spec.submit_host,
        "SLURM_CLUSTER_NAME": req.cluster_name,
        "SLURM_CONF": req.slurm_conf,
        "SLURMD_NODENAME": node,
        "SLURM_NODEID": "0",
        "SLURM_PROCID": "0",
        "SLURM_LOCALID": "0",
        "SLURM_GTIDS": "0",
        # the submitting process's nice value, which sbatch passes in the environment
        "SLURM_PRIO_PROCESS": spec.environment.get("SLURM_PRIO_PROCESS", "0"),
        "SLURM_NODE_ALIASES": "(null)",
        "SLURM_TOPOLOGY_ADDR": req.topology_addr or node,
        "SLURM_TOPOLOGY_ADDR_PATTERN": req.topology_addr_pattern or "node",
        "SLURM_WORKING_CLUSTER": _working_cluster(req.cluster_name, req.ctld_addr),
    }
    ntasks = _num_tasks(job)
    if ntasks:
        env["SLURM_NTASKS"] = env["SLURM_NPROCS"] = str(ntasks)
    if spec.ntasks_per_node:
        env["SLURM_NTASKS_PER_NODE"] = str(spec.ntasks_per_node)
    if spec.cpus_per_task:
        env["SLURM_CPUS_PER_TASK"] = str(spec.cpus_per_task)
    if spec.hint:  # 22.05: --hint=multithread also says 65535 tasks a core may take
        env["SLURM_HINT"] = spec.hint
        if spec.hint == "multithread":
            env["SLURM_NTASKS_PER_CORE"] = "65535"
    if spec.threads_per_core:
        env["SLURM_THREADS_PER_CORE"] = str(spec.threads_per_core)
    env.update(gpu_request_variables(spec))
    mem_per_cpu = job.min_memory_cpu_mb or spec.mem_per_cpu_mb
    mem_per_node = job.min_memory_node_mb or spec.mem_per_node_mb
    if mem_per_cpu:
        env["SLURM_MEM_PER_CPU"] = str(mem_per_cpu)
    elif mem_per_node:
        env["SLURM_MEM_PER_NODE"] = str(mem_per_node)
    if job.restarts:
        env["SLURM_RESTART_COUNT"] = str(job.restarts)
    if spec.reservation:
        env["SLURM_JOB_RESERVATION"] = spec.reservation
    env.update(_array_env(job))
    env.update(_gpu_env(alloc, local_gpu_index))
    return env


def batch_environment(
    req: node_pb2.LaunchBatchRequest,
    node_conf: NodeName,
    base_env: Mapping[str, str],
    local_gpu_index: bool = False,
) -> dict[str, str]:
    """The full environment the batch script of `req.job` starts with on `node_conf`."""
    env = dict(req.job.spec.environment)
    for name in LOGIN_VARIABLES:
        if name not in env and name in base_env:
            env[name] = base_env[name]
    env.update(slurm_variables(req, node_conf.name, local_gpu_index))
    return env


def hook_environment(job: jobs_pb2.JobInfo, node: str, cluster_name: str, slurm_conf: str) -> dict[str, str]:
    """What a Prolog or Epilog on `node` is given (shoal.hookenv, plus the node, every SLURM_ARRAY_*
    and the job's GPUs here: the node's own indices, as the script runs outside the job's device
    cgroup). SLURM_SCRIPT_CONTEXT is added by the caller."""
    alloc = next((a for a in job.allocation if a.node == node), None)
    env = job_environment(job, cluster_name, slurm_conf)
    env["SLURMD_NODENAME"] = node
    env.update(_array_env(job))
    gpus = _gpu_env(alloc, local_gpu_index=False)
    gpus.pop("SLURM_GPUS_ON_NODE", None)
    env.update(gpus)
    return env
