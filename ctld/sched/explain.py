"""Why a pending job waits, when it would start, and what would let it start sooner (`shoal why`).

A pure function over the snapshot the cycle uses: `explain()` runs `run_cycle` itself (the same
queue order, placement and backfill plan), then describes the job's verdict — the resources short on
which nodes and the running jobs that hold them until their end, the association/QOS limit at its
usage, the jobs that rank ahead and by which priority factors, unmet dependencies, its reservation,
a hold, a partition that can never take it. Each suggestion (fewer GPUs, a shorter time limit,
another partition, fewer nodes) is the job changed so, put through the same cycle in its place; only
those that start earlier than the plan are kept, earliest first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from ctld.sched import access, dependency, limits, priority
from ctld.sched.assoc_limits import AssocUsage, LimitUse
from ctld.sched.cycle import queue_order, run_cycle
from ctld.sched.model import (
    UNLIMITED,
    CycleResult,
    GpuRequest,
    JobRequest,
    JobStatus,
    Node,
    Partition,
    Pend,
    Phase,
    RunningJob,
    Snapshot,
    Unresolvable,
)
from ctld.sched.placement import Free, Overlay, candidate_partitions, earliest_start, usable_nodes
from ctld.sched.reasons import (
    BEGIN_TIME,
    DEPENDENCY,
    DEPENDENCY_NEVER,
    HELD_ADMIN,
    HELD_USER,
    PARTITION_CONFIG,
    PARTITION_DOWN,
    PARTITION_INACTIVE,
    PARTITION_NODE_LIMIT,
    PARTITION_TIME_LIMIT,
    RESERVATION_DELETED,
)
from ctld.sched.resources import (
    cpus_for,
    even_spread,
    gpus_for,
    is_exclusive,
    job_cpus,
    mem_for,
    node_count_range,
    total_tasks,
    wants_gpus,
)

MAX_SUGGESTIONS = 3
_RANK = {"gpu": 0, "nod": 1, "cpu": 2, "mem": 3}  # the scarcest first: GPUs, whole nodes, CPUs, memory
MAX_TIME_TRIES = 6
MAX_TRIES = 16  # cycles run for suggestions at the most (each is a whole scheduling cycle)
# verdicts no change of shape can help: the job waits for something else than room
_NOT_ROOM = frozenset({HELD_ADMIN, HELD_USER, BEGIN_TIME, DEPENDENCY, DEPENDENCY_NEVER, RESERVATION_DELETED})
PARTITION_REASONS = frozenset(
    {PARTITION_DOWN, PARTITION_INACTIVE, PARTITION_NODE_LIMIT, PARTITION_CONFIG, PARTITION_TIME_LIMIT}
)


@dataclass(frozen=True, slots=True)
class Holder:
    """A running job that holds some of what the waiting job needs, until `end_time` (0: no limit)."""

    job_id: int
    user_id: int
    nodes: tuple[str, ...]
    end_time: int


@dataclass(frozen=True, slots=True)
class Shortage:
    """One resource too short on some nodes: the job needs `needed` per node, they have `free` at most."""

    resource: str  # "cpu", "mem" (MB), "gpu" or "gpu:TYPE", "node" (a whole idle node, --exclusive)
    needed: int
    free: int
    nodes: tuple[str, ...]
    holders: tuple[Holder, ...]


@dataclass(frozen=True, slots=True)
class Ahead:
    """The jobs ranked before this one in its partitions, and how the first of them outranks it."""

    job_ids: tuple[int, ...]
    priority: int  # this job's
    top_priority: int  # the first one's
    top_job_id: int
    factors: tuple[tuple[str, float, float], ...]  # (factor, top's weighted, ours) where the top leads
    tier: tuple[int, int] = (0, 0)  # (top's PriorityTier, ours) when they differ


@dataclass(frozen=True, slots=True)
class DependencyWait:
    kind: str  # after, afterok ... singleton
    job_id: int  # 0 for singleton
    phase: Phase | None  # the other job's phase (None: unknown/purged)


@dataclass(frozen=True, slots=True)
class Suggestion:
    change: str  # the option as the user would write it: "--gres=gpu:2", "--time=30"
    start: int
    nodes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Explanation:
    job_id: int
    reason: str  # the Slurm word squeue shows ("None" when the job would start now)
    unresolvable: bool
    starts_now: bool  # the next pass starts it (the cycle the explainer ran did)
    planned_start: int | None
    planned_nodes: tuple[str, ...]
    partition: str  # where it would start (or its first partition)
    shortages: tuple[Shortage, ...] = ()
    down_nodes: tuple[str, ...] = ()  # nodes of its partitions that take no work now
    ahead: Ahead | None = None
    limit: LimitUse | None = None
    dependencies: tuple[DependencyWait, ...] = ()
    reservation: str = ""
    partition_problem: str = ""  # plain words for a PartitionXxx reason
    required_unavailable: tuple[str, ...] = ()  # -w nodes that take no work now
    suggestions: tuple[Suggestion, ...] = ()


def explain(snap: Snapshot, job_id: int, now: int) -> Explanation | None:
    """What `run_cycle(snap, now)` decides for pending job `job_id`, in detail; None if not pending."""
    job = next((j for j in snap.pending if j.job_id == job_id), None)
    if job is None:
        return None
    result = run_cycle(snap, now)
    started = next((s for s in result.starts if s.job_id == job_id), None)
    when = _when(snap, job, result, now)
    verdict = result.verdicts.get(job_id)
    reason = verdict.reason if verdict is not None else "None"
    unresolvable = isinstance(verdict, Unresolvable)
    parts = candidate_partitions(job, snap)
    first_part = started.partition if started else (parts[0].name if parts else "")
    found = Explanation(
        job_id=job_id,
        reason=reason,
        unresolvable=unresolvable,
        starts_now=started is not None,
        planned_start=when[0] if when else None,
        planned_nodes=when[1] if when else (),
        partition=first_part,
    )
    if started is not None:
        return found
    open_parts = [p for p in parts if limits.partition_limit_reason(job, p) is None]
    waits_room = isinstance(verdict, Pend)
    limit = None
    if snap.accounting is not None and isinstance(verdict, Unresolvable) and reason not in _NOT_ROOM:
        limit = AssocUsage(snap.accounting, snap.running, now).describe(
            job, reason, _minutes(job, open_parts)
        )
    in_parts = {name for p in open_parts for name in p.nodes}
    found = dataclasses.replace(
        found,
        shortages=shortages(job, open_parts, snap) if waits_room else (),
        down_nodes=tuple(n.name for n in snap.nodes if waits_room and not n.available and n.name in in_parts),
        ahead=ranked_ahead(job, snap, result, now) if waits_room else None,
        limit=limit,
        dependencies=(
            unmet_dependencies(job, dependency.status_index(snap.jobs))
            if reason in (DEPENDENCY, DEPENDENCY_NEVER)
            else ()
        ),
        reservation=job.reservation,
        partition_problem=partition_problem(job, parts, reason) if reason in PARTITION_REASONS else "",
        required_unavailable=tuple(
            n.name for n in snap.nodes if n.name in job.required_nodes and not n.available
        ),
    )
    if reason not in _NOT_ROOM:
        found = dataclasses.replace(found, suggestions=suggest(snap, job, now, found.planned_start, result))
    return found


def _when(
    snap: Snapshot, job: JobRequest, result: CycleResult, now: int
) -> tuple[int, tuple[str, ...]] | None:
    """When and where the cycle would start the job: now, backfill's plan, or (sched/builtin, which
    plans nothing) the earliest start were nothing else queued (the --test-only answer)."""
    for start in result.starts:
        if start.job_id == job.job_id:
            return now, tuple(a.node for a in start.allocation)
    plan = result.planned.get(job.job_id)
    if plan is not None:
        return plan.start_time, plan.nodes
    verdict = result.verdicts.get(job.job_id)
    if snap.config.scheduler != "sched/backfill" and isinstance(verdict, Pend):
        found = earliest_start(job, snap, now)
        if found is not None:
            return found[0], tuple(a.node for a in found[1].allocation)
    return None


def _minutes(job: JobRequest, parts: list[Partition]) -> int | None:
    return limits.effective_time_limit(job, parts[0]) if parts else None


# ---- what it waits for


def shortages(job: JobRequest, parts: list[Partition], snap: Snapshot) -> tuple[Shortage, ...]:
    """The resources the job's smallest per-node share does not find free now, per resource, with
    the nodes they are short on and the running jobs holding them there (earliest end first)."""
    fewest, _ = node_count_range(job)
    tasks = even_spread(total_tasks(job, fewest), fewest)[-1]
    gpus = gpus_for(job, tasks, even_spread(job.gpus.total, fewest)[-1])
    cpus = cpus_for(job, tasks, gpus)
    overlay = Overlay()
    short: dict[str, tuple[int, list[int], list[str]]] = {}  # resource -> (needed, free per node, nodes)
    seen: set[str] = set()
    for part in parts:
        for node in usable_nodes(job, part, snap):
            if node.name in seen:
                continue
            seen.add(node.name)
            free = overlay.free(node)
            for resource, needed, have in _needs(job, part, snap, node, free, cpus, gpus):
                if needed > have:
                    entry = short.setdefault(resource, (needed, [], []))
                    entry[1].append(have)
                    entry[2].append(node.name)
    out = []
    for resource, (needed, frees, where) in sorted(short.items(), key=lambda kv: _RANK.get(kv[0][:3], 0)):
        out.append(
            Shortage(resource, needed, max(frees), tuple(where), _holders(snap.running, where, resource))
        )
    return tuple(out)


def _needs(
    job: JobRequest, part: Partition, snap: Snapshot, node: Node, free: Free, cpus: int, gpus: int
) -> Iterator[tuple[str, int, int]]:
    """(resource, needed, free) on one node for the job's share there."""
    if is_exclusive(job, part):
        yield "node", 1, 1 if free.idle else 0
        return
    yield "cpu", cpus, len(free.cpu_ids) if free.shareable else 0
    yield "mem", mem_for(job, cpus, node, part, snap.config, gpus), free.mem_mb
    if gpus:
        kind = job.gpus.type
        typed = [g for g in free.gpus if not kind or g.type == kind]
        yield (f"gpu:{kind}" if kind else "gpu"), gpus, len(typed)


