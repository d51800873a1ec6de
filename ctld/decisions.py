"""What the core's decisions do, after the core: to the job records and to the nodes' free state.

Pure (no I/O, no clock, no lock), and the one copy both callers run: the live applier
(ctld/applier.py, inside its transaction) and the simulator (ctld/sim/engine.py), so a simulated
day and a live day differ only in where their inputs come from.
- `apply_verdicts`: pending reasons (an array's pending tasks share one), priorities, backfill's plan
  (squeue --start, SCHEDNODES);
- `apply_start`: a start on its record — allocation, times (the end is start + limit: `limit_end`),
  sizes, AllocTRES, which pass started it;
- `running_view`: what the core sees of a job it started; `take` / `give_back`: a node's usage as a
  start takes it and an end returns it (ctld sums the same per cycle: ctld.snapshot.usage);
- `run_end`: when a job that runs `run_s` seconds ends — its time limit cuts it short (TIMEOUT).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from ctld.jobs import tres_string
from ctld.record import JobRecord
from ctld.sched import model as m
from ctld.sched import reasons
from shoal import hostlist
from shoal.v1 import jobs_pb2


def limit_end(start_time: int, time_limit_min: int) -> int:
    """When a job started at `start_time` reaches its time limit (0 = no limit)."""
    return start_time + time_limit_min * 60 if time_limit_min >= 0 else 0


def run_end(start_time: int, run_s: int, time_limit_min: int) -> tuple[int, bool]:
    """When a job that runs `run_s` seconds from `start_time` ends, and whether its limit ended it
    (the controller ends it there, as TIMEOUT)."""
    if time_limit_min >= 0 and run_s > time_limit_min * 60:
        return start_time + time_limit_min * 60, True
    return start_time + run_s, False


def apply_verdicts(by_id: Mapping[int, JobRecord], result: m.CycleResult, now: int) -> None:
    """Pending jobs' reasons, priorities and planned starts from one cycle (`by_id`: the jobs it saw)."""
    array_reason: dict[int, str] = {}
    for job_id in sorted(result.verdicts):
        waiting = by_id.get(job_id)
        if waiting is None:
            continue
        reason = result.verdicts[job_id].reason
        if waiting.array_job_id:
            # squeue shows an array's pending tasks as one record with one reason, as Slurm
            reason = array_reason.setdefault(waiting.array_job_id, reason)
        # (a record's assignment is bookkept: read first, a thousand pending tasks a cycle)
        if waiting.state_reason != reason:
            waiting.state_reason = reason
        if waiting.last_sched_eval != now:
            waiting.last_sched_eval = now
    for job_id, prio in result.priorities.items():
        waiting = by_id.get(job_id)
        if waiting is not None and waiting.priority != (prio := 0 if waiting.held else prio):
            waiting.priority = prio
    if result.plans_kept:
        return  # a main pass alone: the last backfill pass's plans stand until the next one
    for job_id, waiting in by_id.items():  # backfill's plan: squeue --start, SCHEDNODES
        plan = result.planned.get(job_id)
        start_time = plan.start_time if plan else 0
        nodes = hostlist.collect(plan.nodes) if plan and plan.nodes else ""
        if waiting.start_time != start_time:
            waiting.start_time = start_time
        if waiting.sched_nodes != nodes:
            waiting.sched_nodes = nodes


def apply_start(job: JobRecord, start: m.Start, now: int, node_types: Mapping[str, str]) -> None:
    """Record an allocation on a job that starts now (`node_types`: each node's GPU type)."""
    job.state = jobs_pb2.RUNNING
    job.state_reason = reasons.NONE
    job.start_time = now
    job.partition = start.partition
    job.time_limit_min = start.time_limit_min
    job.end_time = limit_end(now, start.time_limit_min)
    job.allocation = [
        jobs_pb2.NodeAlloc(
            node=a.node,
            cpus=a.cpus,
            mem_mb=a.mem_mb,
            cpu_ids=a.cpu_ids,
            gpu_indices=a.gpu_indices,
            gpu_type=node_types.get(a.node, ""),
            tasks=a.tasks,
        )
        for a in start.allocation
    ]
    names = [a.node for a in start.allocation]
    job.nodes = hostlist.collect(names)
    job.batch_host = names[0]
    job.num_nodes = len(names)
    # the tasks laid out: at least one per node (-N1-2 started on two nodes has two, as in 22.05)
    job.num_tasks = max(job.num_tasks, sum(a.tasks for a in start.allocation))
    job.num_cpus = sum(a.cpus for a in start.allocation)
    job.mem_mb = sum(a.mem_mb for a in start.allocation)
    job.num_gpus = sum(len(a.gpu_indices) for a in start.allocation)
    job.tres_alloc = tres_string(job.num_cpus, job.mem_mb, job.num_nodes, job.num_gpus)
    job.oversubscribe = not start.exclusive
    job.scheduler = "Backfill" if start.by_backfill else "Main"


def running_view(
    job: JobRecord,
    *,
    assoc_id: int = 0,
    qos: str = "",
    priority: int = 0,
    user_id: int = -1,
    start_time: int = 0,
    releasing: bool = False,
    suspended: bool = False,
    gang_suspended: bool = False,
) -> m.RunningJob:
    """What the core sees of a started job: where it runs, what it holds, until when (the rest, what
    limits and preemption read of it, as the caller knows it: m.RunningJob's defaults otherwise)."""
    return m.RunningJob(
        job_id=job.job_id,
        nodes=tuple(a.node for a in job.allocation),
        end_time=job.end_time,
        partition=job.partition,
        allocation=tuple(
            m.NodeAllocation(
                node=a.node,
                cpu_ids=tuple(a.cpu_ids),
                mem_mb=a.mem_mb,
                gpu_indices=tuple(a.gpu_indices),
                tasks=a.tasks,
            )
            for a in job.allocation
        ),
        assoc_id=assoc_id,
        qos=qos,
        priority=priority,
        user_id=user_id,
        start_time=start_time,
        releasing=releasing,
        suspended=suspended,
        gang_suspended=gang_suspended,
    )


def take(node: m.Node, alloc: m.NodeAllocation, exclusive: bool) -> m.Node:
    """`node` once a started job holds `alloc` on it."""
    u = node.usage
    return replace(
        node,
        usage=m.NodeUsage(
            cpu_ids=u.cpu_ids | frozenset(alloc.cpu_ids),
            mem_mb=u.mem_mb + alloc.mem_mb,
            gpu_indices=u.gpu_indices | frozenset(alloc.gpu_indices),
            exclusive=u.exclusive or exclusive,
            jobs=u.jobs + 1,
        ),
    )


def give_back(node: m.Node, alloc: m.NodeAllocation) -> m.Node:
    """`node` once a job that held `alloc` on it ended."""
    u = node.usage
    left = u.jobs - 1
    if left <= 0:
        return replace(node, usage=m.NodeUsage())
    return replace(
        node,
        usage=m.NodeUsage(
            cpu_ids=u.cpu_ids - frozenset(alloc.cpu_ids),
            mem_mb=max(0, u.mem_mb - alloc.mem_mb),
            gpu_indices=u.gpu_indices - frozenset(alloc.gpu_indices),
            exclusive=u.exclusive and left > 0,
            jobs=left,
        ),
    )
