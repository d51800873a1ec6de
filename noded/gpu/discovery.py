"""A node's GPUs: from NVML (the real pynvml, or the fake one), else from gres.conf.

Order of sources (per node): the real driver when pynvml can initialise it; else the fake NVML
named by SHOAL_FAKE_NVML (a shipped description name such as "dgx_h100", or a JSON path); else
the node's gres.conf lines. gres.conf `AutoDetect=off` turns NVML off for the nodes it covers,
and gres.conf `File=` lines, when present, name the device files of detected GPUs in minor order
(emulated nodes point them at fake device files in a directory of their own).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from noded.gpu.fake_nvml import FakeNvml, parse_cpu_list
from shoal.arrayspec import format_task_ids
from shoal.conf import GresConf, GresConfLine
from shoal.v1 import cluster_pb2

FAKE_ENV = "SHOAL_FAKE_NVML"
_BRAND_WORDS = frozenset({"nvidia", "tesla", "geforce", "quadro"})
_CPU_WORDS = 16  # 64-bit words asked of nvmlDeviceGetCpuAffinity: up to 1024 CPUs


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as the node reports it at registration."""

    index: int  # minor number (/dev/nvidiaN)
    type: str  # Slurm type name ("h100"), "" when unknown
    model: str = ""
    uuid: str = ""
    pci_bus_id: str = ""
    memory_mb: int = 0
    numa_node: int = -1
    cpus: tuple[int, ...] = ()  # affine CPU ids
    nvlink_peers: tuple[int, ...] = ()  # GPUs reachable over NVLink or through an NVSwitch
    pcie_switch: str = ""  # GPUs with the same label sit under one PCIe switch
    mig: bool = False
    file: str = ""
    links: dict[int, int] = field(default_factory=dict)  # peer -> NVLink count (0 through a switch)


def type_name(model: str) -> str:
    """NVML's product name to Slurm's type: "NVIDIA H100 80GB HBM3" -> "h100", "NVIDIA GeForce RTX 4090" -> "rtx_4090"."""
    words = [w for w in re.split(r"[\s\-]+", model.lower()) if w and w not in _BRAND_WORDS]
    if not words:
        return ""
    if words[0].isalpha() and len(words) > 1:
        return f"{words[0]}_{words[1]}"
    return words[0]


def load_backend(fake: str | None = None) -> Any | None:
    """The NVML to ask: the real driver, else the fake description `fake` (or $SHOAL_FAKE_NVML), else None."""
    try:
        import pynvml  # noqa: PLC0415 - only noded needs it, and only here

        pynvml.nvmlInit()
        return pynvml
    except Exception:  # noqa: BLE001 - no library, no driver, no GPU: all mean "no real NVML"
        pass
    name = fake if fake is not None else os.environ.get(FAKE_ENV, "")
    if not name:
        return None
    nvml = FakeNvml.load(name)
    nvml.nvmlInit()
    return nvml


def _bits(words: Sequence[int]) -> tuple[int, ...]:
    return tuple(w * 64 + b for w, word in enumerate(words) for b in range(64) if int(word) >> b & 1)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def nvml_gpus(nvml: Any) -> list[GpuInfo]:
    """Every GPU NVML reports, with links, PCIe grouping, NUMA node and CPU affinity."""
    count = int(nvml.nvmlDeviceGetCount())
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    minors = [int(nvml.nvmlDeviceGetMinorNumber(h)) for h in handles]
    bus_ids = [_text(nvml.nvmlDeviceGetPciInfo(h).busId).lower() for h in handles]
    by_bus = {bus: minors[i] for i, bus in enumerate(bus_ids)}
    switched: set[int] = set()
    links: list[dict[int, int]] = []
    for i, handle in enumerate(handles):
        peers: dict[int, int] = {}
        for link in range(int(nvml.NVML_NVLINK_MAX_LINKS)):
            try:
                if nvml.nvmlDeviceGetNvLinkState(handle, link) != nvml.NVML_FEATURE_ENABLED:
                    continue
                remote = _text(nvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId).lower()
            except nvml.NVMLError:
                continue
            if remote in by_bus:
                peers[by_bus[remote]] = peers.get(by_bus[remote], 0) + 1
            else:
                switched.add(minors[i])  # the far end is an NVSwitch, not a GPU
        links.append(peers)
    groups = _pcie_groups(nvml, handles, minors)
    out: list[GpuInfo] = []
    for i, handle in enumerate(handles):
        model = _text(nvml.nvmlDeviceGetName(handle))
        peers = dict(links[i])
        if minors[i] in switched:
            peers.update({m: peers.get(m, 0) for m in switched if m != minors[i]})
        try:
            numa = int(nvml.nvmlDeviceGetNumaNodeId(handle))
        except (nvml.NVMLError, AttributeError):
            numa = _sysfs_numa(bus_ids[i])
        try:
            mig = int(nvml.nvmlDeviceGetMigMode(handle)[0]) == int(nvml.NVML_FEATURE_ENABLED)
        except nvml.NVMLError:
            mig = False
        out.append(
            GpuInfo(
                index=minors[i],
                type=type_name(model),
                model=model,
                uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                pci_bus_id=bus_ids[i],
                memory_mb=int(nvml.nvmlDeviceGetMemoryInfo(handle).total) >> 20,
                numa_node=numa,
                cpus=_bits(nvml.nvmlDeviceGetCpuAffinity(handle, _CPU_WORDS)),
                nvlink_peers=tuple(sorted(peers)),
                pcie_switch=groups[i],
                mig=mig,
                file=f"/dev/nvidia{minors[i]}",
                links=peers,
            )
        )
    return sorted(out, key=lambda g: g.index)