def _holders(running: tuple[RunningJob, ...], nodes: list[str], resource: str) -> tuple[Holder, ...]:
    where = set(nodes)
    found = []
    for run in running:
        if not where.intersection(run.nodes):
            continue
        mine = [a for a in run.allocation if a.node in where]
        if run.allocation:
            holds = {
                "cpu": any(a.cpu_ids for a in mine),
                "mem": any(a.mem_mb for a in mine),
                "node": bool(mine),
            }.get(resource, any(a.gpu_indices for a in mine))
            if not holds:
                continue
        found.append(Holder(run.job_id, run.user_id, tuple(n for n in run.nodes if n in where), run.end_time))
    return tuple(sorted(found, key=lambda h: (h.end_time <= 0, h.end_time, h.job_id)))


def unmet_dependencies(
    job: JobRequest, statuses: Mapping[int, list[JobStatus]]
) -> tuple[DependencyWait, ...]:
    """The terms of --dependency not satisfied now, one per job they name, with that job's phase."""
    out = []
    for term in job.dependency.terms:
        if dependency.term_verdict(job, term, statuses) == "ok":
            continue
        if term.kind == "singleton":
            out.append(DependencyWait("singleton", 0, None))
            continue
        for other in term.job_ids:
            known = statuses.get(other, [])
            phase = known[0].phase if known else None
            if len(known) > 1 and any(s.phase is not Phase.COMPLETED for s in known):
                phase = next(s.phase for s in known if s.phase is not Phase.COMPLETED)
            out.append(DependencyWait(term.kind, other, phase))
    return tuple(out)


