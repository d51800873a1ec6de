"""Job priority: priority/basic (first in, first out) or priority/multifactor, as Slurm computes them.

Multifactor: each factor is a number in 0..1 (the NO_NORMAL_* flags keep some raw), multiplied by
its PriorityWeight* and summed; the job's nice value is subtracted; the result is truncated to an
integer in 1..2^32-1 (0 is reserved for held jobs, which the controller sets itself):

    priority = Wage*age + Wassoc*assoc + Wfs*fairshare + Wjs*jobsize + Wpart*partition + Wqos*qos
               + sum(Wtres[t] * tres[t]) + site - nice

- age: time since the job became eligible (submit, or --begin if later) / PriorityMaxAge, at most 1;
- assoc, qos, partition: the association's / QOS's Priority and the partition's PriorityJobFactor,
  each divided by the largest such value in the cluster;
- fairshare: the association's fair-share factor (fairshare.py computes it; an input here);
- jobsize: the average of (nodes asked / cluster nodes) and (CPUs asked / cluster CPUs); with
  PriorityFavorSmall it is the average of the complements. SMALL_RELATIVE_TO_TIME instead takes the
  job's CPUs (at least its nodes' share of the cluster's CPUs) per minute of time limit over the
  cluster's CPUs;
- tres: each weighted TRES the job asks for over the cluster's total of it;
- site: the job's SiteFactor as an operator set it (weight 1, not normalized, may be negative).

An admin's Priority= wins over all of it. Running jobs keep the priority they started with unless
PriorityFlags=CALCULATE_RUNNING (running_priorities). Pure: the snapshot and `now` in, numbers out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ctld.sched.model import UNLIMITED, JobRequest, Partition, PriorityConfig, PriorityInputs, Snapshot
from ctld.sched.resources import job_cpus, job_gpus
from ctld.sched.siblings import same_ask

BASE_PRIORITY = 4_294_901_760  # priority/basic: older jobs (smaller ids) rank higher
MAX_PRIORITY = 0xFFFFFFFF
MULTIFACTOR = "priority/multifactor"
CALCULATE_RUNNING = "CALCULATE_RUNNING"
NO_NORMAL = ("NO_NORMAL_ASSOC", "NO_NORMAL_PART", "NO_NORMAL_QOS", "NO_NORMAL_TRES")


@dataclass(frozen=True, slots=True)
class Cluster:
    """The cluster-wide denominators and maxima, computed once per cycle."""

    nodes: int = 0
    cpus: int = 0
    tres_total: Mapping[str, int] | None = None  # "cpu", "mem" (MB), "node", "gres/gpu"
    max_part_factor: int = 1
    max_qos_priority: int = 0
    max_assoc_priority: int = 0
    inputs: PriorityInputs = PriorityInputs()


@dataclass(frozen=True, slots=True)
class Factors:
    """A job's factors before weighting (what `sprio -n` shows) and its nice value."""

    age: float = 0.0
    assoc: float = 0.0
    fairshare: float = 0.0
    job_size: float = 0.0
    partition: float = 0.0
    qos: float = 0.0
    tres: tuple[tuple[str, float], ...] = ()
    nice: int = 0
    site: int = 0


@dataclass(frozen=True, slots=True)
class Weighted:
    """A job's factors multiplied by their weights (what `sprio` shows) and the resulting priority."""

    age: float
    assoc: float
    fairshare: float
    job_size: float
    partition: float
    qos: float
    tres: tuple[tuple[str, float], ...]
    nice: int
    priority: int
    site: int = 0


def cluster_context(snap: Snapshot) -> Cluster:
    """The denominators multifactor divides by: the cluster's size and the largest priorities."""
    gpus = sum(len(node.gpus) for node in snap.nodes)
    mem = sum(node.real_memory_mb for node in snap.nodes)
    cpus = sum(node.cpus for node in snap.nodes)
    inputs = snap.priority_inputs or PriorityInputs()
    return Cluster(
        nodes=len(snap.nodes),
        cpus=cpus,
        tres_total={"cpu": cpus, "mem": mem, "node": len(snap.nodes), "gres/gpu": gpus},
        max_part_factor=max((part.priority_job_factor for part in snap.partitions), default=1),
        max_qos_priority=max(inputs.qos_priority.values(), default=0),
        max_assoc_priority=max(inputs.assoc_priority.values(), default=0),
        inputs=inputs,
    )


def all_priorities(snap: Snapshot, now: int) -> dict[int, int]:
    """Every pending job's priority, computed against its first known partition."""
    return priorities_of(snap, snap.pending, now)


def running_priorities(snap: Snapshot, running: Sequence[JobRequest], now: int) -> dict[int, int]:
    """PriorityFlags=CALCULATE_RUNNING under multifactor: the running jobs' priorities, recomputed as the
    pending ones are (each request names the partition the job runs in). Empty otherwise: as Slurm, a
    running job then keeps the priority it started with."""
    conf = snap.config.priority
    if conf.type != MULTIFACTOR or CALCULATE_RUNNING not in conf.flags:
        return {}
    return priorities_of(snap, running, now)


