"""One scheduling cycle: Slurm's builtin scheduler over a snapshot, read top to bottom.

Pending jobs are tried in order (partition PriorityTier, priority, submit time, job id). A job that
cannot get resources blocks its partitions: every lower job there waits with reason Priority, so a
big job is never starved by a stream of small ones. Under sched/backfill, `backfill()` then starts
lower jobs that delay no higher one.

With preemption on (PreemptType=preempt/qos or preempt/partition_prio), a job that cannot start for
Resources may have running jobs preempted for it (see preemption.py): the cycle returns them in
`CycleResult.preemptions` and holds the allocation the job will get, so that no lower job takes it.
Quota reclaim (borrowing.py) ends borrowing jobs for a job within its guaranteed quota the same way,
whatever PreemptType says. Victims of mode SUSPEND are stopped in place and their preemptor starts in
the same cycle; jobs so suspended whose CPUs/GPUs are free again are resumed first (`resumes`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial

from ctld.sched import dependency, limits, preemption, reservations, starve, topology
from ctld.sched.assoc_limits import AssocUsage
from ctld.sched.backfill import run_backfill
from ctld.sched.model import (
    Config,
    CycleResult,
    JobRequest,
    JobStatus,
    Partition,
    Pend,
    Phase,
    Planned,
    Preemption,
    Snapshot,
    Start,
    Unresolvable,
    Waiting,
)
from ctld.sched.placement import Overlay, candidate_partitions, place
from ctld.sched.priority import all_priorities, job_priority
from ctld.sched.reasons import (
    ARRAY_TASK_LIMIT,
    BEGIN_TIME,
    DEPENDENCY,
    DEPENDENCY_NEVER,
    HELD_ADMIN,
    HELD_USER,
    PARTITION_DOWN,
    PRIORITY,
    RESOURCES,
)
from ctld.sched.siblings import Siblings

BAD_PARTITION = PARTITION_DOWN  # the job's partitions were removed from the configuration
WAITS_ITS_TURN = Pend(PRIORITY)  # higher-priority jobs hold its partitions
BUSY = Pend(RESOURCES, busy=True)  # not enough free now


@dataclass
class _CycleState:
    """What one cycle learns as it goes (tentative starts, blocked partitions, counters)."""

    overlay: Overlay = field(default_factory=Overlay)
    starts: list[Start] = field(default_factory=list)
    blocked: set[str] = field(default_factory=set)
    active_tasks: Counter[int] = field(default_factory=Counter)
    tested: int = 0
    assoc: AssocUsage | None = None  # association/QOS usage when limits are enforced
    preemptions: list[Preemption] = field(default_factory=list)
    held: list[Start] = field(default_factory=list)  # where preemptors will start, kept from lower jobs

    def mark(self) -> tuple[int, int, int, int, int]:
        """Where the pass stands: every field above only grows, so an unchanged mark means nothing moved."""
        return len(self.starts), len(self.preemptions), len(self.held), len(self.blocked), self.tested


def run_cycle(snap: Snapshot, now: int, with_backfill: bool = True) -> CycleResult:
    """Decide which pending jobs start now, where, and why the others wait.

    `with_backfill=False` runs the main pass alone (the controller backfills every bf_interval, not
    on every event): no backfill start, and no new plan (`CycleResult.backfilled` is False).
    """
    statuses = dependency.status_index(snap.jobs)
    priorities = all_priorities(snap, now)
    queue = queue_order(snap, priorities)
    if snap.topology is not None:  # --switches=N holds only until the job has waited long enough
        queue = [topology.switch_request(job, now, snap.config) for job in queue]
    state = _CycleState(active_tasks=_active_array_tasks(snap.jobs))
    if snap.accounting is not None:
        state.assoc = AssocUsage(snap.accounting, snap.running, now)
        if state.assoc.cohorts.enabled:  # guaranteed quota that eligible jobs wait for is not lent out
            for job in queue:
                if _ineligible(job, now, statuses) is None:
                    state.assoc.wait_for(job)
    resumes = tuple(preemption.resumable(snap))  # even with preemption since turned off
    verdicts: dict[int, Waiting] = {}
    alike: Siblings[Waiting] = Siblings()  # an array's tasks asking alike: one answer while nothing moves
    for job in queue:
        before = state.mark()
        verdict = alike.known(job, before)
        if verdict is None:
            verdict = _schedule_one(job, snap, now, statuses, state)
            if verdict is not None and state.mark() == before:
                alike.remember(job, before, verdict)
        if verdict is not None:
            verdicts[job.job_id] = verdict
    planned = backfill(snap, now, queue, state, verdicts) if with_backfill else {}
    return CycleResult(
        starts=tuple(state.starts),
        verdicts=verdicts,
        priorities=priorities,
        planned=planned,
        preemptions=tuple(state.preemptions),
        resumes=resumes,
        plans_kept=not with_backfill and snap.config.scheduler == "sched/backfill",
    )


def queue_order(snap: Snapshot, priorities: Mapping[int, int]) -> list[JobRequest]:
    """The pending jobs in the order the cycle tries them (see _queue_key)."""
    parts = {part.name: part for part in snap.partitions}
    return sorted(snap.pending, key=lambda job: _queue_key(job, parts, priorities, snap.config))


def _ineligible(job: JobRequest, now: int, statuses: Mapping[int, list[JobStatus]]) -> Unresolvable | None:
    """Why the job may not start whatever the resources (holds, begin time, dependencies), or None."""
    if job.held_admin:
        return Unresolvable(HELD_ADMIN)
    if job.held_user:
        return Unresolvable(HELD_USER)
    if job.begin_time > now:
        return Unresolvable(BEGIN_TIME)
    why = dependency_reason(job, statuses)
    return Unresolvable(why) if why is not None else None


def dependency_reason(job: JobRequest, statuses: Mapping[int, list[JobStatus]]) -> str | None:
    """Dependency or DependencyNeverSatisfied while the job's --dependency holds it back, else None."""
    verdict = dependency.evaluate(job, statuses)
    if verdict == "ok":
        return None
    return DEPENDENCY if verdict == "wait" else DEPENDENCY_NEVER


