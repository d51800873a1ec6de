"""Which nodes placement still needs to look at: per-cycle indexes kept inside an Overlay.

A cycle tries thousands of jobs against the same nodes. Scanning every node for every job (and
re-sorting them by free GPUs for every GPU job) made a cycle cost O(jobs x nodes). These indexes
answer the same question from counts kept up to date as the overlay grows:

- a `Pool` is a partition's usable nodes in the order placement tries them, built once per snapshot;
- a `Live` set holds the nodes of a pool that still pass a `Need`'s count check (enough free CPUs
  and GPUs of the type, shareable or idle), grouped by placement's order key (weight, then best fit
  on free GPUs), each group in pool order. A node that fails the check can hold no slot of the job,
  so skipping it changes no decision; an overlay only ever takes resources away, so a node is
  re-checked only when a Start touches it.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctld.sched import gpu_select
from ctld.sched.model import Gpu, Node

if TYPE_CHECKING:
    from ctld.sched.placement import Free


@dataclass(frozen=True, slots=True)
class Pool:
    """A partition's usable nodes (up, not excluded, with the features) in placement's try order."""

    nodes: tuple[Node, ...]
    position: dict[str, int]

    @staticmethod
    def of(nodes: list[Node]) -> Pool:
        return Pool(tuple(nodes), {node.name: i for i, node in enumerate(nodes)})


@dataclass(frozen=True, slots=True)
class Need:
    """The least a node must still give for one job to take any slot there, counts only.

    `best_fit` is the GPU count nodes are ordered against (gpu_select.node_order_key); 0 keeps the
    configured order (jobs without GPUs).
    """

    exclusive: bool
    cpus: int
    gpus: int
    gpu_type: str
    best_fit: int


FreeOf = Callable[[Node], "Free"]
GpuCount = Callable[[Node, str], int]


class Live:
    """The nodes of `pool` that may still fit `need`, grouped and ordered as placement tries them."""

    __slots__ = ("pool", "need", "_groups", "_where")

    def __init__(self, pool: Pool, need: Need, free_of: FreeOf, gpu_count: GpuCount) -> None:
        self.pool = pool
        self.need = need
        self._groups: dict[tuple[int, int], list[int]] = {}
        self._where: dict[int, tuple[int, int]] = {}
        for pos, node in enumerate(pool.nodes):
            key = self._key(node, free_of(node), gpu_count)
            if key is not None:
                self._groups.setdefault(key, []).append(pos)
                self._where[pos] = key

    def copy(self) -> Live:
        twin = Live.__new__(Live)
        twin.pool = self.pool
        twin.need = self.need
        twin._groups = {key: list(positions) for key, positions in self._groups.items()}
        twin._where = dict(self._where)
        return twin

    def nodes(self) -> Iterator[Node]:
        """The live nodes in placement's order: by (weight, best-fit key), then as in the pool."""
        for key in sorted(self._groups):
            for pos in self._groups[key]:
                yield self.pool.nodes[pos]

    def refresh(self, name: str, free_of: FreeOf, gpu_count: GpuCount) -> None:
        """Re-check one node after a Start touched it."""
        pos = self.pool.position.get(name)
        if pos is None:
            return
        node = self.pool.nodes[pos]
        old = self._where.pop(pos, None)
        if old is not None:
            group = self._groups[old]
            del group[bisect.bisect_left(group, pos)]
            if not group:
                del self._groups[old]
        key = self._key(node, free_of(node), gpu_count)
        if key is not None:
            bisect.insort(self._groups.setdefault(key, []), pos)
            self._where[pos] = key

    def _key(self, node: Node, free: Free, gpu_count: GpuCount) -> tuple[int, int] | None:
        """The node's order key, or None when no slot of the job can fit there (counts alone)."""
        need = self.need
        if need.exclusive:
            if not free.idle or node.cpus < need.cpus or _typed(node.gpus, need.gpu_type) < need.gpus:
                return None
            gpus = len(node.gpus)
        else:
            if (
                not free.shareable
                or len(free.cpu_ids) < need.cpus
                or _typed(free.gpus, need.gpu_type) < need.gpus
            ):
                return None
            gpus = gpu_count(node, need.gpu_type) if need.best_fit else 0
        return node.weight, gpu_select.node_order_key(gpus, need.best_fit) if need.best_fit else 0


def _typed(gpus: tuple[Gpu, ...], gpu_type: str) -> int:
    if not gpu_type:
        return len(gpus)
    return sum(1 for g in gpus if g.type == gpu_type)
