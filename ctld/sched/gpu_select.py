"""Which GPUs of a node a job gets, which cores go with them, and which node to try first.

Inside a node the best-connected set wins: fewest NVLink cliques (an NVSwitch is one clique),
then fewest PCIe switches, then fewest NUMA nodes. Among equally connected sets the one that
breaks the fewest still-free groups wins (a 1-GPU job takes the GPU whose NVLink partner is
already busy), so well-connected sets stay whole for later jobs. Across nodes, GPU jobs go to the
node with the fewest free GPUs that still fits (best fit), so whole 8-GPU nodes stay free for big
jobs. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache
from itertools import combinations
from math import comb

from ctld.sched.model import Gpu

_MAX_COMBINATIONS = 5000  # beyond this many candidate sets, build the set greedily


def choose(free: Sequence[Gpu], count: int) -> tuple[Gpu, ...] | None:
    """The best `count` GPUs among `free` (sorted by index), or None when too few are free."""
    if count <= 0:
        return ()
    if count > len(free):
        return None
    return _choose(tuple(sorted(free, key=lambda g: g.index)), count)


@lru_cache(maxsize=8192)
def _choose(free: tuple[Gpu, ...], count: int) -> tuple[Gpu, ...]:
    if count == len(free):
        return free
    if not _has_topology(free):
        return free[:count]  # nothing to tell the GPUs apart: lowest indices
    if comb(len(free), count) > _MAX_COMBINATIONS:
        return _greedy(free, count)
    return min(combinations(free, count), key=lambda chosen: score(chosen, free))


def _has_topology(gpus: Iterable[Gpu]) -> bool:
    return any(g.link_group >= 0 or g.pcie_switch >= 0 or g.numa_node >= 0 for g in gpus)


def _spread(values: Iterable[int]) -> int:
    """How many groups a set touches; an unknown group (-1) counts once per GPU."""
    seen: set[int] = set()
    unknown = 0
    for value in values:
        if value < 0:
            unknown += 1
        else:
            seen.add(value)
    return len(seen) + unknown


def _left_in_touched(chosen: Sequence[Gpu], free: Sequence[Gpu], attr: str) -> int:
    """Free GPUs that stay behind in the groups the chosen set touches (fewer = better packing)."""
    groups = {getattr(g, attr) for g in chosen if getattr(g, attr) >= 0}
    picked = {g.index for g in chosen}
    return sum(1 for g in free if g.index not in picked and getattr(g, attr) in groups)


def score(chosen: Sequence[Gpu], free: Sequence[Gpu]) -> tuple[int, ...]:
    """Lower is better: connectivity first, then how little of the free topology it breaks."""
    return (
        _spread(g.link_group for g in chosen),
        _spread(g.pcie_switch for g in chosen),
        _spread(g.numa_node for g in chosen),
        _left_in_touched(chosen, free, "link_group"),
        _left_in_touched(chosen, free, "pcie_switch"),
        _left_in_touched(chosen, free, "numa_node"),
        *sorted(g.index for g in chosen),
    )


def _greedy(free: tuple[Gpu, ...], count: int) -> tuple[Gpu, ...]:
    """Fill from the biggest link group, then the GPUs closest to what is already chosen."""
    sizes = Counter(g.link_group for g in free if g.link_group >= 0)
    chosen: list[Gpu] = []
    rest = list(free)
    while len(chosen) < count:
        best = min(rest, key=lambda g: _closeness(g, chosen, sizes))
        chosen.append(best)
        rest.remove(best)
    return tuple(sorted(chosen, key=lambda g: g.index))


def _closeness(gpu: Gpu, chosen: Sequence[Gpu], sizes: Counter[int]) -> tuple[int, ...]:
    if not chosen:
        return (-sizes.get(gpu.link_group, 0), gpu.index)

    def away(attr: str) -> int:
        value = getattr(gpu, attr)
        return 0 if value >= 0 and any(getattr(c, attr) == value for c in chosen) else 1

    return (away("link_group"), away("pcie_switch"), away("numa_node"), gpu.index)


def choose_per_socket(free: Sequence[Gpu], per_socket: int, sockets: int) -> tuple[Gpu, ...] | None:
    """`per_socket` GPUs from each of `sockets` sockets (a GPU's NUMA node stands for its socket).

    Sockets with the fewest free GPUs that still suffice go first (best fit, lowest number on a
    tie); None when too few sockets have enough free. GPUs without a known socket count as one
    socket of their own, so a node without topology is only asked for the total.
    """
    if not any(g.numa_node >= 0 for g in free):
        return choose(free, per_socket * sockets)
    groups: dict[int, list[Gpu]] = {}
    for gpu in free:
        groups.setdefault(gpu.numa_node, []).append(gpu)
    usable = sorted((len(gs), numa) for numa, gs in groups.items() if numa >= 0 and len(gs) >= per_socket)
    if len(usable) < sockets:
        return None
    chosen: list[Gpu] = []
    for _, numa in usable[:sockets]:
        chosen.extend(choose(groups[numa], per_socket) or ())
    return tuple(sorted(chosen, key=lambda g: g.index))


def affine_cpus(chosen: Iterable[Gpu]) -> frozenset[int]:
    """CPUs close to the chosen GPUs (empty when their affinity is unknown)."""
    out: frozenset[int] = frozenset()
    for gpu in chosen:
        out |= gpu.cpus
    return out


def node_order_key(free_gpus: int, needed: int) -> int:
    """Best fit across nodes: a node whose free GPUs barely cover the request sorts first."""
    return free_gpus - needed if free_gpus >= needed else 1 << 20
