"""Where a job runs: one placement function for Slurm's three questions.

- now: `place()` against the snapshot plus an `Overlay` of this cycle's tentative starts;
- ever: `could_ever_run()` against every node's configured capacity (refuse at submit);
- when: `earliest_start()` releases running jobs in order of their end until the job fits.

Allocation is all-or-nothing: `place()` returns a Start covering every node the job needs, or a
reason word; nothing is recorded until the caller adds the Start to its overlay.
"""

from __future__ import annotations

import dataclasses
import operator
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ctld.sched import access, gpu_select, limits, memo, reservations, topology
from ctld.sched.freeindex import Live, Need, Pool
from ctld.sched.model import (
    Gpu,
    JobRequest,
    Node,
    NodeAllocation,
    NodeUsage,
    Partition,
    Pend,
    Refusal,
    RunningJob,
    Snapshot,
    Start,
    Unresolvable,
    Verdict,
)
from ctld.sched.reasons import REQ_NODE_NOT_AVAIL, RESERVED_FOR_MAINT, RESOURCES
from ctld.sched.resources import (
    cpus_for,
    even_spread,
    gpus_for,
    is_exclusive,
    job_cpus,
    mem_for,
    node_count_range,
    sockets_for,
    total_tasks,
    wants_gpus,
)

NODE_CONFIG_UNAVAILABLE = "Requested node configuration is not available"
CPUS_PER_NODE_UNSATISFIABLE = "CPU count per node can not be satisfied"
MEMORY_UNSATISFIABLE = "Memory specification can not be satisfied"
INVALID_GRES = "Invalid generic resource (gres) specification"
INVALID_NODE_NAME = "Invalid node name specified"
INVALID_NODE_COUNT = "Node count specification invalid"
INVALID_PARTITION = "Invalid partition name specified"


@dataclass(frozen=True, slots=True)
class _Taken:
    cpu_ids: frozenset[int] = frozenset()
    mem_mb: int = 0
    gpu_indices: frozenset[int] = frozenset()
    exclusive: bool = False
    jobs: int = 0
    users: frozenset[int] = frozenset()
    user_exclusive: bool = False


@dataclass(frozen=True, slots=True)
class Free:
    """What a node can still give: capacity minus running jobs minus this cycle's starts."""

    cpu_ids: frozenset[int]
    mem_mb: int
    gpus: tuple[Gpu, ...]
    idle: bool  # nothing allocated at all: an exclusive job may take it
    shareable: bool  # not held exclusively by anyone
    users: frozenset[int] = frozenset()  # uids of the jobs on it
    user_exclusive: bool = False  # held by an ExclusiveUser partition's job: no other user may join


