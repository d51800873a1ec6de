"""What this machine has: CPU topology, memory, OS, load — reported to ctld at registration.

Each resource has its own small discovery function (cpu_topology, memory, gpus ...) so that a
new kind (NVML GPUs, issue 4) is one more function called from discover_hardware().
Emulated nodes (several per machine) report their slurm.conf values instead: hardware_for().
"""

from __future__ import annotations

import os
import platform
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import psutil

from noded.gpu.discovery import load_backend, nvml_gpus, to_proto
from shoal.v1 import cluster_pb2

SYS_CPU = Path("/sys/devices/system/cpu")
MB = 1024 * 1024


@dataclass(frozen=True)
class CpuTopology:
    cpus: int
    sockets: int
    cores_per_socket: int
    threads_per_core: int


class NodeConfLike(Protocol):
    """The configured node values (shoal.conf's NodeConf) that an emulated node reports."""

    @property
    def cpus(self) -> int: ...
    @property
    def boards(self) -> int: ...
    @property
    def sockets(self) -> int: ...
    @property
    def cores_per_socket(self) -> int: ...
    @property
    def threads_per_core(self) -> int: ...
    @property
    def real_memory(self) -> int: ...


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _online_cpus(sys_cpu: Path) -> list[int]:
    ids: list[int] = []
    for entry in sys_cpu.glob("cpu[0-9]*"):
        try:
            cpu = int(entry.name[3:])
        except ValueError:
            continue
        online = _read_int(entry / "online")
        if online == 0:
            continue
        ids.append(cpu)
    return sorted(ids)


def cpu_topology(sys_cpu: Path = SYS_CPU) -> CpuTopology:
    """Sockets, cores and threads from /sys (package and core ids); psutil when /sys lacks them."""
    cores: dict[tuple[int, int], int] = {}
    for cpu in _online_cpus(sys_cpu):
        topo = sys_cpu / f"cpu{cpu}" / "topology"
        package = _read_int(topo / "physical_package_id")
        core = _read_int(topo / "core_id")
        if package is None or core is None:
            cores.clear()
            break
        cores[(package, core)] = cores.get((package, core), 0) + 1
    if cores:
        cpus = sum(cores.values())
        sockets = len({package for package, _ in cores})
        threads = max(1, cpus // len(cores))
        return CpuTopology(cpus, sockets, max(1, len(cores) // sockets), threads)
    cpus = psutil.cpu_count(logical=True) or os.cpu_count() or 1
    physical = psutil.cpu_count(logical=False) or cpus
    return CpuTopology(cpus, 1, physical, max(1, cpus // physical))


def gpus() -> list[cluster_pb2.GpuDevice]:
    """GPUs of this machine as NVML (real or fake) sees them; none without NVML.

    Per-node reports (gres.conf files, emulated nodes) come from noded.gpu.discovery.node_gpus.
    """
    nvml = load_backend()
    if nvml is None:
        return []
    return [to_proto(gpu) for gpu in nvml_gpus(nvml)]


def _boot_time() -> int:
    try:
        return int(psutil.boot_time())
    except (OSError, RuntimeError):
        return 0


def _tmp_disk_mb(path: str = "/tmp") -> int:
    try:
        return shutil.disk_usage(path).total // MB
    except OSError:
        return 0


def cpu_load() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return 0.0


def free_memory_mb() -> int:
    return int(psutil.virtual_memory().available // MB)


def discover_hardware() -> cluster_pb2.NodeHardware:
    """The real hardware of this machine, as the node's registration carries it."""
    topo = cpu_topology()
    uname = platform.uname()
    return cluster_pb2.NodeHardware(
        cpus=topo.cpus,
        boards=1,
        sockets=topo.sockets,
        cores_per_socket=topo.cores_per_socket,
        threads_per_core=topo.threads_per_core,
        real_memory_mb=int(psutil.virtual_memory().total // MB),
        tmp_disk_mb=_tmp_disk_mb(),
        gpus=gpus(),
        arch=uname.machine,
        os=f"{uname.system} {uname.release} {uname.version}",
        boot_time=_boot_time(),
        cpu_load=cpu_load(),
        free_mem_mb=free_memory_mb(),
    )


def hardware_for(
    node_conf: NodeConfLike, real: cluster_pb2.NodeHardware, emulated: bool
) -> cluster_pb2.NodeHardware:
    """What a node reports: `real` for a real node; its configured shape when emulated.

    Like Slurm's SlurmdParameters=config_overrides: arch, OS, boot time and load stay real,
    the CPU layout and memory come from slurm.conf, and free memory never exceeds RealMemory.
    """
    hardware = cluster_pb2.NodeHardware()
    hardware.CopyFrom(real)
    if not emulated:
        return hardware
    hardware.cpus = node_conf.cpus
    hardware.boards = node_conf.boards or 1
    hardware.sockets = node_conf.sockets
    hardware.cores_per_socket = node_conf.cores_per_socket
    hardware.threads_per_core = node_conf.threads_per_core
    hardware.real_memory_mb = node_conf.real_memory
    hardware.free_mem_mb = min(real.free_mem_mb, node_conf.real_memory)
    return hardware