def open_partitions(job: JobRequest, snap: Snapshot) -> tuple[list[Partition], str | None]:
    """The job's partitions that can take it as asked, and, when none can, why (PartitionDown,
    PartitionTimeLimit ...: the first refusing partition's word)."""
    candidates = candidate_partitions(job, snap)
    if not candidates:
        return [], BAD_PARTITION
    limit_reasons = [limits.partition_limit_reason(job, part) for part in candidates]
    open_parts = [part for part, why in zip(candidates, limit_reasons, strict=True) if why is None]
    if not open_parts:
        return [], next(why for why in limit_reasons if why is not None)
    return open_parts, None


def _schedule_one(
    job: JobRequest,
    snap: Snapshot,
    now: int,
    statuses: Mapping[int, list[JobStatus]],
    state: _CycleState,
) -> Waiting | None:
    """Try one job: None when it starts (its Start is recorded), else why it waits."""
    # 1. Eligibility: holds, begin time, dependencies.
    if (ineligible := _ineligible(job, now, statuses)) is not None:
        return ineligible
    if (outside := reservations.waiting_reason(job, snap.reservations, now)) is not None:
        return outside
    # 2. Partition limits: a partition that cannot take the job as asked is skipped.
    open_parts, refused = open_partitions(job, snap)
    if refused is not None:
        return Unresolvable(refused)
    # 3. Array throttle (--array=...%N).
    if job.array_job_id and job.array_max_running:
        if state.active_tasks[job.array_job_id] >= job.array_max_running:
            return Unresolvable(ARRAY_TASK_LIMIT)
    # 3b. Association and QOS limits (AccountingStorageEnforce=limits).
    if state.assoc is not None:
        limit = state.assoc.reason(job, limits.effective_time_limit(job, open_parts[0]))
        if limit is not None:
            return Unresolvable(limit)
    # 4. Higher-priority jobs that could not start hold their partitions.
    # (a reservation's jobs use its own nodes: jobs waiting outside it hold them back from nothing)
    unblocked = [part for part in open_parts if part.name not in state.blocked or job.reservation]
    if not unblocked:
        return WAITS_ITS_TURN
    if state.tested >= snap.config.max_job_test:
        return WAITS_ITS_TURN
    state.tested += 1
    # 5. Placement against free resources plus this cycle's starts; all nodes or none.
    first: Waiting | None = None
    for part in unblocked:
        found = place(job, part, snap, state.overlay, now)
        if isinstance(found, Start):
            _start(job, found, state)
            return None
        first = first or found
    if isinstance(first, Pend) and first.busy:
        # 6. Room made by ending other jobs (quota reclaim, then preemption) is held for the job;
        #    otherwise it blocks its partitions (not a reservation's job: it waits for its own nodes).
        if not (
            _reclaim(job, unblocked, snap, now, state)
            or (preemption.enabled(snap) and _preempt_for(job, unblocked, snap, now, state))
        ):
            if not job.reservation:
                state.blocked.update(part.name for part in unblocked)
        elif state.starts and state.starts[-1].job_id == job.job_id:
            return None  # started in the place of the jobs it suspended
    return first or BUSY