class Overlay:
    """Tentative allocations on top of a Snapshot (Volcano's Statement).

    A cycle adds each Start it decides; `copy()` is cheap (dicts of immutable values), so a
    what-if can be tried on a copy and kept or dropped whole. What a node can still give is
    computed once per node state and kept until a Start touches that node (a cycle asks for the
    same node's Free for every job it tries).

    For the snapshot it is used with, it also keeps what spares placement a scan of every node
    (freeindex.py): each partition's usable nodes and their free CPUs in all, the nodes each job
    shape may still fit, and the shapes that already failed since the last Start (the same request
    on the same state gets the same answer: Slurm's "same request already failed" memo).
    """

    __slots__ = ("_taken", "_free", "_snap", "_order", "_pools", "_pool_cpus", "_live", "_failed")

    def __init__(self) -> None:
        self._taken: dict[str, _Taken] = {}
        self._free: dict[str, tuple[Node, Free]] = {}
        self._snap: Snapshot | None = None
        self._order: dict[str, int] = {}
        self._pools: dict[tuple[str, frozenset[str], frozenset[str]], Pool] = {}
        self._pool_cpus: dict[int, tuple[Pool, int]] = {}
        self._live: dict[tuple[int, Need], Live] = {}
        self._failed: dict[tuple[object, ...], str] = {}

    def add(self, start: Start) -> None:
        self.add_all((start,))

    def add_all(self, starts: Iterable[Start]) -> None:
        """Add several Starts at once: one update per node they touch."""
        touched: dict[str, list[tuple[NodeAllocation, Start]]] = {}
        for start in starts:
            for alloc in start.allocation:
                touched.setdefault(alloc.node, []).append((alloc, start))
        if not touched:
            return
        self._failed.clear()
        counted = [
            (key, pool, [pool.nodes[pool.position[name]] for name in touched if name in pool.position])
            for key, (pool, _) in self._pool_cpus.items()
        ]
        before = [sum(len(self.free(node).cpu_ids) for node in nodes) for _, _, nodes in counted]
        for name, allocs in touched.items():
            taken = self._taken.get(name, _Taken())
            self._taken[name] = _Taken(
                cpu_ids=taken.cpu_ids.union(*(alloc.cpu_ids for alloc, _ in allocs)),
                mem_mb=taken.mem_mb + sum(alloc.mem_mb for alloc, _ in allocs),
                gpu_indices=taken.gpu_indices.union(*(alloc.gpu_indices for alloc, _ in allocs)),
                exclusive=taken.exclusive or any(start.exclusive for _, start in allocs),
                jobs=taken.jobs + len(allocs),
                users=taken.users.union(start.user_id for _, start in allocs),
                user_exclusive=taken.user_exclusive or any(start.user_exclusive for _, start in allocs),
            )
            self._free.pop(name, None)
        for (key, pool, nodes), old in zip(counted, before, strict=True):
            after = sum(len(self.free(node).cpu_ids) for node in nodes)
            self._pool_cpus[key] = (pool, self._pool_cpus[key][1] - old + after)
        for live in self._live.values():
            for name in touched:
                live.refresh(name, self.free, self.free_gpu_count)

    def free_gpu_count(self, node: Node, gpu_type: str) -> int:
        """Free GPUs of `gpu_type` ("" = any) on `node`: a cheap part of free() for node ordering."""
        taken = self._taken.get(node.name)
        used = node.usage.gpu_indices | taken.gpu_indices if taken else node.usage.gpu_indices
        if not gpu_type:
            return len(node.gpus) - len(used)
        return sum(1 for g in node.gpus if g.index not in used and g.type == gpu_type)

    def copy(self) -> Overlay:
        twin = Overlay()
        twin._taken = dict(self._taken)
        twin._free = dict(self._free)
        twin._snap = self._snap
        twin._order = self._order
        twin._pools = self._pools
        twin._pool_cpus = dict(self._pool_cpus)
        twin._live = {key: live.copy() for key, live in self._live.items()}
        twin._failed = dict(self._failed)
        return twin

    def free(self, node: Node) -> Free:
        cached = self._free.get(node.name)
        if cached is not None and cached[0] is node:
            return cached[1]
        taken = self._taken.get(node.name, _Taken())
        usage = node.usage
        used_gpus = usage.gpu_indices | taken.gpu_indices
        free = Free(
            cpu_ids=_all_cpus(node.cpus) - usage.cpu_ids - taken.cpu_ids,
            mem_mb=node.real_memory_mb - usage.mem_mb - taken.mem_mb,
            gpus=tuple(g for g in node.gpus if g.index not in used_gpus),
            idle=_usage_empty(usage) and taken.jobs == 0,
            shareable=not (usage.exclusive or taken.exclusive),
            users=usage.users | taken.users if taken.users else usage.users,
            user_exclusive=usage.user_exclusive or taken.user_exclusive,
        )
        self._free[node.name] = (node, free)
        return free

    # ---- per-snapshot indexes (freeindex.py)

    def _bind(self, snap: Snapshot) -> None:
        """Start the indexes afresh when used with another snapshot than last time."""
        if self._snap is snap:
            return
        self._snap = snap
        self._order = {node.name: i for i, node in enumerate(snap.nodes)}
        self._pools = {}
        self._pool_cpus = {}
        self._live = {}
        self._failed = {}

    def order(self, snap: Snapshot) -> dict[str, int]:
        """Each node's position in the snapshot (allocations are listed in this order)."""
        self._bind(snap)
        return self._order

    def pool(self, job: JobRequest, part: Partition, snap: Snapshot) -> Pool:
        """The usable nodes of `part` for a job without -w, in the order they are tried."""
        self._bind(snap)
        key = (part.name, job.excluded_nodes, job.features)
        found = self._pools.get(key)
        if found is None:
            nodes = _candidates(job, part, snap)
            assert not isinstance(nodes, str)  # only -w nodes can be missing
            found = self._pools[key] = Pool.of(nodes)
        return found

    def pool_free_cpus(self, pool: Pool) -> int:
        """Free CPUs over the pool's nodes, kept up to date by add()."""
        found = self._pool_cpus.get(id(pool))
        if found is None:
            found = self._pool_cpus[id(pool)] = (
                pool,
                sum(len(self.free(node).cpu_ids) for node in pool.nodes),
            )
        return found[1]

    def live(self, pool: Pool, need: Need) -> Live:
        """The pool's nodes that may still fit `need`, kept up to date by add()."""
        key = (id(pool), need)
        found = self._live.get(key)
        if found is None:
            found = self._live[key] = Live(pool, need, self.free, self.free_gpu_count)
        return found

    def failed(self, snap: Snapshot, shape: tuple[object, ...]) -> str | None:
        """The reason `shape` failed with since the last Start (None: not tried, or it fitted)."""
        self._bind(snap)
        return self._failed.get(shape)

    def remember_failure(self, snap: Snapshot, shape: tuple[object, ...], reason: str) -> None:
        self._bind(snap)
        self._failed[shape] = reason


