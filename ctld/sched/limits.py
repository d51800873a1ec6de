"""Partition limits that make a job wait (pend with a reason) rather than be refused."""

from __future__ import annotations

from ctld.sched import memo
from ctld.sched.model import UNLIMITED, JobRequest, Partition
from ctld.sched.reasons import (
    PARTITION_CONFIG,
    PARTITION_DOWN,
    PARTITION_INACTIVE,
    PARTITION_NODE_LIMIT,
    PARTITION_TIME_LIMIT,
)
from ctld.sched.resources import job_cpus, node_count_range

FOREVER = 2**62  # the end of a job without a time limit


def job_end(begin: int, limit_min: int) -> int:
    """When a job started at `begin` with a limit of `limit_min` minutes must be over."""
    return FOREVER if limit_min < 0 or limit_min == UNLIMITED else begin + limit_min * 60


def effective_time_limit(job: JobRequest, part: Partition) -> int:
    """Minutes the job may run: its own --time, else the partition's DefaultTime, else MaxTime."""
    if job.time_limit_min != -1:
        return job.time_limit_min
    if part.default_time_min != -1:
        return part.default_time_min
    return part.max_time_min


@memo.by_identity
def partition_limit_reason(job: JobRequest, part: Partition) -> str | None:
    """Slurm's pending reason when `part` cannot take the job as asked, else None."""
    if part.state == "DOWN":
        return PARTITION_DOWN
    if part.state == "INACTIVE":
        return PARTITION_INACTIVE
    if node_limit_exceeded(job, part):
        return PARTITION_NODE_LIMIT
    if cpu_limit_exceeded(job, part):
        return PARTITION_CONFIG
    if time_limit_exceeded(job, part):
        return PARTITION_TIME_LIMIT
    return None


def node_limit_exceeded(job: JobRequest, part: Partition) -> bool:
    """More nodes than the partition allows or has, or fewer than its MinNodes."""
    wanted, _ = node_count_range(job)
    if part.max_nodes and wanted > part.max_nodes:
        return True
    return wanted > len(part.nodes) or wanted < part.min_nodes


def cpu_limit_exceeded(job: JobRequest, part: Partition) -> bool:
    """More CPUs in all than the partition's nodes have (`-n 65` on 64 CPUs): Slurm queues such a job
    with PartitionConfig rather than refusing it, as long as each node's share could fit."""
    return part.total_cpus > 0 and job_cpus(job) > part.total_cpus


def time_limit_exceeded(job: JobRequest, part: Partition) -> bool:
    if part.max_time_min == UNLIMITED:
        return False
    limit = effective_time_limit(job, part)
    return limit == UNLIMITED or limit > part.max_time_min