def partition_problem(job: JobRequest, parts: list[Partition], reason: str) -> str:
    """Plain words for why none of the job's partitions can take it as asked."""
    if not parts:
        return f"none of its partitions ({','.join(job.partitions)}) exists or admits it"
    part = next((p for p in parts if limits.partition_limit_reason(job, p) == reason), parts[0])
    fewest, _ = node_count_range(job)
    if reason == PARTITION_DOWN:
        return f"partition {part.name} is DOWN: it starts no job until an administrator sets it UP"
    if reason == PARTITION_INACTIVE:
        return f"partition {part.name} is INACTIVE: it takes no job"
    if reason == PARTITION_NODE_LIMIT:
        most = min(part.max_nodes, len(part.nodes)) if part.max_nodes else len(part.nodes)
        if fewest < part.min_nodes:
            return f"it asks for {fewest} node(s); partition {part.name} needs at least {part.min_nodes}"
        return f"it asks for {fewest} nodes; partition {part.name} can give at most {most}"
    if reason == PARTITION_CONFIG:
        return f"it asks for {job_cpus(job)} CPUs; partition {part.name} has {part.total_cpus}"
    if reason == PARTITION_TIME_LIMIT:
        mine = limits.effective_time_limit(job, part)
        asked = "no limit" if mine == UNLIMITED else f"{mine} minutes"
        return (
            f"its time limit ({asked}) is over partition {part.name}'s MaxTime of {part.max_time_min} minutes"
        )
    return ""


