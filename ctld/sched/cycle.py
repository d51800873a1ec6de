"""One scheduling cycle: Slurm's builtin scheduler over a snapshot, read top to bottom.

Pending jobs are tried in order (partition PriorityTier, priority, submit time, job id). A job that
cannot get resources blocks its partitions: every lower job there waits with reason Priority, so a
big job is never starved by a stream of small ones. Under sched/backfill, `backfill()` then starts
lower jobs that delay no higher one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from ctld.sched import dependency, limits
from ctld.sched.assoc_limits import AssocUsage
from ctld.sched.backfill import run_backfill
from ctld.sched.model import CycleResult, JobRequest, JobStatus, Partition, Phase, Planned, Snapshot, Start
from ctld.sched.placement import RESOURCES, Overlay, candidate_partitions, place
from ctld.sched.priority import all_priorities, job_priority

HELD_ADMIN = "JobHeldAdmin"
HELD_USER = "JobHeldUser"
BEGIN_TIME = "BeginTime"
DEPENDENCY = "Dependency"
DEPENDENCY_NEVER = "DependencyNeverSatisfied"
ARRAY_TASK_LIMIT = "JobArrayTaskLimit"
PRIORITY = "Priority"
BAD_PARTITION = "PartitionDown"  # the job's partitions were removed from the configuration


@dataclass
class _CycleState:
    """What one cycle learns as it goes (tentative starts, blocked partitions, counters)."""

    overlay: Overlay = field(default_factory=Overlay)
    starts: list[Start] = field(default_factory=list)
    blocked: set[str] = field(default_factory=set)
    active_tasks: Counter[int] = field(default_factory=Counter)
    tested: int = 0
    assoc: AssocUsage | None = None  # association/QOS usage when limits are enforced


def run_cycle(snap: Snapshot, now: int) -> CycleResult:
    """Decide which pending jobs start now, where, and why the others wait."""
    parts = {part.name: part for part in snap.partitions}
    statuses = dependency.status_index(snap.jobs)
    priorities = all_priorities(snap, now)
    queue = sorted(snap.pending, key=lambda job: _queue_key(job, parts, priorities))
    state = _CycleState(active_tasks=_active_array_tasks(snap.jobs))
    if snap.accounting is not None:
        state.assoc = AssocUsage(snap.accounting, snap.running, now)
    reasons: dict[int, str] = {}
    for job in queue:
        reason = _schedule_one(job, snap, now, statuses, state)
        if reason is not None:
            reasons[job.job_id] = reason
    planned = backfill(snap, now, queue, state, reasons)
    return CycleResult(starts=tuple(state.starts), reasons=reasons, priorities=priorities, planned=planned)


def _schedule_one(
    job: JobRequest,
    snap: Snapshot,
    now: int,
    statuses: Mapping[int, list[JobStatus]],
    state: _CycleState,
) -> str | None:
    """Try one job: None when it starts (its Start is recorded), else its pending reason."""
    # 1. Eligibility: holds, begin time, dependencies.
    if job.held_admin:
        return HELD_ADMIN
    if job.held_user:
        return HELD_USER
    if job.begin_time > now:
        return BEGIN_TIME
    verdict = dependency.evaluate(job, statuses)
    if verdict != "ok":
        return DEPENDENCY if verdict == "wait" else DEPENDENCY_NEVER
    # 2. Partition limits: a partition that cannot take the job as asked is skipped.
    candidates = candidate_partitions(job, snap)
    if not candidates:
        return BAD_PARTITION
    limit_reasons = [limits.partition_limit_reason(job, part) for part in candidates]
    open_parts = [part for part, why in zip(candidates, limit_reasons, strict=True) if why is None]
    if not open_parts:
        return next(why for why in limit_reasons if why is not None)
    # 3. Array throttle (--array=...%N).
    if job.array_job_id and job.array_max_running:
        if state.active_tasks[job.array_job_id] >= job.array_max_running:
            return ARRAY_TASK_LIMIT
    # 3b. Association and QOS limits (AccountingStorageEnforce=limits).
    if state.assoc is not None:
        why = state.assoc.reason(job, limits.effective_time_limit(job, open_parts[0]))
        if why is not None:
            return why
    # 4. Higher-priority jobs that could not start hold their partitions.
    unblocked = [part for part in open_parts if part.name not in state.blocked]
    if not unblocked:
        return PRIORITY
    if state.tested >= snap.config.max_job_test:
        return PRIORITY
    state.tested += 1
    # 5. Placement against free resources plus this cycle's starts; all nodes or none.
    first_reason: str | None = None
    for part in unblocked:
        found = place(job, part, snap, state.overlay)
        if isinstance(found, Start):
            state.overlay.add(found)
            state.starts.append(found)
            if job.array_job_id:
                state.active_tasks[job.array_job_id] += 1
            if state.assoc is not None:
                state.assoc.add(job, found.time_limit_min)
            return None
        first_reason = first_reason or found
    if first_reason == RESOURCES:
        state.blocked.update(part.name for part in unblocked)
    return first_reason or RESOURCES


def backfill(
    snap: Snapshot, now: int, queue: list[JobRequest], state: _CycleState, reasons: dict[int, str]
) -> dict[int, Planned]:
    """Under sched/backfill, start lower-priority jobs that delay no higher one (see backfill.py).

    Its starts join the cycle's; the plans of jobs still waiting are returned (squeue --start).
    """
    if snap.config.scheduler != "sched/backfill":
        return {}
    found = run_backfill(snap, now, queue, state.starts, reasons, state.active_tasks)
    for start in found.starts:
        state.overlay.add(start)
        state.starts.append(start)
        reasons.pop(start.job_id, None)
    return found.planned


def queue_order_key(job: JobRequest, parts: Mapping[str, Partition], now: int) -> tuple[int, int, int, int]:
    """A pending job's place in the queue, as run_cycle sorts it (lower first); for `shoal sim`."""
    return _queue_key(job, parts, {job.job_id: _priority(job, parts, now)})


def _priority(job: JobRequest, parts: Mapping[str, Partition], now: int) -> int:
    first = next((parts[name] for name in job.partitions if name in parts), None)
    if first is None:
        return job.admin_priority if job.admin_priority is not None else 0
    return job_priority(job, first, now)


def _queue_key(
    job: JobRequest, parts: Mapping[str, Partition], priorities: Mapping[int, int]
) -> tuple[int, int, int, int]:
    tier = max((parts[name].priority_tier for name in job.partitions if name in parts), default=0)
    return (-tier, -priorities[job.job_id], job.submit_time, job.job_id)


def _active_array_tasks(jobs: tuple[JobStatus, ...]) -> Counter[int]:
    return Counter(s.array_job_id for s in jobs if s.array_job_id and s.phase is Phase.ACTIVE)