def _start(job: JobRequest, start: Start, state: _CycleState) -> None:
    state.overlay.add(start)
    state.starts.append(start)
    if job.array_job_id:
        state.active_tasks[job.array_job_id] += 1
    if state.assoc is not None:
        state.assoc.add(job, start.time_limit_min)


def _preempt_for(
    job: JobRequest, parts: list[Partition], snap: Snapshot, now: int, state: _CycleState
) -> bool:
    """Preempt what `job` needs and hold where it will start (it stays pending); False when nothing helps.

    The held room keeps lower jobs off it, so the job need not block its partitions.
    """
    chosen = {p.job_id for p in state.preemptions}
    lent = {p.job_id for p in state.preemptions if p.mode == preemption.SUSPEND}
    found = preemption.plan(job, parts, snap, state.overlay, now, chosen, lent)
    if found is not None and found.now:  # its victims are suspended: it starts in their place now
        state.preemptions.extend(found.victims)
        _start(job, found.start, state)
        return True
    return _hold(found, state)


def _reclaim(job: JobRequest, parts: list[Partition], snap: Snapshot, now: int, state: _CycleState) -> bool:
    """A job within its guaranteed quota takes it back from borrowing siblings (borrowing.py): the
    victims are requeued through preemption (after their QOS's GraceTime) and the room is held."""
    if state.assoc is None:
        return False
    gone = frozenset(p.job_id for p in state.preemptions).union(r.job_id for r in snap.running if r.releasing)
    return _hold(state.assoc.reclaim(job, parts, snap, state.overlay, gone, now), state)


def _hold(found: preemption.Plan | None, state: _CycleState) -> bool:
    """Record a plan's victims and hold where its job will start; False without a plan."""
    if found is None:
        return False
    state.preemptions.extend(found.victims)
    state.overlay.add(found.start)
    state.held.append(found.start)
    return True


def backfill(
    snap: Snapshot, now: int, queue: list[JobRequest], state: _CycleState, verdicts: dict[int, Waiting]
) -> dict[int, Planned]:
    """Under sched/backfill, start lower-priority jobs that delay no higher one (see backfill.py).

    Its starts join the cycle's; the plans of jobs still waiting are returned (squeue --start).
    """
    if snap.config.scheduler != "sched/backfill":
        return {}
    held = {start.job_id for start in state.held}  # preemptors already hold where they will start
    waiting = [job for job in queue if job.job_id not in held] if held else queue
    admit = partial(_within_limits, state.assoc, verdicts) if state.assoc is not None else None
    found = run_backfill(
        snap, now, waiting, [*state.starts, *state.held], verdicts, state.active_tasks, admit
    )
    for start in found.starts:
        state.overlay.add(start)
        state.starts.append(start)
        verdicts.pop(start.job_id, None)
    return found.planned


def _within_limits(usage: AssocUsage, verdicts: dict[int, Waiting], job: JobRequest) -> bool:
    """A job backfill would start now: association/QOS limits (and quota borrowing) count the jobs
    started so far in this cycle; over a limit, it waits with that reason."""
    why = usage.reason(job)
    if why is not None:
        verdicts[job.job_id] = Unresolvable(why)
        return False
    usage.add(job)
    return True


def queue_order_key(
    job: JobRequest, parts: Mapping[str, Partition], now: int, config: Config
) -> tuple[int, int, int, int, int]:
    """A pending job's place in the queue, as run_cycle sorts it (lower first); for `shoal sim`."""
    return _queue_key(job, parts, {job.job_id: _priority(job, parts, now)}, config)


def _priority(job: JobRequest, parts: Mapping[str, Partition], now: int) -> int:
    first = next((parts[name] for name in job.partitions if name in parts), None)
    if first is None:
        return job.admin_priority if job.admin_priority is not None else 0
    return job_priority(job, first, now)


def _queue_key(
    job: JobRequest, parts: Mapping[str, Partition], priorities: Mapping[int, int], config: Config
) -> tuple[int, int, int, int, int]:
    """PriorityTier, then short jobs first (shoal_short_first), priority, submit time, job id."""
    tier = max((parts[name].priority_tier for name in job.partitions if name in parts), default=0)
    return (
        -tier,
        starve.short_rank(job, parts, config),
        -priorities[job.job_id],
        job.submit_time,
        job.job_id,
    )


def _active_array_tasks(jobs: tuple[JobStatus, ...]) -> Counter[int]:
    return Counter(s.array_job_id for s in jobs if s.array_job_id and s.phase is Phase.ACTIVE)
