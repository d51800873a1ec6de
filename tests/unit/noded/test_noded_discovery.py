"""Hardware discovery: CPU layout from /sys, and configured values for emulated nodes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from noded.discovery import CpuTopology, cpu_topology, discover_hardware, hardware_for


def fake_sys(root: Path, sockets: int, cores: int, threads: int, offline: tuple[int, ...] = ()) -> Path:
    """A /sys/devices/system/cpu tree with cpus numbered like Linux does (threads last)."""
    cpu = 0
    for _thread in range(threads):
        for socket in range(sockets):
            for core in range(cores):
                topo = root / f"cpu{cpu}" / "topology"
                topo.mkdir(parents=True)
                (topo / "physical_package_id").write_text(f"{socket}\n")
                (topo / "core_id").write_text(f"{core}\n")
                (root / f"cpu{cpu}" / "online").write_text("0\n" if cpu in offline else "1\n")
                cpu += 1
    (root / "cpufreq").mkdir()
    return root


@pytest.mark.parametrize(
    ("sockets", "cores", "threads", "want"),
    [
        (1, 2, 1, CpuTopology(2, 1, 2, 1)),
        (2, 8, 1, CpuTopology(16, 2, 8, 1)),
        (2, 4, 2, CpuTopology(16, 2, 4, 2)),
    ],
    ids=["small-vm", "two-sockets", "hyperthreads"],
)
def test_cpu_topology(tmp_path: Path, sockets: int, cores: int, threads: int, want: CpuTopology) -> None:
    assert cpu_topology(fake_sys(tmp_path, sockets, cores, threads)) == want


def test_cpu_topology_without_sys_falls_back_to_counts(tmp_path: Path) -> None:
    topo = cpu_topology(tmp_path / "missing")
    assert topo.cpus >= 1 and topo.sockets == 1


def test_discover_hardware_is_plausible() -> None:
    hw = discover_hardware()
    assert hw.cpus == hw.sockets * hw.cores_per_socket * hw.threads_per_core
    assert hw.boards == 1
    assert 0 < hw.free_mem_mb <= hw.real_memory_mb
    assert hw.arch and hw.os.startswith("Linux")
    assert hw.boot_time > 0
    assert list(hw.gpus) == []


@dataclass(frozen=True)
class Conf:
    cpus: int = 16
    boards: int = 1
    sockets: int = 2
    cores_per_socket: int = 8
    threads_per_core: int = 1
    real_memory: int = 64000


@pytest.mark.parametrize(
    ("emulated", "want_cpus", "want_mem"),
    [(True, 16, 64000), (False, None, None)],
    ids=["emulated-reports-config", "real-reports-real"],
)
def test_hardware_for(emulated: bool, want_cpus: int | None, want_mem: int | None) -> None:
    real = discover_hardware()
    hw = hardware_for(Conf(), real, emulated)
    assert hw.cpus == (want_cpus or real.cpus)
    assert hw.real_memory_mb == (want_mem or real.real_memory_mb)
    assert hw.arch == real.arch and hw.boot_time == real.boot_time
    if emulated:
        assert (hw.sockets, hw.cores_per_socket, hw.threads_per_core) == (2, 8, 1)
        assert hw.free_mem_mb <= 64000
