"""Job records: from a submitted JobSpec to the controller's JobRecord (ctld/record.py), and a record to the core's JobRequest.

Everything here is pure conversion and validation; the controller does the I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ctld.errors import INVALID_GRES, INVALID_NODE_NAME, NODE_COUNT_INVALID, SlurmError
from ctld.nodes import NodeRuntime
from ctld.record import JobRecord
from ctld.sched import dependency as sched_dependency
from ctld.sched.model import DependencySpec, GpuRequest, JobRequest
from ctld.sched.resources import MEM_WHOLE_NODE, job_cpus, job_gpus, node_count_range, total_tasks
from shoal import hostlist, nodecount
from shoal.conf.slurm import SlurmConfig
from shoal.sizefmt import format_size_mb
from shoal.v1 import jobs_pb2

NO_LIMIT = -1  # JobSpec.time_limit_min not given
UNLIMITED = -2
_GPU_COUNT = re.compile(r"^(?:(?P<type>[A-Za-z0-9_.\-]+):)?(?P<count>\d+)$")

UINT64_MAX = 2**64 - 1  # JobInfo.mem_mb's range


def parse_gpu_count(text: str) -> tuple[str, int]:
    """'--gpus h100:4' -> ('h100', 4); '4' -> ('', 4). Raises SlurmError with Slurm's gres message."""
    text = text.strip()
    if text.startswith("gpu:"):
        text = text[4:]
    m = _GPU_COUNT.match(text)
    if not m or int(m.group("count")) <= 0:
        raise SlurmError(INVALID_GRES)
    return m.group("type") or "", int(m.group("count"))


def parse_gres_gpus(text: str) -> tuple[str, int]:
    """'--gres gpu:h100:2' -> ('h100', 2); 'gpu' -> ('', 1). Only the gpu gres is schedulable for now."""
    gpu_type, count = "", 0
    for item in filter(None, (s.strip() for s in text.split(","))):
        parts = item.split(":")
        name = parts[0]
        if name != "gpu":
            raise SlurmError(INVALID_GRES)
        if len(parts) == 1:
            item_type, item_count = "", 1
        elif len(parts) == 2:
            if parts[1].isdigit():
                item_type, item_count = "", int(parts[1])
            else:
                item_type, item_count = parts[1], 1
        elif len(parts) == 3 and parts[2].isdigit():
            item_type, item_count = parts[1], int(parts[2])
        else:
            raise SlurmError(INVALID_GRES)
        if item_count <= 0 or (gpu_type and item_type and item_type != gpu_type):
            raise SlurmError(INVALID_GRES)
        gpu_type = gpu_type or item_type
        count += item_count
    return gpu_type, count


def gpu_request(spec: jobs_pb2.JobSpec) -> GpuRequest:
    gpu_type = ""
    per_node = total = per_task = per_socket = 0
    if spec.gres:
        gpu_type, per_node = parse_gres_gpus(spec.gres)
    if spec.gpus_per_node:
        t, per_node = parse_gpu_count(spec.gpus_per_node)
        gpu_type = gpu_type or t
    if spec.gpus:
        t, total = parse_gpu_count(spec.gpus)
        gpu_type = gpu_type or t
    if spec.gpus_per_task:
        t, per_task = parse_gpu_count(spec.gpus_per_task)
        gpu_type = gpu_type or t
    if spec.gpus_per_socket:
        t, per_socket = parse_gpu_count(spec.gpus_per_socket)
        gpu_type = gpu_type or t
    return GpuRequest(per_node=per_node, total=total, per_task=per_task, type=gpu_type, per_socket=per_socket)


def node_names(expr: str, known: Mapping[str, object]) -> frozenset[str]:
    """Expand -w/-x hostlists; a name the cluster does not have is refused as Slurm does."""
    try:
        names = hostlist.expand(expr)
    except hostlist.HostlistError as exc:
        raise SlurmError(INVALID_NODE_NAME) from exc
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SlurmError(INVALID_NODE_NAME)
    return frozenset(names)