def ranked_ahead(job: JobRequest, snap: Snapshot, result: CycleResult, now: int) -> Ahead | None:
    """The jobs before this one in the queue that compete for one of its partitions (they start or
    wait for room first; held or dependent jobs compete for nothing), and why the first outranks it."""
    queue = queue_order(snap, result.priorities)
    mine = set(job.partitions)
    started = {s.job_id for s in result.starts}
    before = []
    for other in queue:
        if other.job_id == job.job_id:
            break
        verdict = result.verdicts.get(other.job_id)
        if other.job_id not in started and not isinstance(verdict, Pend):
            continue
        if mine.intersection(other.partitions):
            before.append(other)
    if not before:
        return None
    top = before[0]
    parts = {p.name: p for p in snap.partitions}
    factors: tuple[tuple[str, float, float], ...] = ()
    conf = snap.config.priority
    ours_part = next((parts[n] for n in job.partitions if n in parts), None)
    top_part = next((parts[n] for n in top.partitions if n in parts), None)
    if conf.type == priority.MULTIFACTOR and ours_part is not None and top_part is not None:
        ctx = priority.cluster_context(snap)
        a = priority.weigh(priority.job_factors(top, top_part, now, conf, ctx), conf)
        b = priority.weigh(priority.job_factors(job, ours_part, now, conf, ctx), conf)
        pairs = [
            ("age", a.age, b.age),
            ("fair-share", a.fairshare, b.fairshare),
            ("job size", a.job_size, b.job_size),
            ("partition", a.partition, b.partition),
            ("QOS", a.qos, b.qos),
            ("association", a.assoc, b.assoc),
            ("site", float(a.site), float(b.site)),
            ("nice", float(-a.nice), float(-b.nice)),
        ]
        factors = tuple(sorted(((n, x, y) for n, x, y in pairs if x - y >= 0.5), key=lambda f: f[2] - f[1]))
    tiers = (
        max((parts[n].priority_tier for n in top.partitions if n in parts), default=0),
        max((parts[n].priority_tier for n in job.partitions if n in parts), default=0),
    )
    return Ahead(
        job_ids=tuple(o.job_id for o in before),
        priority=result.priorities.get(job.job_id, 0),
        top_priority=result.priorities.get(top.job_id, 0),
        top_job_id=top.job_id,
        factors=factors,
        tier=tiers if tiers[0] != tiers[1] else (0, 0),
    )


# ---- what would let it start sooner


def suggest(
    snap: Snapshot, job: JobRequest, now: int, planned: int | None, result: CycleResult
) -> tuple[Suggestion, ...]:
    """Changes of the job that the same cycle starts earlier than `planned` (None: never planned),
    the best of each kind, earliest first; at most MAX_SUGGESTIONS. `result`: the cycle as it is."""
    best: dict[str, Suggestion] = {}
    moments = {r.end_time for r in snap.running if r.end_time > now}
    moments.update(p.start_time for i, p in result.planned.items() if i != job.job_id and p.start_time > now)
    tries = 0
    for kind, change, changed in _variants(snap, job, now, moments):
        if kind in best and best[kind].start <= now:
            continue  # this kind already starts it at once, with a smaller change
        if tries >= MAX_TRIES:
            break
        tries += 1
        when = start_of(snap, changed, now)
        if when is None or (planned is not None and when[0] >= planned):
            continue
        if kind not in best or when[0] < best[kind].start:
            best[kind] = Suggestion(change, when[0], when[1])
    return tuple(sorted(best.values(), key=lambda s: s.start)[:MAX_SUGGESTIONS])


