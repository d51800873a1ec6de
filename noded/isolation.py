"""What a node enforces for its jobs (cgroup.conf + the detected cgroup version + its GPU files),
and the cgroup request for one job's allocation on it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from noded.cgroup import CgroupRequest, detect_version, step_name
from noded.cgroup.bpf import DEV_CHAR
from shoal.conf.cgroup import CgroupConf, load_cgroup_conf
from shoal.v1 import jobs_pb2, node_pb2

log = logging.getLogger("shoal.noded")
# Always reachable for a job that has any GPU: the driver's control and unified-memory devices.
GPU_SHARED_FILES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")


@dataclass(frozen=True)
class Isolation:
    """A node's enforcement: cgroup.conf, the cgroup version in use, its GPU device files by index."""

    conf: CgroupConf
    version: str  # "v1" or "v2"
    gpu_files: Mapping[int, str] = field(default_factory=dict)
    scope: str = ""  # prefix of the node's cgroup directory (emulated nodes of different clusters differ)

    @property
    def devices_constrained(self) -> bool:
        return self.conf.constrain_devices


def load_isolation(slurm_conf_path: str, gpu_files: Mapping[int, str], scope: str = "") -> Isolation | None:
    """The node's Isolation, or None when nothing is enforced (no cgroup.conf constraint, not root,
    no usable cgroup hierarchy: each logged)."""
    conf = load_cgroup_conf(os.path.join(os.path.dirname(slurm_conf_path), "cgroup.conf"))
    if not conf.enabled:
        return None
    if os.geteuid() != 0:
        log.warning("cgroup.conf asks for constraints but noded is not root: not enforced")
        return None
    version = detect_version(conf.plugin, conf.mountpoint)
    if version is None:
        log.warning(
            "no usable %s hierarchy under %s: cgroup constraints not enforced", conf.plugin, conf.mountpoint
        )
        return None
    log.info(
        "cgroup %s enforcement (cores=%s ram=%s devices=%s)",
        version,
        conf.constrain_cores,
        conf.constrain_ram_space,
        conf.constrain_devices,
    )
    return Isolation(conf=conf, version=version, gpu_files=dict(gpu_files), scope=scope)


def _machine_cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except OSError:
        return list(range(os.cpu_count() or 1))


def real_cpus(cpu_ids: list[int], machine: list[int]) -> list[int]:
    """Allocated CPU ids as this machine's CPUs (emulated nodes may have more CPUs than it: wrap)."""
    if not machine:
        return []
    return sorted({machine[c % len(machine)] for c in cpu_ids})


def step_cpus(isolation: Isolation, req: node_pb2.LaunchTasksRequest, node: str) -> list[int]:
    """This machine's CPUs of a step's cpuset on `node` when cores are constrained and the step uses
    only part of the job's (--exact, -c); [] = the job's cpuset as it is."""
    layout = next((n for n in req.step.layout if n.node == node), None)
    alloc = next((a for a in req.job.allocation if a.node == node), None)
    if not isolation.conf.constrain_cores or layout is None or alloc is None or not layout.cpu_ids:
        return []
    if set(layout.cpu_ids) >= set(alloc.cpu_ids):
        return []
    return real_cpus(list(layout.cpu_ids), _machine_cpus())


def _device(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [DEV_CHAR, os.major(st.st_rdev), os.minor(st.st_rdev)]


def memory_limits(conf: CgroupConf, mem_mb: int) -> tuple[int, int]:
    """(RAM, RAM + swap) limits in bytes for `mem_mb` allocated (cgroup.conf's percentages and
    floor); (0, 0) = not constrained."""
    if not conf.constrain_ram_space or not mem_mb:
        return 0, 0
    mem = max(conf.min_ram_space_mb, int(mem_mb * conf.allowed_ram_space / 100)) << 20
    memsw = 0
    if conf.constrain_swap_space:
        memsw = max(int(mem_mb * (conf.allowed_ram_space + conf.allowed_swap_space) / 100) << 20, mem)
    return mem, memsw


def cgroup_request(
    isolation: Isolation, node: str, job_id: int, alloc: jobs_pb2.NodeAlloc | None
) -> CgroupRequest:
    """The cgroup of job `job_id` on `node` for its allocation there."""
    conf = isolation.conf
    cpus: list[int] = []
    denied: list[list[int]] = []
    if alloc is not None and conf.constrain_cores and alloc.cpu_ids:
        cpus = real_cpus(list(alloc.cpu_ids), _machine_cpus())
    mem, memsw = memory_limits(conf, alloc.mem_mb if alloc is not None else 0)
    if conf.constrain_devices:
        mine = set(alloc.gpu_indices) if alloc is not None else set()
        allowed = {tuple(d) for i in mine if (d := _device(isolation.gpu_files.get(i, ""))) is not None}
        for index, path in sorted(isolation.gpu_files.items()):
            dev = _device(path)
            if index not in mine and dev is not None and tuple(dev) not in allowed:
                denied.append(dev)
        if not mine:
            denied.extend(d for p in GPU_SHARED_FILES if (d := _device(p)) is not None)
    return CgroupRequest(
        version=isolation.version,
        relpath=f"shoal/{isolation.scope}{node}/job_{job_id}",
        mount=conf.mountpoint,
        cpus=cpus,
        mem_bytes=mem,
        memsw_bytes=memsw,
        deny_devices=denied,
    )


def step_cgroup_request(isolation: Isolation, req: node_pb2.LaunchTasksRequest, node: str) -> CgroupRequest:
    """A step's group inside its job's on `node`: its CPUs (--exact/-c), its memory (--mem,
    --mem-per-cpu; else the job's applies), and of the job's GPUs only the ones it asked for."""
    alloc = next((a for a in req.job.allocation if a.node == node), None)
    layout = next((n for n in req.step.layout if n.node == node), None)
    job = cgroup_request(isolation, node, req.job.job_id, alloc)
    mem, memsw = memory_limits(isolation.conf, layout.mem_mb if layout is not None else 0)
    denied: list[list[int]] = []
    if isolation.conf.constrain_devices and alloc is not None and layout is not None and layout.gpu_indices:
        for index in sorted(set(alloc.gpu_indices) - set(layout.gpu_indices)):
            dev = _device(isolation.gpu_files.get(index, ""))
            if dev is not None:
                denied.append(dev)
    return job.child(
        step_name(req.step.step_id),
        cpus=step_cpus(isolation, req, node),
        mem_bytes=mem,
        memsw_bytes=memsw,
        deny_devices=denied,
    )