def requested_shape(spec: jobs_pb2.JobSpec) -> tuple[int, int, int]:
    """(min_nodes, max_nodes, num_tasks) with Slurm's defaults: one task per node."""
    min_nodes = spec.min_nodes or 1
    max_nodes = spec.max_nodes or (spec.min_nodes if spec.min_nodes else 0)
    if max_nodes and max_nodes < min_nodes:
        raise SlurmError(NODE_COUNT_INVALID)
    if spec.num_tasks:
        tasks = spec.num_tasks
        if not spec.min_nodes and not spec.max_nodes:
            max_nodes = 0 if spec.ntasks_per_node else spec.num_tasks
    elif spec.ntasks_per_node:
        tasks = spec.ntasks_per_node * min_nodes
    else:
        tasks = min_nodes
    if spec.num_tasks and spec.min_nodes and spec.num_tasks < spec.min_nodes:
        # Slurm lowers the node count to the task count rather than failing.
        min_nodes = spec.num_tasks
    return min_nodes, max_nodes, tasks


def spread_nodes(spec: jobs_pb2.JobSpec, gpus: GpuRequest) -> int:
    """The most nodes a job with -N A-B starts on when they are free, as 22.05 does (measured on idle
    nodes: -N1-2 gets 2, -N1-4 -n3 gets 3, -N1-2 -n1 gets 1): B, no more than its -n tasks. 0 (as few
    nodes as fit, as for -n without -N) when it gives no range, or gives --gpus, whose GPUs 22.05
    packs onto the fewest nodes (-N1-4 --gpus=3 gets 1)."""
    if spec.max_nodes <= max(1, spec.min_nodes) or gpus.total:
        return 0
    return min(spec.max_nodes, spec.num_tasks) if spec.num_tasks else spec.max_nodes


def default_cpus_per_gpu(spec: jobs_pb2.JobSpec, partition: str, cfg: SlurmConfig | None) -> int:
    """DefCpuPerGPU (the job's first partition's, else the cluster's) for a GPU job that gives neither
    --cpus-per-task nor --cpus-per-gpu; else 0."""
    if cfg is None or spec.cpus_per_task or spec.cpus_per_gpu:
        return 0
    if not (spec.gres or spec.gpus or spec.gpus_per_node or spec.gpus_per_task or spec.gpus_per_socket):
        return 0
    first = partition.split(",")[0]
    part = next((p for p in cfg.partitions if p.name == first), None)
    return (part.def_cpu_per_gpu if part is not None else 0) or cfg.def_cpu_per_gpu


def job_request(
    job: JobRecord, known_nodes: Mapping[str, object], cfg: SlurmConfig | None = None
) -> JobRequest:
    """The scheduler core's view of a pending job (with slurm.conf's DefCpuPerGPU when `cfg` is given)."""
    spec = job.spec
    min_nodes, max_nodes, tasks = requested_shape(spec)
    gpus = gpu_request(spec)
    deps = sched_dependency.parse_dependency(spec.dependency) if spec.dependency else DependencySpec()
    features = (
        frozenset(f for f in re.split(r"[&,]", spec.constraint) if f) if spec.constraint else frozenset()
    )
    return JobRequest(
        job_id=job.job_id,
        user_id=job.user_id,
        name=spec.name,
        submit_time=job.submit_time,
        partitions=tuple(p for p in job.partition.split(",") if p),
        admin_priority=job.priority if job.priority_set else None,
        qos=job.qos,
        account=job.account,
        nice=spec.nice,
        site_factor=job.site_factor,
        min_nodes=min_nodes,
        max_nodes=max_nodes,
        spread_nodes=spread_nodes(spec, gpus),
        # --ntasks-per-node without -n: that many on each node it gets (resources.total_tasks), however many
        num_tasks=1 if spec.ntasks_per_node and not spec.num_tasks else tasks,
        ntasks_per_node=spec.ntasks_per_node,
        cpus_per_task=spec.cpus_per_task or 1,
        mem_per_node_mb=MEM_WHOLE_NODE if spec.mem_whole_node else spec.mem_per_node_mb,
        mem_per_cpu_mb=spec.mem_per_cpu_mb,
        gpus=gpus,
        cpus_per_gpu=spec.cpus_per_gpu or default_cpus_per_gpu(spec, job.partition, cfg),
        mem_per_gpu_mb=spec.mem_per_gpu_mb,
        time_limit_min=spec.time_limit_min,
        required_nodes=node_names(spec.nodelist, known_nodes) if spec.nodelist else frozenset(),
        excluded_nodes=node_names(spec.exclude, known_nodes) if spec.exclude else frozenset(),
        features=features,
        exclusive=spec.exclusive,
        begin_time=spec.begin_time,
        held_user=job.held and not job.held_by_admin,
        held_admin=job.held and job.held_by_admin,
        dependency=deps,
        array_job_id=job.array_job_id,
        array_task_id=job.array_task_id,
        array_max_running=job.array_max_tasks,
        reservation=spec.reservation,
        max_switches=spec.switches,
        switch_wait_s=spec.switch_wait_s if spec.switches else -1,
    )


