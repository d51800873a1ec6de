"""Laying out a job step inside its job's allocation (pure: no I/O, no clock).

Which nodes of the allocation a step uses, how many tasks each node runs and which global task
ids they get (block or cyclic), with Slurm's refusals. CPUs held by other running steps count
unless the step overlaps (22.05: steps are exclusive by default, --overlap opts out); a step that
does not fit *now* but would fit the allocation is told to retry (srun waits), one that could
never fit is refused.

Tasks per node (measured on Slurm 22.05, tests/compat/layouts/): whatever the distribution, the
counts are dealt as a cyclic distribution would deal them -- one task per node per round, each
node up to the tasks its CPUs hold (CPUs // cpus-per-task, or --ntasks-per-node), and once every
node is full, round-robin past that -- and the ids are then numbered block (consecutive per node),
cyclic (round-robin) or plane=N (round-robin in runs of N). So -n5 on nodes of 8 and 2 CPUs is
3+2, -n4 on 3+1 CPUs is 3+1, -n4 on 3+3 is 2+2. Only more CPUs in all than the step's nodes hold
is refused. Without -m, one task per node is "cyclic" and more is "block".

Which CPUs (Slurm 22.05): without --exact a step gets *all* the job's CPUs on each of its nodes, so
it waits until no other step holds any of them there; with --exact (implied by -c and --exclusive)
it gets tasks x cpus-per-task of the free ones.

Memory (Slurm 22.05): a step that asks for some (--mem per node, --mem-per-cpu per CPU it holds)
holds it out of the job's memory on each node; more than the job has there is refused, more than
is free now waits. A step that asks none uses the job's memory and holds none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

NODES_UNAVAILABLE = "Requested node configuration is not available"
TOO_MANY_CPUS = "More processors requested than permitted"
NODES_BUSY = "Requested nodes are busy"
BAD_DISTRIBUTION = "Invalid --distribution specification"
INVALID_GRES = "Invalid generic resource (gres) specification"
EXCLUSIVE_AND_OVERLAP = "--exclusive and --overlap are mutually exclusive"
MEMORY_NOT_AVAILABLE = "Memory required by task is not available"


@dataclass(frozen=True)
class AllocNode:
    """One node of the job's allocation and the CPUs the job holds there."""

    name: str
    cpus: int
    gpus: tuple[int, ...] = ()  # the job's GPU indices on the node
    cpu_ids: tuple[int, ...] = ()  # the job's abstract cpu ids on the node (() = 0..cpus-1)
    mem_mb: int = 0  # the job's memory on the node; 0 = not tracked

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(sorted(self.cpu_ids)) if self.cpu_ids else tuple(range(self.cpus))


@dataclass(frozen=True)
class StepRequest:
    min_nodes: int = 0  # 0 = not given
    max_nodes: int = 0
    num_tasks: int = 0  # 0 = not given
    ntasks_per_node: int = 0
    cpus_per_task: int = 1
    # -c without -n (none inherited either): 22.05 runs as many tasks as the job's CPUs hold
    # (`srun -c2` in an --exclusive -N1 job of 16 CPUs: 8 tasks; -c3: 5)
    tasks_from_cpus: bool = False
    nodelist: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    distribution: str = ""  # "block", "cyclic", "plane=N" ("" = by the task count); ":..." ignored
    overlap: bool = False  # share every resource with all other steps; hold none (opt-out)
    exclusive: bool = False  # dedicated CPUs/GPUs: the 22.05 default for steps, said explicitly
    exact: bool = False  # only tasks x cpus-per-task CPUs (else all the job's on each node)
    overcommit: bool = False
    gpus_per_node: int = 0  # --gres=gpu:N / --gpus-per-node
    gpus_total: int = 0  # --gpus (spread over the step's nodes)
    gpus_per_task: int = 0
    mem_per_node_mb: int = 0  # --mem (0 = none asked)
    mem_per_cpu_mb: int = 0  # --mem-per-cpu


@dataclass(frozen=True)
class StepLayout:
    nodes: tuple[str, ...]
    task_ids: tuple[tuple[int, ...], ...]  # global task ids per node, in node order
    cpus: tuple[int, ...]  # CPUs the step uses per node
    distribution: str  # "block", "cyclic" or "plane"
    cpu_ids: tuple[tuple[int, ...], ...] = ()  # which of the job's cpu ids, per node
    # GPUs the step takes per node; () on a node = no GPU request: the step sees all the job's GPUs there
    gpus: tuple[tuple[int, ...], ...] = ()
    gpus_requested: bool = False
    mem_mb: tuple[int, ...] = ()  # memory the step holds per node (0 = none asked)
    plane_size: int = 0  # with distribution "plane"

    @property
    def num_tasks(self) -> int:
        return sum(len(t) for t in self.task_ids)