def _pcie_groups(nvml: Any, handles: list[Any], minors: list[int]) -> list[str]:
    """A label per GPU: GPUs whose common PCIe ancestor is a switch share one."""
    group = list(range(len(handles)))
    for i in range(len(handles)):
        for j in range(i + 1, len(handles)):
            try:
                level = int(nvml.nvmlDeviceGetTopologyCommonAncestor(handles[i], handles[j]))
            except nvml.NVMLError:
                continue
            if level <= int(nvml.NVML_TOPOLOGY_MULTIPLE):
                old, new = max(group[i], group[j]), min(group[i], group[j])
                group = [new if g == old else g for g in group]
    return [f"pcie{minors[g]}" for g in group]


def _sysfs_numa(bus_id: str) -> int:
    try:
        with open(f"/sys/bus/pci/devices/{bus_id.lower()[-12:]}/numa_node", encoding="ascii") as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return -1


def gres_conf_gpus(lines: Sequence[GresConfLine]) -> list[GpuInfo]:
    """GPUs as gres.conf describes them (no driver): index from the device file's number, type, Cores, Links."""
    out: list[GpuInfo] = []
    for line in lines:
        files: Sequence[str] = line.files or [""] * line.count
        cpus = tuple(parse_cpu_list(line.cores)) if line.cores else ()
        for file in files:
            index = _minor(file, len(out))
            out.append(GpuInfo(index=index, type=line.type or "", cpus=cpus, file=file))
    return _apply_links(out, [line for line in lines for _ in (line.files or [""] * line.count)])


def _apply_links(gpus: list[GpuInfo], lines: Sequence[GresConfLine]) -> list[GpuInfo]:
    """Links=-1,2,0,0: NVLink counts from this GPU to GPU 0, 1, ... (-1 = itself)."""
    out: list[GpuInfo] = []
    for gpu, line in zip(gpus, lines, strict=True):
        peers: dict[int, int] = {}
        for peer, count in enumerate(line.links.split(",") if line.links else []):
            try:
                links = int(count)
            except ValueError:
                continue
            if links > 0 and peer != gpu.index:
                peers[peer] = links
        out.append(dataclasses.replace(gpu, nvlink_peers=tuple(sorted(peers)), links=peers))
    return out


def _minor(file: str, fallback: int) -> int:
    match = re.search(r"(\d+)$", file)
    return int(match.group(1)) if match else fallback


def node_gpus(node: str, gres_conf: GresConf, nvml: Any | None) -> list[GpuInfo]:
    """The GPUs node `node` reports: detected (files from gres.conf where it names them), else gres.conf's."""
    lines = [line for line in gres_conf.for_node(node) if line.name == "gpu"]
    if nvml is None or gres_conf.autodetect_for(node) == "off":
        return gres_conf_gpus(lines)
    found = nvml_gpus(nvml)
    files = [f for line in lines for f in line.files]
    if files and len(files) == len(found):
        found = [dataclasses.replace(g, file=f) for g, f in zip(found, files, strict=True)]
    return found


def to_proto(gpu: GpuInfo) -> cluster_pb2.GpuDevice:
    """The registration message's form of one GPU."""
    return cluster_pb2.GpuDevice(
        index=gpu.index,
        type=gpu.type,
        model=gpu.model,
        uuid=gpu.uuid,
        pci_bus_id=gpu.pci_bus_id,
        memory_mb=gpu.memory_mb,
        numa_node=gpu.numa_node,
        cpu_affinity=format_task_ids(gpu.cpus),
        nvlink_peers=list(gpu.nvlink_peers),
        mig_enabled=gpu.mig,
        file=gpu.file,
        pcie_switch=gpu.pcie_switch,
    )
