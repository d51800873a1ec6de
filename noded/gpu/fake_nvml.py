"""A fake NVML with pynvml's call surface, loaded from a JSON node description.

Tests, CI and `shoal up --gpus-per-node` have no GPU driver; discovery code calls the same
functions on this object as on the real `pynvml` module, so the one code path is exercised.
Descriptions ship with shoal (noded/gpu/descriptions/*.json): `dgx_h100` (8 H100 on NVSwitch,
2 NUMA nodes) and `pcie_a100` (8 A100 PCIe, NVLink bridges between pairs, 2 NUMA nodes).
A name or path may end in `:N` (`dgx_h100:4`, what `shoal up --gpus-per-node 4` uses): only the first
N GPUs of the description, NVLinks only among them, the rest (NUMA nodes, CPU affinity, NVSwitch) as
described.

JSON shape: {"driver_version", "gpus": [{"name", "uuid", "minor", "memory_mb", "pci_bus_id",
"numa_node", "cpu_affinity" (cpu list "0-55"), "pcie_switch", "mig"}], "nvswitch": null or
{"links_per_gpu", "bus_ids"}, "nvlinks": [[gpu_a, gpu_b, links], ...]}.

What the GPUs are doing (for usage accounting and the live metrics) comes from optional per-GPU
"utilization" (percent), "memory_used_mb", "temperature_c", "power_w" and "ecc_errors" (uncorrected,
volatile), overridden by the JSON file $SHOAL_FAKE_NVML_USAGE when set:
{"<minor>": {"utilization": N, "memory_used_mb": M, ...}}, read at every call so a test can change
it. A key whose value is null answers NVML_ERROR_NOT_SUPPORTED, as a GPU without that sensor does.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DESCRIPTIONS = Path(__file__).parent / "descriptions"
USAGE_ENV = "SHOAL_FAKE_NVML_USAGE"

# pynvml's constant values, so callers may compare against either module's.
NVML_SUCCESS = 0
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_FEATURE_DISABLED = 0
NVML_FEATURE_ENABLED = 1
NVML_NVLINK_MAX_LINKS = 18
NVML_NVLINK_DEVICE_TYPE_GPU = 0
NVML_NVLINK_DEVICE_TYPE_SWITCH = 2
NVML_TOPOLOGY_INTERNAL = 0
NVML_TOPOLOGY_SINGLE = 10  # same PCIe switch
NVML_TOPOLOGY_MULTIPLE = 20
NVML_TOPOLOGY_HOSTBRIDGE = 30
NVML_TOPOLOGY_NODE = 40  # same NUMA node
NVML_TOPOLOGY_SYSTEM = 50  # across sockets
NVML_TEMPERATURE_GPU = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
_DEFAULTS = {"utilization": 0, "memory_used_mb": 0, "temperature_c": 35, "power_w": 70, "ecc_errors": 0}


class NVMLError(Exception):
    """Raised like pynvml.NVMLError: `value` is the NVML return code."""

    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


@dataclass(frozen=True)
class Memory:
    total: int
    free: int
    used: int


@dataclass(frozen=True)
class PciInfo:
    busId: str  # noqa: N815 - pynvml's field name
    bus: int


@dataclass(frozen=True)
class Utilization:
    gpu: int
    memory: int


@dataclass(frozen=True)
class Handle:
    index: int


def description_path(name_or_path: str) -> Path:
    """A shipped description by name ("dgx_h100") or any JSON file by path."""
    builtin = DESCRIPTIONS / f"{name_or_path}.json"
    return builtin if builtin.exists() else Path(name_or_path)


def split_count(spec: str) -> tuple[str, int | None]:
    """ "dgx_h100:4" -> ("dgx_h100", 4); a spec without a ":N" suffix (or a file of that name) -> (spec, None)."""
    name, sep, count = spec.rpartition(":")
    if not sep or not count.isdigit() or Path(spec).exists():
        return spec, None
    return name, int(count)


def first_gpus(description: dict[str, Any], count: int) -> dict[str, Any]:
    """The description with only its first `count` GPUs: NVLinks only among those, all else as it was."""
    gpus = list(description.get("gpus", []))
    if not 1 <= count <= len(gpus):
        raise ValueError(f"the description has {len(gpus)} GPUs, {count} asked")
    links = [link for link in description.get("nvlinks", []) if link[0] < count and link[1] < count]
    return {**description, "gpus": gpus[:count], "nvlinks": links}


def builtin_names() -> list[str]:
    return sorted(p.stem for p in DESCRIPTIONS.glob("*.json"))


def parse_cpu_list(text: str) -> list[int]:
    """'0-3,8' -> [0, 1, 2, 3, 8]."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        low, _, high = part.partition("-")
        out.extend(range(int(low), int(high or low) + 1))
    return out