class StepRefused(Exception):
    """The step cannot start; `retry` when it may once other steps end."""

    def __init__(self, message: str, retry: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.retry = retry


def distribution_kind(text: str) -> tuple[str, int]:
    """("block"|"cyclic"|"plane"|"", plane size) from -m's first part ("" = not given)."""
    first = text.split(":")[0].split(",")[0].strip().lower()
    if first in ("", "block", "cyclic"):
        return first, 0
    name, eq, size = first.partition("=")
    if name == "plane" and eq and size.isdigit() and int(size) > 0:
        return "plane", int(size)
    raise StepRefused(BAD_DISTRIBUTION)


def task_counts(caps: Sequence[int], num_tasks: int) -> list[int]:
    """Tasks per node, dealt one per node per round while a node has room (`caps`), then
    round-robin over all of them once every node is full (Slurm's "fake cyclic" count)."""
    n = len(caps)
    counts = [0] * n
    left = num_tasks
    while left > 0:
        dealt = False
        for i in range(n):
            if left and counts[i] < caps[i]:
                counts[i] += 1
                left -= 1
                dealt = True
        if not dealt:
            break
    i = 0
    while left > 0:
        counts[i % n] += 1
        left -= 1
        i += 1
    return counts


def assign_task_ids(counts: Sequence[int], kind: str, plane_size: int = 1) -> list[list[int]]:
    """Global task ids per node: consecutive per node (block), dealt round-robin one at a time
    (cyclic) or in runs of `plane_size` (plane), never past a node's count."""
    ids: list[list[int]] = [[] for _ in counts]
    if kind == "block":
        next_id = 0
        for i, c in enumerate(counts):
            ids[i] = list(range(next_id, next_id + c))
            next_id += c
        return ids
    run = plane_size if kind == "plane" else 1
    task = 0
    total = sum(counts)
    while task < total:
        for i, c in enumerate(counts):
            take = min(run, c - len(ids[i]), total - task)
            ids[i].extend(range(task, task + take))
            task += take
    return ids


def gpus_per_node(req: StepRequest, counts: Sequence[int], have: Sequence[int] = ()) -> list[int]:
    """How many GPUs the step asks on each of its nodes (tasks per node in `counts`, the job's GPUs
    there in `have`): --gpus is one per node, then each node in turn up to what the job has there
    (22.05: --gpus=4 on nodes holding 3 and 1 is 3+1, --gpus=3 on 2 and 1 is 2+1)."""
    if req.gpus_per_task:
        return [c * req.gpus_per_task for c in counts]
    if req.gpus_per_node:
        return [req.gpus_per_node] * len(counts)
    wants = [1 if i < req.gpus_total else 0 for i in range(len(counts))]
    left = max(0, req.gpus_total - len(counts))
    for i, held in enumerate(have or [req.gpus_total] * len(counts)):
        extra = min(left, max(0, held - wants[i]))
        wants[i] += extra
        left -= extra
    wants[0] += left  # more than the job has: refused below
    return wants


def take_gpus(
    chosen: Sequence[AllocNode],
    counts: Sequence[int],
    busy_gpus: Mapping[str, frozenset[int]],
    req: StepRequest,
) -> tuple[tuple[int, ...], ...]:
    """The job's GPUs the step takes on each node: lowest free indices (the job's own set is already
    the best connected); more than the job has is refused, more than is free now waits."""
    if not (req.gpus_per_node or req.gpus_total or req.gpus_per_task):
        return tuple(() for _ in chosen)
    taken: list[tuple[int, ...]] = []
    for a, want in zip(chosen, gpus_per_node(req, counts, [len(a.gpus) for a in chosen]), strict=True):
        if want > len(a.gpus):
            raise StepRefused(INVALID_GRES)
        held = frozenset() if req.overlap else busy_gpus.get(a.name, frozenset())
        free = [g for g in sorted(a.gpus) if g not in held]
        if want > len(free):
            raise StepRefused(NODES_BUSY, retry=True)
        taken.append(tuple(free[:want]))
    return tuple(taken)


def take_memory(
    chosen: Sequence[AllocNode], cpus: Sequence[int], busy_mem: Mapping[str, int], req: StepRequest
) -> tuple[int, ...]:
    """Memory the step holds on each node (MB): --mem, or --mem-per-cpu x the CPUs it holds there
    (22.05: without --exact a step holds all the job's CPUs on a node, so `srun -n1` in `sbatch -n2
    --mem-per-cpu=500` holds 1000M). More than the job has on a node is refused; more than other
    steps leave free waits."""
    wants = [req.mem_per_node_mb or req.mem_per_cpu_mb * c for c in cpus]
    for a, want in zip(chosen, wants, strict=True):
        if not want or not a.mem_mb:
            continue
        if want > a.mem_mb:
            raise StepRefused(MEMORY_NOT_AVAILABLE)
        if not req.overlap and want > a.mem_mb - busy_mem.get(a.name, 0):
            raise StepRefused(NODES_BUSY, retry=True)
    return tuple(wants)


def layout_step(
    alloc: Sequence[AllocNode],
    busy: Mapping[str, frozenset[int]],
    req: StepRequest,
    busy_gpus: Mapping[str, frozenset[int]] | None = None,
    busy_mem: Mapping[str, int] | None = None,
) -> StepLayout:
    """Choose the step's nodes, tasks and CPUs; StepRefused with Slurm's words when it cannot run.

    `busy` holds the cpu ids other running steps hold on each node (`busy_gpus` their GPUs,
    `busy_mem` their memory in MB). As in Slurm 22.05, a step gets
    dedicated CPUs and GPUs whether or not --exclusive is given: it waits while other running steps
    hold them. --overlap is the opt-out: such a step ignores what others hold and holds nothing
    itself (`busy` never counts it). The two cannot be combined.
    """
    if req.exclusive and req.overlap:
        raise StepRefused(EXCLUSIVE_AND_OVERLAP)
    kind, plane_size = distribution_kind(req.distribution)
    cpt = max(1, req.cpus_per_task)
    exact = req.exact or req.exclusive
    names = [a.name for a in alloc]
    if any(n not in names for n in req.nodelist):
        raise StepRefused(NODES_UNAVAILABLE)
    candidates = [a for a in alloc if a.name not in req.exclude]
    required = [a for a in candidates if a.name in req.nodelist]
    if len(required) < len(set(req.nodelist)):
        raise StepRefused(NODES_UNAVAILABLE)
    if req.min_nodes:
        want = req.min_nodes
    elif required:
        want = len(required)  # -w alone: exactly those nodes
    elif req.num_tasks:
        want = max(len(required), min(req.num_tasks, len(candidates)))
    else:
        want = max(len(required), len(candidates))
    if want > len(candidates) or want < len(required) or want == 0:
        raise StepRefused(NODES_UNAVAILABLE)
    num_tasks = req.num_tasks or want * (req.ntasks_per_node or 1)
    if req.tasks_from_cpus:  # counted over the whole allocation, whatever -N says (-N1 -c4 in -N2: too many)
        num_tasks = max(num_tasks, sum(a.cpus // cpt for a in alloc))
    want = min(want, num_tasks)  # fewer tasks than nodes: one task per node, fewer nodes
    held = {} if req.overlap else busy

    def free_ids(a: AllocNode) -> list[int]:
        taken = held.get(a.name, frozenset())
        return [c for c in a.ids if c not in taken]

    def busy_now(a: AllocNode) -> bool:
        return len(free_ids(a)) < (cpt if exact else a.cpus)

    others = sorted((a for a in candidates if a not in required), key=busy_now)  # stable: idle nodes first
    chosen = required + others[: max(0, want - len(required))]
    chosen.sort(key=lambda a: names.index(a.name))
    if req.ntasks_per_node and req.ntasks_per_node * len(chosen) < num_tasks:
        raise StepRefused(TOO_MANY_CPUS)
    if not req.overcommit and num_tasks * cpt > sum(a.cpus for a in chosen):
        raise StepRefused(TOO_MANY_CPUS)
    caps = [max(1, a.cpus // cpt) for a in chosen]
    if req.ntasks_per_node:
        caps = [min(c, req.ntasks_per_node) for c in caps]
    counts = task_counts(caps, num_tasks)
    needed = [c * cpt for c in counts]
    cpu_ids: list[tuple[int, ...]] = []
    for a, n in zip(chosen, needed, strict=True):
        free = free_ids(a)
        if not exact:
            if len(free) < a.cpus:
                raise StepRefused(NODES_BUSY, retry=True)
            cpu_ids.append(a.ids)
        else:
            if min(n, a.cpus) > len(free):
                raise StepRefused(NODES_BUSY, retry=True)
            cpu_ids.append(tuple(free[: min(n, a.cpus)]))
    mem = take_memory(chosen, [len(c) for c in cpu_ids], busy_mem or {}, req)
    gpus = take_gpus(chosen, counts, busy_gpus or {}, req)
    kind = kind or ("cyclic" if num_tasks <= len(chosen) else "block")
    ids = assign_task_ids(counts, kind, plane_size)
    return StepLayout(
        nodes=tuple(a.name for a in chosen),
        task_ids=tuple(tuple(t) for t in ids),
        cpus=tuple(len(c) for c in cpu_ids),
        distribution=kind,
        plane_size=plane_size,
        cpu_ids=tuple(cpu_ids),
        gpus=gpus,
        gpus_requested=bool(req.gpus_per_node or req.gpus_total or req.gpus_per_task),
        mem_mb=mem,
    )