def priorities_of(snap: Snapshot, jobs: Iterable[JobRequest], now: int) -> dict[int, int]:
    """The priorities of `jobs` against the snapshot's cluster, each in its first known partition."""
    parts = {part.name: part for part in snap.partitions}
    ctx = cluster_context(snap) if snap.config.priority.type == MULTIFACTOR else None
    result: dict[int, int] = {}
    last: dict[int, JobRequest] = {}  # array -> its last task weighed: tasks asking alike weigh the same
    for job in jobs:
        if ctx is not None and (seen := last.get(job.array_job_id)) is not None and same_ask(seen, job):
            result[job.job_id] = result[seen.job_id]
            continue
        first = next((parts[name] for name in job.partitions if name in parts), None)
        if first is None:
            result[job.job_id] = job.admin_priority if job.admin_priority is not None else 0
        else:
            result[job.job_id] = job_priority(job, first, now, snap.config.priority, ctx)
        if job.array_job_id:
            last[job.array_job_id] = job
    return result


def job_priority(
    job: JobRequest,
    partition: Partition,
    now: int,
    conf: PriorityConfig | None = None,
    ctx: Cluster | None = None,
) -> int:
    """The admin's value when set; else multifactor when configured (and `ctx` given), else FIFO."""
    if job.admin_priority is not None:
        return job.admin_priority
    if conf is None or ctx is None or conf.type != MULTIFACTOR:
        return fifo_priority(job)
    return weigh(job_factors(job, partition, now, conf, ctx), conf).priority


def fifo_priority(job: JobRequest) -> int:
    """priority/basic: first in, first out (a smaller job id ranks higher), less the nice value."""
    return max(1, BASE_PRIORITY - job.job_id - job.nice)


def job_factors(
    job: JobRequest, partition: Partition, now: int, conf: PriorityConfig, ctx: Cluster
) -> Factors:
    """The unweighted factors of one job in one partition."""
    flags = conf.flags
    eligible = max(job.submit_time, job.begin_time)
    waited = max(0, now - eligible)
    age = 1.0 if conf.max_age_s <= 0 or waited >= conf.max_age_s else waited / conf.max_age_s
    assoc_prio = ctx.inputs.assoc_priority.get(job.assoc_id, 0)
    qos_prio = ctx.inputs.qos_priority.get(job.qos, 0)
    cpus = job_cpus(job)  # once per job: job size and TRES both read it
    return Factors(
        age=age,
        assoc=_normal(assoc_prio, ctx.max_assoc_priority, "NO_NORMAL_ASSOC" in flags),
        fairshare=ctx.inputs.fairshare.get(job.assoc_id, 0.0),
        job_size=_job_size(job, partition, conf, ctx, cpus),
        partition=_normal(partition.priority_job_factor, ctx.max_part_factor, "NO_NORMAL_PART" in flags),
        qos=_normal(qos_prio, ctx.max_qos_priority, "NO_NORMAL_QOS" in flags),
        tres=tuple(
            (name, _normal(count, (ctx.tres_total or {}).get(name, 0), "NO_NORMAL_TRES" in flags))
            for name, count in ((name, _tres(job, name, cpus)) for name, _ in conf.weight_tres)
        ),
        nice=job.nice,
        site=job.site_factor,
    )


def weigh(factors: Factors, conf: PriorityConfig) -> Weighted:
    """Multiply by the weights and sum, in Slurm's order, then clamp to 1..2^32-1 and truncate."""
    weights = dict(conf.weight_tres)
    tres = tuple((name, value * weights.get(name, 0.0)) for name, value in factors.tres)
    age = factors.age * conf.weight_age
    assoc = factors.assoc * conf.weight_assoc
    fairshare = factors.fairshare * conf.weight_fairshare
    job_size = factors.job_size * conf.weight_job_size
    part = factors.partition * conf.weight_partition
    qos = factors.qos * conf.weight_qos
    total = age + assoc + fairshare + job_size + part + qos + sum(value for _, value in tres)
    total += factors.site - factors.nice
    priority = int(min(max(total, 1.0), float(MAX_PRIORITY)))
    return Weighted(age, assoc, fairshare, job_size, part, qos, tres, factors.nice, priority, factors.site)


def job_tres(job: JobRequest, name: str) -> int:
    """How much of one TRES a pending job asks for (cpu, mem in MB, node, gres/gpu)."""
    return _tres(job, name, job_cpus(job))


def _tres(job: JobRequest, name: str, cpus: int) -> int:
    if name == "cpu":
        return cpus
    if name == "node":
        return job.min_nodes
    if name == "mem":
        if job.mem_per_cpu_mb:
            return job.mem_per_cpu_mb * cpus
        return max(job.mem_per_node_mb, 0) * job.min_nodes
    if name == "gres/gpu":
        return job_gpus(job)
    return 0


def _job_size(job: JobRequest, partition: Partition, conf: PriorityConfig, ctx: Cluster, cpus: int) -> float:
    if ctx.nodes <= 0 or ctx.cpus <= 0:
        return 0.0
    if "SMALL_RELATIVE_TO_TIME" in conf.flags:
        size = max(job.min_nodes * ctx.cpus / ctx.nodes, float(cpus))
        limit = job.time_limit_min if job.time_limit_min > 0 else partition.max_time_min
        minutes = limit if limit > 0 and limit != UNLIMITED else 1
        value = size / minutes / ctx.cpus
        return 1.0 - value if conf.favor_small else value
    node_part = job.min_nodes / ctx.nodes
    cpu_part = cpus / ctx.cpus
    if conf.favor_small:
        node_part, cpu_part = 1.0 - node_part, 1.0 - cpu_part
    value = (node_part + cpu_part) / 2 if cpus else node_part
    return min(1.0, max(0.0, value))


def _normal(value: int, largest: int, raw: bool) -> float:
    """value / largest, or the value itself under a NO_NORMAL_* flag (0 when there is nothing to divide by)."""
    if raw:
        return float(value)
    return value / largest if largest > 0 else 0.0