class FakeNvml:
    """The subset of pynvml that shoal's discovery calls, answered from a description."""

    NVMLError = NVMLError

    def __init__(self, description: dict[str, Any]) -> None:
        self.description = description
        self._gpus: list[dict[str, Any]] = list(description.get("gpus", []))
        self._switch: dict[str, Any] | None = description.get("nvswitch")
        self._links: dict[int, list[int]] = {i: [] for i in range(len(self._gpus))}
        for a, b, count in description.get("nvlinks", []):
            self._links[a].extend([b] * int(count))
            self._links[b].extend([a] * int(count))
        self._initialized = False
        for key, value in list(globals().items()):  # pynvml's constants, read off the object too
            if key.startswith("NVML_"):
                setattr(self, key, value)

    @classmethod
    def load(cls, name_or_path: str) -> FakeNvml:
        """A description by name or path, `NAME:N` for its first N GPUs (ValueError if it has fewer)."""
        name, count = split_count(name_or_path)
        with open(description_path(name), encoding="utf-8") as fh:
            description = json.load(fh)
        return cls(description if count is None else first_gpus(description, count))

    # -- library -----------------------------------------------------------------------------
    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        self._initialized = True

    def nvmlShutdown(self) -> None:  # noqa: N802
        self._initialized = False

    def nvmlSystemGetDriverVersion(self) -> str:  # noqa: N802
        return str(self.description.get("driver_version", "0"))

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return len(self._gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Handle:  # noqa: N802
        if not 0 <= index < len(self._gpus):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return Handle(index)

    # -- one device --------------------------------------------------------------------------
    def _gpu(self, handle: Handle) -> dict[str, Any]:
        return self._gpus[handle.index]

    def nvmlDeviceGetName(self, handle: Handle) -> str:  # noqa: N802
        return str(self._gpu(handle)["name"])

    def nvmlDeviceGetUUID(self, handle: Handle) -> str:  # noqa: N802
        return str(self._gpu(handle)["uuid"])

    def nvmlDeviceGetMinorNumber(self, handle: Handle) -> int:  # noqa: N802
        return int(self._gpu(handle)["minor"])

    def _usage(self, handle: Handle, key: str) -> int:
        """One usage value of a GPU: the override file's, else the description's, else a default;
        null in either answers NOT_SUPPORTED."""
        gpu = self._gpu(handle)
        value = gpu.get(key, _DEFAULTS[key])
        path = os.environ.get(USAGE_ENV, "")
        if path:
            try:
                with open(path, encoding="utf-8") as fh:
                    override = json.load(fh).get(str(gpu["minor"]), {})
            except (OSError, ValueError, AttributeError):
                override = {}
            if isinstance(override, dict) and key in override:
                value = override[key]
        if value is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return int(value)

    def nvmlDeviceGetMemoryInfo(self, handle: Handle) -> Memory:  # noqa: N802
        total = int(self._gpu(handle)["memory_mb"]) << 20
        used = min(total, self._usage(handle, "memory_used_mb") << 20)
        return Memory(total=total, free=total - used, used=used)

    def nvmlDeviceGetPciInfo(self, handle: Handle) -> PciInfo:  # noqa: N802
        bus_id = str(self._gpu(handle)["pci_bus_id"])
        return PciInfo(busId=bus_id, bus=int(bus_id.split(":")[1], 16))

    def nvmlDeviceGetNumaNodeId(self, handle: Handle) -> int:  # noqa: N802
        return int(self._gpu(handle).get("numa_node", -1))

    def nvmlDeviceGetCpuAffinity(self, handle: Handle, cpu_set_size: int) -> list[int]:  # noqa: N802
        """The affine CPUs as 64-bit words, lowest CPU in the lowest bit of the first word."""
        words = [0] * cpu_set_size
        for cpu in parse_cpu_list(str(self._gpu(handle).get("cpu_affinity", ""))):
            if cpu // 64 < cpu_set_size:
                words[cpu // 64] |= 1 << (cpu % 64)
        return words

    def nvmlDeviceGetMigMode(self, handle: Handle) -> list[int]:  # noqa: N802
        mode = NVML_FEATURE_ENABLED if self._gpu(handle).get("mig") else NVML_FEATURE_DISABLED
        return [mode, mode]

    def nvmlDeviceGetUtilizationRates(self, handle: Handle) -> Utilization:  # noqa: N802
        return Utilization(gpu=self._usage(handle, "utilization"), memory=0)

    def nvmlDeviceGetTemperature(self, handle: Handle, sensor: int) -> int:  # noqa: N802
        if sensor != NVML_TEMPERATURE_GPU:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return self._usage(handle, "temperature_c")

    def nvmlDeviceGetPowerUsage(self, handle: Handle) -> int:  # noqa: N802
        """Milliwatts, as NVML answers."""
        return self._usage(handle, "power_w") * 1000

    def nvmlDeviceGetTotalEccErrors(self, handle: Handle, error_type: int, counter_type: int) -> int:  # noqa: N802
        if error_type != NVML_MEMORY_ERROR_TYPE_UNCORRECTED or counter_type != NVML_VOLATILE_ECC:
            return 0
        return self._usage(handle, "ecc_errors")

    # -- links -------------------------------------------------------------------------------
    def _link_target(self, handle: Handle, link: int) -> tuple[int, str]:
        """(device type, remote PCI bus id) of one NVLink, NOT_SUPPORTED when it is not there."""
        if self._switch:
            switches = list(self._switch.get("bus_ids", [])) or ["00000000:05:00.0"]
            if link < int(self._switch.get("links_per_gpu", 18)):
                return NVML_NVLINK_DEVICE_TYPE_SWITCH, switches[link % len(switches)]
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        peers = self._links[handle.index]
        if link < len(peers):
            return NVML_NVLINK_DEVICE_TYPE_GPU, str(self._gpus[peers[link]]["pci_bus_id"])
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)

    def nvmlDeviceGetNvLinkState(self, handle: Handle, link: int) -> int:  # noqa: N802
        self._link_target(handle, link)
        return NVML_FEATURE_ENABLED

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: Handle, link: int) -> int:  # noqa: N802
        return self._link_target(handle, link)[0]

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: Handle, link: int) -> PciInfo:  # noqa: N802
        bus_id = self._link_target(handle, link)[1]
        return PciInfo(busId=bus_id, bus=int(bus_id.split(":")[1], 16))

    def nvmlDeviceGetTopologyCommonAncestor(self, first: Handle, second: Handle) -> int:  # noqa: N802
        a, b = self._gpu(first), self._gpu(second)
        if first.index == second.index:
            return NVML_TOPOLOGY_INTERNAL
        if a.get("pcie_switch") is not None and a.get("pcie_switch") == b.get("pcie_switch"):
            return NVML_TOPOLOGY_SINGLE
        if a.get("numa_node") == b.get("numa_node"):
            return NVML_TOPOLOGY_NODE
        return NVML_TOPOLOGY_SYSTEM
