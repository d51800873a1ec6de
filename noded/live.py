"""What runs on a node now, for ctld's pings: each running step's processes (sstat) and the GPUs'
latest readings with the job each one holds.

A step's figures are those of its live processes, read from /proc (psutil): the batch script and
what it started (step `batch`), or the tasks under a step's supervisor; CPU time counts the children
they have already waited for. With cgroups or without, the same source. GPU readings come from the
reporter's latest scan (noded/gpu/usage.py), so a ping never waits on NVML.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import psutil

from noded import spool
from noded.gpu.usage import GpuReading
from noded.node import HostedNode
from noded.tasks import STEP_PREFIX
from shoal.v1 import cluster_pb2

BATCH_STEP = -4


def _processes(root_pid: int, with_root: bool) -> list[psutil.Process]:
    try:
        root = psutil.Process(root_pid)
        children = root.children(recursive=True)
    except psutil.Error:
        return []
    return [root, *children] if with_root else children


def _usage(
    job_id: int, step_id: int, node: str, procs: Sequence[psutil.Process], ntasks: int
) -> cluster_pb2.StepUsage:
    out = cluster_pb2.StepUsage(job_id=job_id, step_id=step_id, node=node, ntasks=ntasks, gpu_util=-1)
    cpu = 0.0
    for proc in procs:
        try:
            with proc.oneshot():
                times = proc.cpu_times()
                memory = proc.memory_info()
                cpu += times.user + times.system + times.children_user + times.children_system
                out.rss_kb += memory.rss // 1024
                out.vmem_kb += memory.vms // 1024
                out.pids.append(proc.pid)
                try:
                    io = proc.io_counters()
                    out.disk_read += io.read_bytes
                    out.disk_write += io.write_bytes
                except (psutil.Error, AttributeError):
                    pass
        except psutil.Error:
            continue  # ended meanwhile
    out.cpu_time_us = int(cpu * 1_000_000)
    return out


def step_usage(node: HostedNode) -> list[cluster_pb2.StepUsage]:
    """Every step running on `node`: the batch scripts (their job.pid) and the srun steps (their
    supervisors' tasks)."""
    out: list[cluster_pb2.StepUsage] = []
    try:
        entries = sorted(Path(node.spool).iterdir())
    except OSError:
        return out
    for path in entries:
        job_id = spool.job_id_of(path)
        if job_id is not None:
            if (path / spool.STATUS).exists():
                continue  # ended, its completion not yet acknowledged
            pid = spool.live_pid(path / spool.JOB_PID)
            if pid is not None:
                out.append(_usage(job_id, BATCH_STEP, node.name, _processes(pid, True), 1))
            continue
        if not path.name.startswith(STEP_PREFIX):
            continue
        job_text, _, step_text = path.name[len(STEP_PREFIX) :].partition(".")
        if not (job_text.isdigit() and step_text.isdigit()):
            continue
        pid = spool.live_pid(path / spool.STEPD_PID)
        if pid is None:
            continue
        try:
            ntasks = len(psutil.Process(pid).children())
        except psutil.Error:
            continue
        out.append(_usage(int(job_text), int(step_text), node.name, _processes(pid, False), ntasks))
    return out


def gpu_states(
    readings: Mapping[int, GpuReading], indices: Iterable[int], holders: Mapping[int, int]
) -> list[cluster_pb2.GpuState]:
    """The node's GPUs (these indices, in order) as last read, with the job holding each (0 = free)."""
    out: list[cluster_pb2.GpuState] = []
    for index in sorted(set(indices)):
        r = readings.get(index)
        if r is None:
            continue
        out.append(
            cluster_pb2.GpuState(
                index=index,
                uuid=r.uuid,
                name=r.name,
                utilization=r.utilization,
                memory_used_mb=r.memory_used_mb,
                memory_total_mb=r.memory_total_mb,
                temperature_c=r.temperature_c,
                power_w=r.power_w,
                ecc_errors=r.ecc_errors,
                job_id=holders.get(index, 0),
                sampled_at=r.sampled_at,
            )
        )
    return out
