"""The controller's table of nodes: configured shape, registration, responsiveness, admin state.

A node's record is a NodeInfo message (persisted for the admin parts: drain, down, reason). Usage
(allocated CPUs, memory, GPUs) is derived from running jobs when asked, never stored twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ctld.errors import INVALID_NODE_NAME, SlurmError
from ctld.gpus import gres_difference
from ctld.record import JobRecord
from shoal import hostlist
from shoal.arrayspec import format_task_ids
from shoal.conf import NodeConf, SlurmConfig, format_gres
from shoal.states import ACTIVE_STATES
from shoal.v1 import cluster_pb2


@dataclass
class NodeRuntime:
    conf: NodeConf
    info: cluster_pb2.NodeInfo
    last_contact: float = 0.0  # wall time of the last successful registration/ping
    registered: bool = False
    gpu_types: dict[int, str] = field(default_factory=dict)  # index -> type, from conf or registration
    # what its last ping answer said runs there (memory only, never the store: issue 17)
    gpus: list[cluster_pb2.GpuState] = field(default_factory=list)
    steps: list[cluster_pb2.StepUsage] = field(default_factory=list)
    live_at: int = 0  # when that answer came (ctld's clock)

    @property
    def available(self) -> bool:
        """May take new work: registered, responding, not down, not drained."""
        i = self.info
        return (
            self.registered
            and not i.not_responding
            and i.base_state not in ("DOWN", "UNKNOWN", "FUTURE")
            and not i.drain
        )


def gpu_types_from_conf(conf: NodeConf) -> dict[int, str]:
    """GPU index -> type from the node's Gres= (indices in order of the gres entries)."""
    out: dict[int, str] = {}
    index = 0
    for g in conf.gres:
        if g.name != "gpu":
            continue
        for _ in range(g.count):
            out[index] = g.type or ""
            index += 1
    return out


def new_runtime(cfg: SlurmConfig, conf: NodeConf, saved: bytes | None) -> NodeRuntime:
    info = cluster_pb2.NodeInfo()
    if saved:
        info.ParseFromString(saved)
    info.name = conf.name
    info.addr = conf.addr
    info.hostname = conf.hostname
    info.port = conf.port or cfg.slurmd_port
    info.cpus = conf.cpus
    info.boards = conf.boards
    info.sockets = conf.sockets
    info.cores_per_socket = conf.cores_per_socket
    info.threads_per_core = conf.threads_per_core
    info.real_memory_mb = conf.real_memory
    info.tmp_disk_mb = conf.tmp_disk
    info.gres = format_gres(conf.gres)
    del info.features[:]
    info.features.extend(conf.features)
    info.weight = conf.weight
    del info.partitions[:]
    info.partitions.extend(p.name for p in cfg.partitions if conf.name in p.nodes)
    configured_state = (conf.state or "UNKNOWN").upper()
    if not saved:
        if configured_state.startswith("DOWN"):
            info.base_state = "DOWN"
            info.reason = info.reason or "Set DOWN in slurm.conf"
        elif configured_state.startswith("DRAIN"):
            info.base_state = "UNKNOWN"
            info.drain = True
            info.reason = info.reason or "Set DRAIN in slurm.conf"
        elif configured_state == "FUTURE":
            info.base_state = "FUTURE"
        else:
            info.base_state = "UNKNOWN"
    elif info.base_state not in ("DOWN", "FUTURE"):
        info.base_state = "UNKNOWN"
    info.not_responding = True
    info.total_gpus = sum(g.count for g in conf.gres if g.name == "gpu")
    return NodeRuntime(conf=conf, info=info, gpu_types=gpu_types_from_conf(conf))


def named(nodes: Mapping[str, NodeRuntime], text: str) -> list[str]:
    """The nodes a command names: a hostlist, or ALL (every node, as Slurm's update and reboot take it)."""
    if text.upper() == "ALL":
        return list(nodes)
    try:
        names = hostlist.expand(text)
    except hostlist.HostlistError as exc:
        raise SlurmError(INVALID_NODE_NAME) from exc
    if not names or any(name not in nodes for name in names):
        raise SlurmError(INVALID_NODE_NAME)
    return names