_ALL_CPUS: dict[int, frozenset[int]] = {}


def _all_cpus(count: int) -> frozenset[int]:
    """frozenset(range(count)), built once per node size."""
    found = _ALL_CPUS.get(count)
    if found is None:
        found = _ALL_CPUS[count] = frozenset(range(count))
    return found


def _usage_empty(usage: NodeUsage) -> bool:
    return usage.jobs == 0 and not usage.cpu_ids and usage.mem_mb == 0 and not usage.gpu_indices


# ---------------------------------------------------------------- now


SHORTCUTS = True  # the indexes and the failure memo (tests turn them off to compare decisions)
INDEX_MIN_NODES = 16  # below this many nodes a plain scan is cheaper than keeping the indexes

# JobRequest fields place() does not read: jobs equal in every other field are one request shape.
_NOT_SHAPE = frozenset(
    {
        "job_id",
        "name",
        "submit_time",
        "priority",
        "admin_priority",
        "nice",
        "begin_time",
        "held_user",
        "held_admin",
        "dependency",
        "array_job_id",
        "array_task_id",
        "array_max_running",
    }
)
_shape_of = operator.attrgetter(*(f.name for f in dataclasses.fields(JobRequest) if f.name not in _NOT_SHAPE))


def place(
    job: JobRequest, part: Partition, snap: Snapshot, overlay: Overlay, at: int | None = None
) -> Verdict:
    """Allocate every node the job needs in `part`, or say why not: Pend (busy when what is free now is
    too little; a reservation's nodes otherwise), or Unresolvable (the nodes it names cannot be used).

    `at` is when the job would start: reservations then decide which nodes it may use over its
    whole run (None = ignore reservations, for the configured-capacity question).
    """
    found = _place_or_why(job, part, snap, overlay, at)
    return found if isinstance(found, Start) else _verdict(found)


def _verdict(word: str) -> Pend | Unresolvable:
    """The verdict of placement's reason word (the words are made in _place and _candidates)."""
    known = _VERDICTS.get(word)
    if known is None:
        known = Unresolvable(word)
        _VERDICTS[word] = known
    return known


_VERDICTS: dict[str, Pend | Unresolvable] = {
    RESOURCES: Pend(RESOURCES, busy=True),
    **{word: Pend(word) for word in reservations.WAIT_REASONS},
}


def _place_or_why(
    job: JobRequest, part: Partition, snap: Snapshot, overlay: Overlay, at: int | None
) -> Start | str:
    gate = None
    if at is not None and snap.reservations:
        end = limits.job_end(at, limits.effective_time_limit(job, part))
        gate = reservations.gate(job, snap.reservations, at, end)
    if not SHORTCUTS:
        return _place(job, part, snap, overlay, gate)
    shape = (part.name, gate, _shape_of(job))
    known = overlay.failed(snap, shape)
    if known is not None:
        return known
    found = _place(job, part, snap, overlay, gate)
    if isinstance(found, str):
        overlay.remember_failure(snap, shape, found)
    return found