def start_of(snap: Snapshot, job: JobRequest, now: int) -> tuple[int, tuple[str, ...]] | None:
    """When and where the cycle would start `job` in place of the pending job of its id."""
    pending = tuple(job if j.job_id == job.job_id else j for j in snap.pending)
    changed = dataclasses.replace(snap, pending=pending)
    return _when(changed, job, run_cycle(changed, now), now)


def _variants(
    snap: Snapshot, job: JobRequest, now: int, moments: Iterable[int]
) -> Iterator[tuple[str, str, JobRequest]]:
    """(kind, option, changed job): fewer GPUs, shorter time limits, other partitions, fewer nodes,
    taken in turn (so that each kind is tried within MAX_TRIES); within a kind the smallest change first."""
    kinds = [
        _fewer_gpus(job),
        _shorter(snap, job, now, moments),
        _other_partitions(snap, job),
        _fewer_nodes(job),
    ]
    while kinds:
        for kind in list(kinds):
            found = next(kind, None)
            if found is None:
                kinds.remove(kind)
            else:
                yield found


def _fewer_nodes(job: JobRequest) -> Iterator[tuple[str, str, JobRequest]]:
    fewest, _ = node_count_range(job)
    if job.min_nodes > 1 and not job.required_nodes:
        for count in range(fewest - 1, 0, -1):
            yield "nodes", f"--nodes={count}", dataclasses.replace(job, min_nodes=count, max_nodes=0)


def _fewer_gpus(job: JobRequest) -> Iterator[tuple[str, str, JobRequest]]:
    if not wants_gpus(job) or job.gpus.per_socket:
        return
    g = job.gpus
    typed = f"{g.type}:" if g.type else ""
    options: list[tuple[int, Callable[[int], GpuRequest], str]] = []
    if g.per_node:
        options.append((g.per_node, lambda k: dataclasses.replace(g, per_node=k), f"--gres=gpu:{typed}"))
    elif g.total:
        options.append((g.total, lambda k: dataclasses.replace(g, total=k), f"--gpus={typed}"))
    elif g.per_task:
        options.append((g.per_task, lambda k: dataclasses.replace(g, per_task=k), "--gpus-per-task="))
    for count, make, option in options:
        for k in range(count - 1, 0, -1):
            yield "gpus", f"{option}{k}", dataclasses.replace(job, gpus=make(k))


def _shorter(
    snap: Snapshot, job: JobRequest, now: int, moments: Iterable[int]
) -> Iterator[tuple[str, str, JobRequest]]:
    """Time limits that end by a moment when something frees up or is taken (a running job's end,
    another job's planned start: the holes backfill fills), the smallest cut first."""
    parts = [p for p in candidate_partitions(job, snap) if limits.partition_limit_reason(job, p) is None]
    if not parts:
        return
    current = limits.effective_time_limit(job, parts[0])
    if current < 0:  # UNLIMITED
        current = 2**31
    limits_tried = sorted({(m - now) // 60 for m in moments if (m - now) // 60 >= 1}, reverse=True)
    for minutes in [m for m in limits_tried if m < current][:MAX_TIME_TRIES]:
        yield "time", f"--time={minutes}", dataclasses.replace(job, time_limit_min=minutes)


def _other_partitions(snap: Snapshot, job: JobRequest) -> Iterator[tuple[str, str, JobRequest]]:
    for part in snap.partitions:
        if part.name in job.partitions or part.state != "UP":
            continue
        changed = dataclasses.replace(job, partitions=(part.name,))
        if access.admits(changed, part) and limits.partition_limit_reason(changed, part) is None:
            if not wants_gpus(job) or any(n.gpus for n in snap.nodes if n.name in part.nodes):
                yield "partition", f"--partition={part.name}", changed