def registration_problems(conf: NodeConf, hw: cluster_pb2.NodeHardware) -> list[str]:
    """Why a registering node is short of its configuration (Slurm drains it with this reason)."""
    problems = []
    if hw.cpus and hw.cpus < conf.cpus:
        problems.append(f"Low CPUs (reported:{hw.cpus} < configured:{conf.cpus})")
    if hw.real_memory_mb and hw.real_memory_mb < conf.real_memory:
        problems.append(
            f"Low RealMemory (reported:{hw.real_memory_mb} < 100.00% of configured:{conf.real_memory})"
        )
    if (
        hw.gpus
    ):  # a node that reports no GPUs at all (no NVML, no gres.conf lines) is taken at its word of slurm.conf
        problems.extend(gres_difference(conf.gres, hw.gpus))
    return problems


def long_state(info: cluster_pb2.NodeInfo, alloc_cpus: int, completing: bool) -> tuple[str, str]:
    """(base, long) state as scontrol prints it: IDLE, MIXED, ALLOCATED, DOWN, IDLE+DRAIN,
    MIXED+DRAIN+REBOOT_REQUESTED, DOWN+REBOOT_ISSUED, IDLE+NOT_RESPONDING ... (22.05's flag order)."""
    base = info.base_state or "UNKNOWN"
    if base in ("IDLE", "ALLOCATED", "MIXED"):
        if alloc_cpus <= 0:
            base = "IDLE"
        elif alloc_cpus >= info.cpus:
            base = "ALLOCATED"
        else:
            base = "MIXED"
    flags = []
    if completing:
        flags.append("COMPLETING")
    if info.drain:
        flags.append("DRAIN")
    if info.reboot_requested:
        flags.append("REBOOT_REQUESTED")
    if info.reboot_issued:
        flags.append("REBOOT_ISSUED")
    if info.not_responding:
        flags.append("NOT_RESPONDING")
    if info.maint:
        flags += ["MAINTENANCE", "RESERVED"]
    text = "+".join([base, *flags])
    return base, text


def gres_used(node: NodeRuntime, indices: Iterable[int]) -> str:
    """'gpu:h100:2(IDX:0-1)' as scontrol show node prints GresUsed ('gpu:h100:0(IDX:N/A)' unused)."""
    used = sorted(set(indices))
    types = sorted({node.gpu_types.get(i, "") for i in node.gpu_types})
    if not node.gpu_types:
        return ""
    type_part = f"{types[0]}:" if len(types) == 1 and types[0] else ""
    if not used:
        return f"gpu:{type_part}0(IDX:N/A)"
    return f"gpu:{type_part}{len(used)}(IDX:{format_task_ids(used)})"


def note_registered(info: cluster_pb2.NodeInfo) -> None:
    """LastBusyTime starts at the node daemon's start (22.05 shows its SlurmdStartTime until a job has
    ended there); a later re-registration keeps a job end that came after it."""
    info.last_busy_time = max(info.last_busy_time, info.noded_start_time)


def note_job_ended(
    nodes: dict[str, NodeRuntime], jobs: Iterable[JobRecord], ended: JobRecord, now: int
) -> None:
    """LastBusyTime=now on each node of `ended` that no other active job holds: as 22.05, the time the
    node's last job ended (a job ending beside another one leaves it unchanged)."""
    mine = {a.node for a in ended.allocation}
    if not mine:
        return
    for job in jobs:
        if job.job_id != ended.job_id and job.state in ACTIVE_STATES:
            mine.difference_update(a.node for a in job.allocation)
            if not mine:
                return
    for name in mine:
        node = nodes.get(name)
        if node is not None:
            node.info.last_busy_time = now