def _place(
    job: JobRequest, part: Partition, snap: Snapshot, overlay: Overlay, gate: reservations.Gate | None
) -> Start | str:
    fewest, most = node_count_range(job)
    placer = _Placer(job, part, snap, overlay)
    nodes: Iterable[Node]
    busy = RESOURCES
    if (
        SHORTCUTS
        and gate is None
        and len(snap.nodes) >= INDEX_MIN_NODES
        and not job.required_nodes
        and snap.topology is None
    ):
        # the indexes: nodes that cannot hold the job's smallest slot are never looked at. A Pool is
        # _candidates() for a job without -w, kept per (partition, -x, -C): a filter that depends on
        # anything else (the job's user, its start time, a reservation) must take the plain path below.
        pool = overlay.pool(job, part, snap)
        free_cpus = overlay.pool_free_cpus(pool)
        nodes = overlay.live(pool, placer.need(fewest, most)).nodes()
    else:
        candidates = _candidates(job, part, snap, gate)
        if isinstance(candidates, str):
            return candidates
        if gate is not None and len(candidates) < fewest and gate.closed.intersection(part.nodes):
            busy = RESERVED_FOR_MAINT  # Slurm's word whenever reserved nodes leave too few
        free_cpus = sum(len(overlay.free(node).cpu_ids) for node in candidates)
        nodes = placer.gpu_packing_order(candidates) if wants_gpus(job) else candidates
    if not is_exclusive(job, part):
        # fewer free CPUs than the job needs in all: nothing to try (Free is kept per overlay)
        if free_cpus < job_cpus(job):
            return busy
    allocs = None
    for group in _switch_groups(job, snap, placer, nodes, fewest):
        if fewest == most:
            allocs = placer.fixed(group, fewest)
        elif job.spread_nodes > fewest:
            allocs = placer.spread(group, fewest, min(most, job.spread_nodes))
        else:
            allocs = placer.flexible(group, fewest, most)
        if allocs is not None:
            break
    if allocs is None:
        return busy
    order = overlay.order(snap)
    return Start(
        job_id=job.job_id,
        partition=part.name,
        time_limit_min=limits.effective_time_limit(job, part),
        allocation=tuple(sorted(allocs, key=lambda a: order[a.node])),
        exclusive=is_exclusive(job, part),
        user_id=job.user_id,
        user_exclusive=part.exclusive_user,
    )


def _candidates(
    job: JobRequest, part: Partition, snap: Snapshot, gate: reservations.Gate | None = None
) -> list[Node] | str:
    """Usable nodes in the order they are tried: -w nodes first, then by weight, then as configured."""
    in_part = set(part.nodes)
    usable = [
        node
        for node in snap.nodes
        if node.name in in_part
        and node.available
        and node.name not in job.excluded_nodes
        and job.features <= node.features
        and (gate is None or gate.admits(node.name))
    ]
    usable_names = {node.name for node in usable}
    if not job.required_nodes <= usable_names:
        return (gate.reason_for(job.required_nodes) if gate else None) or REQ_NODE_NOT_AVAIL
    usable.sort(key=lambda node: (node.name not in job.required_nodes, node.weight))
    return usable


def usable_nodes(job: JobRequest, part: Partition, snap: Snapshot) -> list[Node]:
    """The nodes of `part` that placement tries for the job (up, not -x, with its -C features; only
    its -w nodes when it names some), whatever they have free; [] when a -w node is unusable."""
    found = _candidates(job, part, snap)
    if isinstance(found, str):
        return []
    return [n for n in found if n.name in job.required_nodes] if job.required_nodes else found


def _switch_groups(
    job: JobRequest, snap: Snapshot, placer: _Placer, nodes: Iterable[Node], fewest: int
) -> Iterator[Iterable[Node]]:
    """The node lists to try (topology.py): one list, unless topology/tree narrows a multi-node job."""
    if snap.topology is None or job.required_nodes:
        return iter((nodes,))
    tasks = even_spread(total_tasks(job, fewest), fewest)[-1]
    gpus = even_spread(job.gpus.total, fewest)[-1]

    def usable(node: Node) -> bool:
        return placer.allocate(node, placer.overlay.free(node), tasks, gpus) is not None

    return topology.node_groups(list(nodes), fewest, snap.topology, usable, job.max_switches)


