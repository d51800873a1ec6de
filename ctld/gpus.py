"""GPUs as the controller knows them: what a node reported vs its slurm.conf Gres=, and the
scheduler's view of each GPU's topology (NVLink clique, PCIe switch, NUMA node, affine CPUs).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from ctld.sched.model import Gpu
from shoal.conf import GresSpec
from shoal.v1 import cluster_pb2


def _cpu_list(text: str) -> frozenset[int]:
    out: set[int] = set()
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        if low.isdigit() and (not high or high.isdigit()):
            out.update(range(int(low), int(high or low) + 1))
    return frozenset(out)


def link_groups(devices: Sequence[cluster_pb2.GpuDevice]) -> dict[int, int]:
    """GPU index -> NVLink clique id (the lowest index of its connected component); -1 when unlinked."""
    parent = {d.index: d.index for d in devices}

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    linked: set[int] = set()
    for d in devices:
        for peer in d.nvlink_peers:
            if peer in parent and peer != d.index:
                linked.update((d.index, peer))
                a, b = root(d.index), root(peer)
                parent[max(a, b)] = min(a, b)
    return {i: root(i) if i in linked else -1 for i in parent}


# A node's GPUs as the scheduler sees them only change when the node reports new hardware, but every
# snapshot (each submission's "could it ever run", each scheduling pass) asked for them again: 0.24 ms
# per 8-GPU node, a few ms of ctld's CPU per job on a small cluster. Kept by what they were built from.
_SNAPSHOTS: dict[tuple[tuple[bytes, ...], tuple[tuple[int, str], ...]], tuple[Gpu, ...]] = {}
_SNAPSHOTS_MAX = 4096


def snapshot_gpus(devices: Sequence[cluster_pb2.GpuDevice], types: Mapping[int, str]) -> tuple[Gpu, ...]:
    """The scheduler's GPUs of one node: reported devices with topology, else the configured types."""
    key = (tuple(d.SerializeToString(deterministic=True) for d in devices), tuple(sorted(types.items())))
    found = _SNAPSHOTS.get(key)
    if found is None:
        found = _build_snapshot(devices, types)
        if len(_SNAPSHOTS) >= _SNAPSHOTS_MAX:
            _SNAPSHOTS.clear()
        _SNAPSHOTS[key] = found
    return found


def _build_snapshot(devices: Sequence[cluster_pb2.GpuDevice], types: Mapping[int, str]) -> tuple[Gpu, ...]:
    if not devices:
        return tuple(Gpu(i, t) for i, t in sorted(types.items()))
    groups = link_groups(devices)
    switches: dict[str, int] = {}
    out = []
    for d in sorted(devices, key=lambda d: d.index):
        switch = switches.setdefault(d.pcie_switch, len(switches)) if d.pcie_switch else -1
        out.append(
            Gpu(
                index=d.index,
                type=types.get(d.index, d.type),
                numa_node=d.numa_node,
                link_group=groups.get(d.index, -1),
                pcie_switch=switch,
                cpus=_cpu_list(d.cpu_affinity),
            )
        )
    return tuple(out)


def _by_type(pairs: Iterable[tuple[str, int]]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for gpu_type, count in pairs:
        counts[gpu_type] += count
    return counts


def gres_difference(configured: Sequence[GresSpec], reported: Sequence[cluster_pb2.GpuDevice]) -> list[str]:
    """Why a node's GPUs do not match its Gres= (empty when they do), in Slurm's drain-reason style.

    An untyped Gres=gpu:N matches any types; a typed one must be reported with that type.
    """
    want = _by_type((g.type or "", g.count) for g in configured if g.name == "gpu")
    have = _by_type((d.type, 1) for d in reported)
    total_want, total_have = sum(want.values()), sum(have.values())
    problems = []
    if total_have < total_want:
        problems.append(f"gres/gpu count reported lower than configured ({total_have} < {total_want})")
    for gpu_type, count in sorted(want.items()):
        if gpu_type and have.get(gpu_type, 0) < count and total_have >= total_want:
            found = ",".join(f"gpu:{t or '(untyped)'}:{n}" for t, n in sorted(have.items()))
            problems.append(
                f"gres/gpu:{gpu_type} count reported lower than configured "
                f"({have.get(gpu_type, 0)} < {count}; found {found})"
            )
    return problems
