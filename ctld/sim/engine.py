"""The event-driven simulator: a virtual clock drives `run_cycle`, the live controller's core.

At every moment something happens (jobs submitted, jobs ending at their run time) the simulator
applies the events, hands the core a snapshot and applies the starts it decides with the live
controller's own code (ctld/decisions.py: the job's record, its end by its limit, the nodes' usage).
Nothing about scheduling is decided here. The snapshot is kept incrementally: node usage changes only on the
nodes a start or an end touches, and the queue is kept in the core's order, so a cycle sees only
the jobs it could consider (the first `depth` = max(default_queue_depth, bf_max_job_test) jobs);
when every one of them starts, the cycle runs again at the same moment, so nothing is lost.
Priorities are taken as fixed from submit (true of priority/basic and the sim's policies).
Starving jobs (starve.py: shoal_starve_*) join the batch wherever they are in the queue, since
backfill tests them first; the moment each starts starving is known at submit.
Every cycle backfills (`run_cycle`'s default), unlike live ctld, which backfills every bf_interval
(ctld/applier.py): the simulated traces are minutes to days apart, where a 1 s cadence moves no start,
and the simulator's goldens and its policy comparisons stay those of the schedule itself.
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ctld import decisions
from ctld.record import JobRecord
from ctld.sched import cycle, limits, starve
from ctld.sched.model import (
    UNLIMITED,
    Config,
    JobRequest,
    Node,
    Partition,
    RunningJob,
    Snapshot,
    Start,
)
from ctld.sched.resources import job_cpus
from ctld.sim.swf import TraceJob

FOREVER = 2**62


@dataclass(slots=True)
class JobResult:
    job_id: int
    submit: int
    start: int
    end: int
    run: int
    cpus: int
    nodes: int
    timed_out: bool = False  # ran into its time limit: ended there (Slurm's TIMEOUT)

    @property
    def wait(self) -> int:
        return self.start - self.submit


Progress = Callable[[int, int], None]  # (jobs finished, jobs in all)


class Simulation:
    def __init__(
        self,
        nodes: Sequence[Node],
        partitions: Sequence[Partition],
        config: Config,
        request: Callable[[TraceJob], JobRequest],
        shortcuts: bool = True,
        promote: Callable[[int], int] | None = None,
    ) -> None:
        """`shortcuts=False` runs every cycle on the whole batch (the reference the tests compare to)."""
        self.config = config
        self.nodes = {n.name: n for n in nodes}
        self.order = [n.name for n in nodes]
        self.partitions = tuple(partitions)
        self._parts = {p.name: p for p in partitions}
        self.request = request
        self.promote = promote  # submit time -> the priority the oldest waiting job gets (sjbf)
        self.depth = max(1, min(config.max_job_test, config.bf_max_job_test))
        self.backfill = config.scheduler == "sched/backfill"
        # Pruning (see _prune) relies on EASY's single reservation and no per-user test limit.
        self.prune = shortcuts and (
            not self.backfill or (config.bf_reservations == 1 and config.bf_max_job_user == 0)
        )
        self.shortcuts = shortcuts
        self.starve = starve.enabled(config)
        if config.scheduler != "sched/backfill":
            # strict order: jobs behind the first that waits cannot start; the rerun below keeps
            # a small batch exact
            self.depth = max(1, min(config.max_job_test, 16))

    def run(self, jobs: Sequence[TraceJob], progress: Progress | None = None) -> list[JobResult]:
        """Replay `jobs` (sorted by submit) on an empty machine; one result per job that started."""
        arrivals = sorted(jobs, key=lambda j: (j.submit, j.job_id))
        trace = {j.job_id: j for j in arrivals}
        queue_keys: list[tuple[tuple[int, int, int, int, int], int]] = []
        requests: dict[int, JobRequest] = {}
        running: dict[int, RunningJob] = {}
        ends: list[tuple[int, int]] = []
        results: dict[int, JobResult] = {}
        next_arrival = 0
        done = 0
        keys: dict[int, tuple[tuple[int, int, int, int, int], int]] = {}
        oldest: list[tuple[int, int]] = []  # (submit, job id) of waiting jobs, when promoting
        promoted = -1  # the waiting job that holds the promoted priority
        quiet_until = 0  # the last cycle started nothing; until then nothing it saw changes by itself
        starves: list[tuple[int, int]] = []  # (moment it starves, job id) of jobs not starving yet
        starving = _StarvingJobs()  # waiting jobs that starve
        cpus_of: dict[int, int] = {}  # the fewest CPUs each job can start with
        while next_arrival < len(arrivals) or ends:
            now = min(
                arrivals[next_arrival].submit if next_arrival < len(arrivals) else ends[0][0],
                ends[0][0] if ends else arrivals[next_arrival].submit,
            )
            while starves and starves[0][1] not in requests:
                heapq.heappop(starves)  # started before it starved
            if starves:
                now = min(now, starves[0][0])  # a cycle when a job starts starving, as ctld's periodic one
            while ends and ends[0][0] <= now:
                _, job_id = heapq.heappop(ends)
                self._release(running.pop(job_id))
                done += 1
                quiet_until = 0
            while next_arrival < len(arrivals) and arrivals[next_arrival].submit <= now:
                tj = arrivals[next_arrival]
                next_arrival += 1
                req = self.request(tj)
                requests[tj.job_id] = req
                cpus_of[tj.job_id] = job_cpus(req)
                key = keys[tj.job_id] = (cycle.queue_order_key(req, self._parts, now, self.config), tj.job_id)
                at = bisect.bisect(queue_keys, key)
                queue_keys.insert(at, key)
                if at < self.depth or req.admin_priority is None:
                    quiet_until = 0  # the next cycle sees a new job (or priorities that may age)
                if self.promote is not None:
                    heapq.heappush(oldest, (tj.submit, tj.job_id))
                if self.starve:
                    heapq.heappush(starves, (starve.starves_at(req, self._parts, self.config), tj.job_id))
            while starves and starves[0][0] <= now:
                _, job_id = heapq.heappop(starves)
                if job_id in requests:
                    starving.add(job_id, starve.waiting_since(requests[job_id]))
                    if self.config.starve_max <= 0 or starving.rank(job_id) < self.config.starve_max:
                        # backfill now tests it first; a job past the cap changes nothing, and the
                        # next cycle may be skipped like any fruitless repeat
                        quiet_until = 0
            if now < quiet_until:
                # Same running jobs, same first `depth` queued jobs, nothing past its limit since
                # the last cycle, which started nothing: this one would start nothing either.
                if progress is not None:
                    progress(done, len(arrivals))
                continue
            quiet_until = 0
            while queue_keys:
                if self.promote is not None:
                    while oldest and oldest[0][1] not in requests:
                        heapq.heappop(oldest)  # started
                    if oldest and oldest[0][1] != promoted:
                        promoted = oldest[0][1]
                        queue_keys.pop(bisect.bisect_left(queue_keys, keys[promoted]))
                        req = dataclasses.replace(
                            requests[promoted], admin_priority=self.promote(requests[promoted].submit_time)
                        )
                        requests[promoted] = req
                        keys[promoted] = (cycle.queue_order_key(req, self._parts, now, self.config), promoted)
                        bisect.insort(queue_keys, keys[promoted])
                batch = queue_keys[: self.depth]
                # backfill tests the shoal_starve_max oldest first (0: all); the others keep their
                # place in the queue, where the batch's depth already ends the pass
                reserving = set(starving.oldest(self.config.starve_max))
                if reserving and len(queue_keys) > self.depth:
                    batch = batch + sorted(keys[j] for j in reserving if keys[j] > batch[-1])
                if self.shortcuts and min(cpus_of[job_id] for _, job_id in batch) > self._free_cpus():
                    break  # every job asks for more CPUs than are free: nothing can start
                pending = [requests[job_id] for _, job_id in batch]
                snap = Snapshot(
                    nodes=tuple(self.nodes[name] for name in self.order),
                    partitions=self.partitions,
                    pending=tuple(self._prune(pending, reserving)) if self.prune else tuple(pending),
                    running=tuple(running.values()),
                    jobs=(),
                    config=self.config,
                )
                result = cycle.run_cycle(snap, now)
                started = {s.job_id for s in result.starts}
                for start in result.starts:
                    tj = trace[start.job_id]
                    # the live applier's code (ctld/decisions.py): the record, the nodes' usage
                    job = JobRecord(job_id=tj.job_id, submit_time=tj.submit)
                    decisions.apply_start(job, start, now, {})
                    end, timed_out = decisions.run_end(job.start_time, tj.run, job.time_limit_min)
                    running[start.job_id] = self._hold(start, job)
                    heapq.heappush(ends, (end, start.job_id))
                    results[start.job_id] = JobResult(
                        tj.job_id, tj.submit, now, end, end - now, job.num_cpus, job.num_nodes, timed_out
                    )
                    del requests[start.job_id]
                    starving.discard(start.job_id)
                if started:
                    queue_keys = [k for k in queue_keys if k[1] not in started]
                if len(started) < len(batch):
                    if not started and self.shortcuts:
                        quiet_until = self._quiet_until(now, running, pending)
                    break
            if progress is not None:
                progress(done, len(arrivals))
        return [results[j.job_id] for j in arrivals if j.job_id in results]

    def _free_cpus(self) -> int:
        """CPUs free on available nodes: no job asking for more can start (so no cycle is needed)."""
        return sum(n.cpus - len(n.usage.cpu_ids) for n in self.nodes.values() if n.available)

    def _prune(self, batch: list[JobRequest], reserving: set[int]) -> list[JobRequest]:
        """The batch less the jobs the cycle would only pass over: the same decisions, sooner.

        When every job waits on the same one partition, with fixed priorities, a job asking for
        more CPUs than the partition has free cannot start; the first such job (or an earlier
        one) blocks the partition in the main pass and takes EASY's one reservation in backfill,
        after which any later job that big is skipped by both passes without a trace (the batch
        is within max_job_test and bf_max_job_test, and nothing counts tests per user). Jobs a
        partition limit holds back, exclusive ones and the starving ones that may get a reservation
        of their own (`reserving`: the shoal_starve_max oldest) are always kept.
        tests/unit/sim checks a replay with and without pruning decides the same.
        """
        first = batch[0].partitions if batch else ()
        if len(first) != 1 or first[0] not in self._parts:
            return batch
        part = self._parts[first[0]]
        if part.exclusive or any(job.partitions != first or job.admin_priority is None for job in batch):
            return batch
        free = 0
        for name in part.nodes:
            node = self.nodes.get(name)
            if node is not None and node.available:
                free += node.cpus - len(node.usage.cpu_ids)
        kept: list[JobRequest] = []
        seen_too_big = False
        for job in batch:
            if (
                job.exclusive
                or job.job_id in reserving
                or limits.partition_limit_reason(job, part) is not None
            ):
                kept.append(job)
                continue
            too_big = job_cpus(job) > free
            if not too_big or not seen_too_big:
                kept.append(job)
            seen_too_big = seen_too_big or too_big
        return kept

    def _quiet_until(self, now: int, running: dict[int, RunningJob], batch: list[JobRequest]) -> int:
        """Until when a repeat of this fruitless cycle (same jobs, no releases) must start nothing.

        A cycle depends on `now` only through bf_resolution's rounding, the bf_window horizon and
        jobs past their limit (released at once). With a 1 s resolution and a horizon beyond every
        plan (each begins before the last running job's end plus every batch job's limit), nothing
        changes until the next running job reaches its limit. 0 when that cannot be shown.
        """
        ends = [r.end_time for r in running.values() if r.end_time > 0]
        if self.backfill:
            limits = [job.time_limit_min for job in batch]
            if self.config.bf_resolution_s > 1 or any(m < 0 or m == UNLIMITED for m in limits):
                return 0
            latest_plan = max(ends, default=now) + 60 * sum(limits)
            if latest_plan > now + 60 * self.config.bf_window_min:
                return 0
        return min((end for end in ends if end > now), default=FOREVER)

    def _hold(self, start: Start, job: JobRecord) -> RunningJob:
        """A start: its nodes' usage grows, and it holds them until start + limit."""
        for alloc in start.allocation:
            self.nodes[alloc.node] = decisions.take(self.nodes[alloc.node], alloc, start.exclusive)
        return decisions.running_view(job)

    def _release(self, job: RunningJob) -> None:
        for alloc in job.allocation:
            self.nodes[alloc.node] = decisions.give_back(self.nodes[alloc.node], alloc)


class _StarvingJobs:
    """The waiting jobs that starve, oldest first (by when they became eligible, then job id)."""

    def __init__(self) -> None:
        self._order: list[tuple[int, int]] = []
        self._key: dict[int, tuple[int, int]] = {}

    def add(self, job_id: int, since: int) -> None:
        key = self._key[job_id] = (since, job_id)
        bisect.insort(self._order, key)

    def discard(self, job_id: int) -> None:
        key = self._key.pop(job_id, None)
        if key is not None:
            del self._order[bisect.bisect_left(self._order, key)]

    def rank(self, job_id: int) -> int:
        """How many starving jobs are older."""
        return bisect.bisect_left(self._order, self._key[job_id])

    def oldest(self, count: int) -> list[int]:
        """The `count` oldest (0: all)."""
        chosen = self._order[:count] if count > 0 else self._order
        return [job_id for _, job_id in chosen]