class _Placer:
    """Fits one job's per-node slots onto candidate nodes."""

    def __init__(self, job: JobRequest, part: Partition, snap: Snapshot, overlay: Overlay) -> None:
        self.job = job
        self.part = part
        self.snap = snap
        self.overlay = overlay
        self.exclusive = is_exclusive(job, part)

    def need(self, fewest: int, most: int) -> Need:
        """The least any slot of the job needs on one node (freeindex.py), and the GPU best-fit count."""
        job = self.job
        if fewest == most:
            tasks = even_spread(total_tasks(job, fewest), fewest)[-1]
            gpus = gpus_for(job, tasks, even_spread(job.gpus.total, fewest)[-1])
        else:
            tasks, gpus = 1, gpus_for(job, 1, 0)
        best_fit = (gpus_for(job, 1, 0) or 1) if wants_gpus(job) else 0
        return Need(self.exclusive, cpus_for(job, tasks, gpus), gpus, job.gpus.type, best_fit)

    def fixed(self, nodes: Iterable[Node], count: int) -> list[NodeAllocation] | None:
        """Exactly `count` nodes; tasks and -G GPUs spread evenly, the remainder on the first slots.

        Slots are nested (each is at least as big as the next), so giving each node the biggest
        open slot it fits finds a full assignment whenever one exists.
        """
        job = self.job
        tasks = even_spread(total_tasks(job, count), count)
        if job.ntasks_per_node and tasks[0] > job.ntasks_per_node:
            return None
        slots = list(zip(tasks, even_spread(job.gpus.total, count), strict=True))
        filled: list[NodeAllocation | None] = [None] * count
        for node in nodes:
            if all(a is not None for a in filled):
                break
            free = self.overlay.free(node)
            tried: set[tuple[int, int]] = set()
            placed = False
            for i, slot in enumerate(slots):
                if filled[i] is not None or slot in tried:
                    continue
                tried.add(slot)
                alloc = self.allocate(node, free, slot[0], slot[1])
                if alloc is not None:
                    filled[i] = alloc
                    placed = True
                    break
            if not placed and node.name in job.required_nodes:
                return None
        if any(a is None for a in filled):
            return None
        return self.fill_first([a for a in filled if a is not None])

    def fill_first(self, allocs: list[NodeAllocation]) -> list[NodeAllocation]:
        """Slurm 22.05's shape on a fixed node count: one task per node, then each node in turn
        (in node order) as full as it gets; -G GPUs the same way (-N2 -n4 on idle 16-CPU nodes is
        3+1, --gpus=4 is 3+1: tests/compat/layouts). The even spread that was found is kept when
        the nodes cannot take this shape."""
        job = self.job
        k = len(allocs)
        total = sum(a.tasks for a in allocs)
        if total <= k and job.gpus.total <= k:
            return allocs
        order = self.overlay.order(self.snap)
        allocs = sorted(allocs, key=lambda a: order[a.node])
        by_name = {node.name: node for node in self.snap.nodes if node.name in {a.node for a in allocs}}
        nodes = [by_name[a.node] for a in allocs]
        frees = [self.overlay.free(node) for node in nodes]
        shares = [1 if i < job.gpus.total else 0 for i in range(k)]
        gpus_left = max(0, job.gpus.total - k)
        for i, (node, free) in enumerate(zip(nodes, frees, strict=True)):
            extra = min(gpus_left, max(0, len(self.typed(node, free)) - shares[i]))
            shares[i] += extra
            gpus_left -= extra
        if gpus_left:
            return allocs
        tasks_left = total - k
        shaped: list[NodeAllocation] = []
        for node, free, share in zip(nodes, frees, shares, strict=True):
            room = node.cpus if self.exclusive else len(free.cpu_ids)
            top = min(1 + tasks_left, max(1, room // max(1, job.cpus_per_task)))
            if job.ntasks_per_node:
                top = min(top, job.ntasks_per_node)
            alloc = next((a for t in range(top, 0, -1) if (a := self.allocate(node, free, t, share))), None)
            if alloc is None:
                return allocs
            shaped.append(alloc)
            tasks_left -= alloc.tasks - 1
        return allocs if tasks_left else shaped

    def flexible(self, nodes: Iterable[Node], fewest: int, most: int) -> list[NodeAllocation] | None:
        """Between `fewest` and `most` nodes: fill each node in turn (as few nodes as fit)."""
        job = self.job
        tasks_left = total_tasks(job, fewest)
        gpus_left = job.gpus.total
        chosen: list[NodeAllocation] = []
        for node in nodes:
            required = node.name in job.required_nodes
            done = tasks_left == 0 and gpus_left == 0 and len(chosen) >= fewest
            if len(chosen) == most or (done and not required):
                break
            reserve = max(0, fewest - len(chosen) - 1)  # one task for each node still needed
            top = tasks_left - reserve
            if job.ntasks_per_node:
                top = min(top, job.ntasks_per_node)
            free = self.overlay.free(node)
            cpu_room = node.cpus if self.exclusive else len(free.cpu_ids)
            top = min(top, cpu_room // max(1, job.cpus_per_task))
            alloc = None
            gpus = 0
            for tasks in range(top, 0, -1):
                spare = len(self.typed(node, free)) - gpus_for(job, tasks, 0)
                gpus = max(0, min(gpus_left, spare))
                alloc = self.allocate(node, free, tasks, gpus)
                if alloc is not None:
                    break
            if alloc is None:
                if required:
                    return None
                continue
            chosen.append(alloc)
            tasks_left -= alloc.tasks
            gpus_left -= gpus
        if tasks_left > 0 or gpus_left > 0 or len(chosen) < fewest:
            return None
        return chosen

    def spread(self, nodes: Iterable[Node], fewest: int, most: int) -> list[NodeAllocation] | None:
        """-N A-B as 22.05 places it: on as many of the nodes that can take one of its tasks as it may
        have (`most`), else on one node fewer, down to `fewest`; each count laid out as fixed() does."""
        open_nodes = [n for n in nodes if self.allocate(n, self.overlay.free(n), 1, 0) is not None]
        if not self.job.required_nodes <= {n.name for n in open_nodes}:
            return None
        for count in range(min(most, len(open_nodes)), fewest - 1, -1):
            allocs = self.fixed(open_nodes, count)
            if allocs is not None:
                return allocs
        return None

    def gpu_packing_order(self, nodes: list[Node]) -> list[Node]:
        """Candidates re-ordered so GPU jobs fill partly used nodes first (-w nodes and weight still lead)."""
        job = self.job
        needed = gpus_for(job, 1, 0) or 1

        def key(node: Node) -> tuple[bool, int, int]:
            free = len(node.gpus) if self.exclusive else self.overlay.free_gpu_count(node, job.gpus.type)
            return node.name not in job.required_nodes, node.weight, gpu_select.node_order_key(free, needed)

        return sorted(nodes, key=key)

    def typed(self, node: Node, free: Free) -> list[Gpu]:
        """GPUs of the requested type (any type when none asked) the job could take on `node`."""
        pool = node.gpus if self.exclusive else free.gpus
        wanted = self.job.gpus.type
        return [g for g in pool if not wanted or g.type == wanted]

    def allocate(self, node: Node, free: Free, tasks: int, gpu_share: int) -> NodeAllocation | None:
        """The allocation for `tasks` tasks on `node`, or None when they do not fit there."""
        job = self.job
        if job.ntasks_per_node and tasks > job.ntasks_per_node:
            return None
        sockets = sockets_for(node, cpus_for(job, tasks)) if job.gpus.per_socket else 0
        gpus_needed = gpus_for(job, tasks, gpu_share) + job.gpus.per_socket * sockets
        cpus = cpus_for(job, tasks, gpus_needed)
        mem = mem_for(job, cpus, node, self.part, self.snap.config, gpus_needed)
        typed = self.typed(node, free)
        if gpus_needed > len(typed) or not self.user_may_join(free):
            return None
        if self.exclusive:
            if not free.idle or cpus > node.cpus or mem > node.real_memory_mb:
                return None
            return NodeAllocation(
                node=node.name,
                cpu_ids=tuple(range(node.cpus)),
                # charged for every CPU it holds (DefMemPerCPU x all of them without a memory option), as 22.05
                mem_mb=min(
                    mem_for(job, node.cpus, node, self.part, self.snap.config, gpus_needed),
                    node.real_memory_mb,
                ),
                gpu_indices=tuple(g.index for g in node.gpus),
                tasks=tasks,
            )
        if not free.shareable or cpus > len(free.cpu_ids) or mem > free.mem_mb:
            return None
        chosen = self.choose_gpus(typed, gpus_needed, sockets)
        if chosen is None:
            return None
        return NodeAllocation(
            node=node.name,
            cpu_ids=pick_cpus_near(node, free.cpu_ids, cpus, gpu_select.affine_cpus(chosen)),
            mem_mb=mem,
            gpu_indices=tuple(sorted(g.index for g in chosen)),
            tasks=tasks,
        )

    def user_may_join(self, free: Free) -> bool:
        """ExclusiveUser: a node is shared only among one user's jobs once such a job is on it."""
        users = free.users
        if not users or (len(users) == 1 and self.job.user_id in users):
            return True  # nobody else's job is on it
        return not (self.part.exclusive_user or free.user_exclusive)

    def choose_gpus(self, typed: list[Gpu], count: int, sockets: int) -> tuple[Gpu, ...] | None:
        """`count` GPUs; with --gpus-per-socket, that many from each of `sockets` sockets first."""
        per_socket = self.job.gpus.per_socket
        if not per_socket:
            return gpu_select.choose(typed, count) or ()
        first = gpu_select.choose_per_socket(typed, per_socket, sockets)
        if first is None:
            return None
        taken = {g.index for g in first}
        rest = gpu_select.choose([g for g in typed if g.index not in taken], count - len(first))
        return None if rest is None else tuple(sorted(first + rest, key=lambda g: g.index))


def pick_cpus(node: Node, free_ids: frozenset[int], count: int) -> tuple[int, ...]:
    """The lowest free CPU ids, taking threads of wholly free cores before half-used ones.

    CPU ids number threads core by core (core c holds ids c*T .. c*T+T-1, T threads per core).
    """
    per_core = node.threads_per_core
    if per_core < 1 or node.sockets * node.cores_per_socket * per_core != node.cpus:
        per_core = 1
    if per_core == 1:  # every core is one CPU: simply the lowest free ids
        return tuple(sorted(free_ids)[:count])
    whole: list[int] = []
    partial: list[int] = []
    for first in range(0, node.cpus, per_core):
        core = range(first, min(first + per_core, node.cpus))
        free = [cpu for cpu in core if cpu in free_ids]
        (whole if len(free) == len(core) else partial).extend(free)
    return tuple(sorted((whole + partial)[:count]))


def pick_cpus_near(node: Node, free_ids: frozenset[int], count: int, near: frozenset[int]) -> tuple[int, ...]:
    """`count` free CPUs, those in `near` (affine to the job's GPUs) first."""
    close = free_ids & near
    first = pick_cpus(node, close, min(count, len(close))) if close else ()
    rest = pick_cpus(node, free_ids - frozenset(first), count - len(first)) if count > len(first) else ()
    return tuple(sorted(first + rest))


# ---------------------------------------------------------------- ever


def candidate_partitions(job: JobRequest, snap: Snapshot) -> list[Partition]:
    """The job's partitions that exist and admit it (access.py), in the user's order."""
    return list(_admitting(job, snap.partitions))


@memo.by_identity  # a job and the snapshot's (immutable) partitions: asked many times per cycle
def _admitting(job: JobRequest, partitions: tuple[Partition, ...]) -> tuple[Partition, ...]:
    by_name = {part.name: part for part in partitions}
    return tuple(
        by_name[name] for name in job.partitions if name in by_name and access.admits(job, by_name[name])
    )


def could_ever_run(job: JobRequest, snap: Snapshot) -> Refusal | None:
    """None when the job fits the configured capacity of at least one candidate partition.

    Usage and availability are ignored (a busy or down node may come back). A node count or a CPU
    total beyond the partition's is not refused here: Slurm queues such a job (PartitionNodeLimit,
    PartitionConfig).
    """
    if job.min_nodes < 0 or (job.max_nodes and job.max_nodes < job.min_nodes):
        return Refusal(INVALID_NODE_COUNT)
    if job.max_switches:  # --switches only delays a job (topology.py): it never makes one impossible
        job = dataclasses.replace(job, max_switches=0)
    parts = candidate_partitions(job, snap)
    if not parts:
        return Refusal(INVALID_PARTITION)
    if not job.required_nodes <= {node.name for node in snap.nodes}:
        return Refusal(INVALID_NODE_NAME)
    in_parts = {name for part in parts for name in part.nodes}
    if wants_gpus(job) and not any(node.gpus for node in snap.nodes if node.name in in_parts):
        return Refusal(INVALID_GRES)
    capacity = _as_configured(snap)
    if any(_fits_capacity(job, part, capacity) for part in parts):
        return None
    return Refusal(
        NODE_CONFIG_UNAVAILABLE, _unsatisfiable(job, [n for n in snap.nodes if n.name in in_parts])
    )


def _unsatisfiable(job: JobRequest, nodes: list[Node]) -> tuple[str, ...]:
    """Slurm's first lines for a per-node request no node of the job's partitions can hold."""
    details = []
    per_node_cpus = job.cpus_per_task * max(1, job.ntasks_per_node)
    if nodes and per_node_cpus > max(node.cpus for node in nodes):
        details.append(CPUS_PER_NODE_UNSATISFIABLE)
    per_node_mem = job.mem_per_node_mb or job.mem_per_cpu_mb * per_node_cpus
    if nodes and per_node_mem > max(node.real_memory_mb for node in nodes):
        details.append(MEMORY_UNSATISFIABLE)
    return tuple(details)


def _as_configured(snap: Snapshot) -> Snapshot:
    """The snapshot with every node up and empty."""
    nodes = tuple(dataclasses.replace(node, usage=NodeUsage(), available=True) for node in snap.nodes)
    return dataclasses.replace(snap, nodes=nodes, running=())


def _fits_capacity(job: JobRequest, part: Partition, capacity: Snapshot) -> bool:
    if limits.cpu_limit_exceeded(job, part):
        return True  # more CPUs than the partition has: 22.05 queues it (PartitionConfig), unchecked
    if not limits.node_limit_exceeded(job, part):
        return isinstance(place(job, part, capacity, Overlay()), Start)
    # Too many nodes for this partition: the job will pend, but each node's share must still fit.
    nodes = _candidates(job, part, capacity)
    if isinstance(nodes, str):
        return False
    fewest, _ = node_count_range(job)
    tasks = even_spread(total_tasks(job, fewest), fewest)[0]
    gpus = even_spread(job.gpus.total, fewest)[0]
    placer = _Placer(job, part, capacity, Overlay())
    empty = Overlay()
    return any(placer.allocate(node, empty.free(node), tasks, gpus) is not None for node in nodes)


# ---------------------------------------------------------------- when


def earliest_start(job: JobRequest, snap: Snapshot, now: int) -> tuple[int, Start] | None:
    """When and where the job would start if nothing else were queued (for --test-only, backfill).

    Running jobs release their resources at their end time, earliest first; jobs without an end
    never do. None when the job cannot start even after every release (or no partition admits it).
    """
    parts = [p for p in candidate_partitions(job, snap) if limits.partition_limit_reason(job, p) is None]
    if not parts:
        return None
    earliest = max(now, job.begin_time)
    start = _first_fit(job, parts, snap, earliest)
    if start is not None:
        return earliest, start
    nodes = {node.name: node for node in snap.nodes}
    holders = Counter(name for running in snap.running for name in running.nodes)
    for running in sorted((r for r in snap.running if r.end_time > 0), key=lambda r: r.end_time):
        release(running, nodes, holders)
        later = dataclasses.replace(snap, nodes=tuple(nodes[node.name] for node in snap.nodes))
        begin = max(earliest, running.end_time)
        start = _first_fit(job, parts, later, begin)
        if start is not None:
            return begin, start
    if job.max_switches:  # never within its switches: once it has waited, it takes any nodes
        return earliest_start(dataclasses.replace(job, max_switches=0), snap, now)
    return None


def _first_fit(job: JobRequest, parts: list[Partition], snap: Snapshot, at: int) -> Start | None:
    for part in parts:
        found = place(job, part, snap, Overlay(), at)
        if isinstance(found, Start):
            return found
    return None


def release(
    running: RunningJob, nodes: dict[str, Node], holders: Counter[str], *, keep_memory: bool = False
) -> None:
    """Give a finished job's resources back (all of a node's once its last known holder ends).

    `keep_memory`: a job suspended by preemption lends its CPUs and GPUs but keeps its memory (22.05)."""
    held = {alloc.node: alloc for alloc in running.allocation}
    for name in running.nodes:
        node = nodes.get(name)
        if node is None:
            continue
        holders[name] -= 1
        usage = node.usage
        if holders[name] <= 0:
            usage = NodeUsage(mem_mb=usage.mem_mb if keep_memory else 0)
        elif name in held:
            alloc = held[name]
            usage = NodeUsage(
                cpu_ids=usage.cpu_ids - frozenset(alloc.cpu_ids),
                mem_mb=usage.mem_mb if keep_memory else max(0, usage.mem_mb - alloc.mem_mb),
                gpu_indices=usage.gpu_indices - frozenset(alloc.gpu_indices),
                exclusive=False,
                jobs=max(0, usage.jobs - 1),
            )
        nodes[name] = dataclasses.replace(node, usage=usage)