def tres_string(cpus: int, mem_mb: int, nodes: int, gpus: int) -> str:
    """Slurm's TRES list: 'cpu=6,mem=3000M,node=1,billing=6,gres/gpu=1'."""
    parts = [f"cpu={cpus}", f"mem={format_size_mb(mem_mb)}", f"node={nodes}", f"billing={cpus}"]
    if gpus:
        parts.append(f"gres/gpu={gpus}")
    return ",".join(parts)


def tres_per_node(req: JobRequest) -> str:
    g = req.gpus
    if g.per_node:
        return f"gres:gpu:{g.type + ':' if g.type else ''}{g.per_node}"
    return ""


def estimated_nodes(req: JobRequest, node_cpus: int = 0) -> int:
    """Slurm's node count of a pending job for its TRES (node=, mem): its minimum, or as many of the
    partition's largest nodes (`node_cpus` CPUs) as its CPUs need, one task never spanning two (-n 20 on
    16-CPU nodes is 2), or as many as --ntasks-per-node needs."""
    nodes = max(req.min_nodes, node_count_range(req)[0])  # -n4 --ntasks-per-node=2: 2
    if node_cpus > 0:
        nodes = max(nodes, min(max(1, req.num_tasks), -(-job_cpus(req) // node_cpus)))
    return nodes


def describe_request(
    job: JobRecord,
    req: JobRequest,
    mem_per_node_mb: int,
    node_cpus: int = 0,
    usable_nodes: int = 0,
) -> None:
    """Fill the requested-size fields squeue/scontrol show for a pending job: NumNodes as 22.05
    (shoal/nodecount.py); its TRES count the estimate."""
    gpus = job_gpus(req)
    cpus = job_cpus(req)
    nodes = estimated_nodes(req, node_cpus)
    job.num_nodes = nodecount.expected_nodes(job.spec, nodes, usable_nodes, job.held)
    job.min_nodes_req = req.min_nodes
    job.max_nodes_req = req.max_nodes
    job.num_cpus = cpus
    job.num_tasks = total_tasks(req, req.min_nodes)
    job.num_gpus = gpus
    job.mem_mb = min(mem_per_node_mb * nodes, UINT64_MAX)  # absurd -N x --mem: refused later, shown capped
    job.min_cpus_node = req.cpus_per_task * (req.ntasks_per_node or 1)
    job.min_memory_cpu_mb = req.mem_per_cpu_mb
    job.min_memory_node_mb = max(0, req.mem_per_node_mb)  # --mem=0 (the whole node) shows 0, as Slurm
    job.tres_req = tres_string(cpus, job.mem_mb, nodes, gpus)
    job.tres_per_node = tres_per_node(req)
    # ReqNodeList/ExcNodeList, squeue %n/%x: -w and -x as asked
    job.req_nodes = hostlist.expand(hostlist.collect(req.required_nodes)) if req.required_nodes else []
    job.exc_nodes = hostlist.expand(hostlist.collect(req.excluded_nodes)) if req.excluded_nodes else []


def clear_allocation(job: JobRecord) -> None:
    job.allocation = []
    job.nodes = ""
    job.batch_host = ""
    job.start_time = 0
    job.end_time = 0
    job.tres_alloc = ""


def referenced_job_ids(spec: jobs_pb2.JobSpec) -> set[int]:
    if not spec.dependency:
        return set()
    return set(sched_dependency.referenced_ids(sched_dependency.parse_dependency(spec.dependency)))


def largest_node_cpus(cfg: SlurmConfig, nodes: Mapping[str, NodeRuntime], partition: str) -> int:
    """CPUs of the partition's largest node as configured (for a pending job's NumNodes)."""
    part = cfg.partition(partition)
    names = part.nodes if part is not None else ()
    return max((nodes[n].conf.cpus for n in names if n in nodes), default=0)


def usable_node_count(cfg: SlurmConfig, nodes: Mapping[str, NodeRuntime], partition: str) -> int:
    """How many of the partition's nodes may take work now (for a pending -N min-max job's NumNodes)."""
    part = cfg.partition(partition)
    names = part.nodes if part is not None else ()
    return sum(1 for n in names if n in nodes and nodes[n].available)
