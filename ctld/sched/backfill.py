"""Backfill (sched/backfill): start lower-priority jobs now when that delays no reservation.

After the main pass, the pending jobs it could not start are walked in priority order over a
resource timeline: running jobs hold what they have until their end time (start + limit), and
every start or reservation made in this pass holds its allocation over [start, start + limit).
For each job the earliest time it fits is found with the one placement function (`place`) against
the union of everything held during the job's whole run, so a job that starts now can never take
what a reservation needs before that reservation ends. A job that fits now starts; otherwise the
top jobs get a reservation at their earliest start (all tested jobs, as Slurm, or only the first
`bf_reservations`: 1 is EASY). A job that cannot be planned within bf_window (or whose start
depends on jobs without an end) blocks its partitions for the rest of the pass, so it is never
starved by a stream of small jobs. Starving jobs (starve.py) are tested first and each gets a
reservation. Moments at which a job cannot have enough CPUs by count (free now, plus what running
jobs release by then, less what holds use at any moment of its run) are skipped before any
placement is tried. `bf_strict` (the simulator's RLScheduler rule) backfills only jobs that end by the
first reservation, even when they would use only processors the reservations leave free.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ctld.sched import limits, placement, reservations, starve, wait_target
from ctld.sched.free_profile import FreeProfile
from ctld.sched.limits import FOREVER, job_end
from ctld.sched.model import JobRequest, Partition, Pend, Planned, Snapshot, Start, Waiting
from ctld.sched.placement import Overlay, candidate_partitions, place, release
from ctld.sched.resources import is_exclusive, job_cpus
from ctld.sched.siblings import same_ask


@dataclass(frozen=True, slots=True)
class Hold:
    """An allocation held over [begin, end): a start of this cycle or a reservation."""

    begin: int
    end: int
    start: Start


@dataclass
class BackfillResult:
    starts: list[Start] = field(default_factory=list)
    planned: dict[int, Planned] = field(default_factory=dict)


class Timeline:
    """What is held when, from `now` on: running jobs until their end, plus this pass's holds."""

    def __init__(self, snap: Snapshot, now: int, starts: Iterable[Start]) -> None:
        self.snap = snap
        self.now = now
        resolution = max(1, snap.config.bf_resolution_s)
        self._ends = sorted((r for r in snap.running if r.end_time > 0), key=lambda r: r.end_time)
        # planned times are the job ends rounded up to bf_resolution, after now: a job past its end
        # (COMPLETING, or its limit not yet enforced) holds what it has until it is gone
        self._release_times = [now + _round_up(max(1, r.end_time - now), resolution) for r in self._ends]
        self._resolution = resolution
        self._at: dict[int, Snapshot] = {0: snap}  # releases applied -> snapshot (cached per pass)
        self._blank: dict[int, Overlay] = {}  # releases applied -> an empty overlay bound to that snapshot
        self.holds: list[Hold] = []
        self._cycle_holds = 0  # the first holds: the main pass's starts (kept apart, see _grown)
        self._with_cycle: dict[
            tuple[int, tuple[int, ...]], Overlay
        ] = {}  # (releases, those holds) -> overlay
        # ... and the moments reservations start or end (the nodes they keep change then)
        boundaries = reservations.boundaries(snap.reservations, now)
        self._times: list[int] = sorted({now, *(t for t in self._release_times if t >= now), *boundaries})
        self._freed: dict[str, tuple[int, list[int]]] = {}  # partition -> (free now, CPUs released by count)
        self._nodes_now = {n.name: n for n in snap.nodes}
        self._profiles: dict[str, FreeProfile] = {}  # partition -> its CPUs free by count, by moment
        # A state is an overlay of some holds over the snapshot after some releases; windows
        # (releases, begin, end) point at one, and a state grown by the same holds is shared.
        self._states: dict[int, Overlay] = {}
        self._grown_to: dict[
            tuple[int, int, tuple[int, ...]], int
        ] = {}  # (releases, state, holds added) -> state
        self._users: Counter[int] = Counter()  # windows pointing at each state
        self._made = 0  # states made so far (the next one's id)
        self._windows: dict[tuple[int, int, int], tuple[int, int]] = {}  # window -> (holds seen, state)
        for start in starts:
            self.hold(now, start)
        self._cycle_holds = len(self.holds)

    def hold(self, begin: int, start: Start) -> None:
        hold = Hold(begin, job_end(begin, start.time_limit_min), start)
        self.holds.append(hold)
        moment = FOREVER
        if hold.end < FOREVER:
            moment = self.rounded(hold.end)
            at = bisect.bisect_left(self._times, moment)
            if at == len(self._times) or self._times[at] != moment:
                self._times.insert(at, moment)
        for profile in self._profiles.values():
            cpus = sum(a.cpus for a in start.allocation if a.node in profile.nodes)
            if cpus:
                profile.take(begin, hold.end, cpus)
            if moment < FOREVER:
                profile.add_moment(moment)

    def state(self, begin: int, end: int) -> tuple[Snapshot, Overlay]:
        """The snapshot at `begin` and an overlay of every hold overlapping [begin, end).

        Callers never change either. Windows that see the same releases and holds share one
        overlay (and its per-node Free and indexes); when a new hold overlaps a window, its overlay
        takes the hold in place if no other window shares it, else a copy does.
        """
        count = bisect.bisect_right(self._release_times, begin)
        if not placement.SHORTCUTS:  # the plain way, for tests to compare with: every overlapping hold afresh
            plain = Overlay()
            plain.add_all(h.start for h in self.holds if h.begin < end and h.end > begin)
            return self._snapshot_at(count), plain
        window = (count, begin, end)
        seen, state = self._windows.get(window, (0, -1))
        new = tuple(i for i in range(seen, len(self.holds)) if self._overlaps(i, begin, end))
        if state >= 0 and not new:
            return self._snapshot_at(count), self._states[state]
        link = (count, state, new)
        grown = self._grown_to.get(link, -1)
        if grown not in self._states:
            grown = self._grown_to[link] = self._made
            self._made += 1
            self._states[grown] = self._grown(count, state, new)
        if state >= 0:
            self._users[state] -= 1
            if self._users[state] <= 0:
                del self._states[state]
        self._users[grown] += 1
        self._windows[window] = (len(self.holds), grown)
        return self._snapshot_at(count), self._states[grown]

    def _overlaps(self, i: int, begin: int, end: int) -> bool:
        hold = self.holds[i]
        return hold.begin < end and hold.end > begin

    def _grown(self, count: int, base: int, new: tuple[int, ...]) -> Overlay:
        """State `base` (-1: no holds) plus the holds `new`: `base` itself when no other window uses it."""
        if base >= 0:
            overlay = self._states[base] if self._users[base] == 1 else self._states[base].copy()
        else:
            # a new window: the main pass's starts it overlaps (thousands) are added once per set
            ours = tuple(i for i in new if i < self._cycle_holds)
            seed = self._with_cycle.get((count, ours))
            if seed is None:
                blank = self._blank.get(count)
                if blank is None:
                    blank = self._blank[count] = Overlay()
                    blank.order(self._snapshot_at(count))  # binds it: copies share its per-snapshot pools
                seed = self._with_cycle[(count, ours)] = blank.copy()
                seed.add_all(self.holds[i].start for i in ours)
            overlay = seed.copy()
            new = new[len(ours) :]
        overlay.add_all(self.holds[i].start for i in new)
        return overlay

    def rounded(self, moment: int) -> int:
        """`moment` as the timeline plans it: rounded up to bf_resolution from now."""
        return self.now + _round_up(max(0, moment - self.now), self._resolution)

    def profile(self, part: Partition) -> FreeProfile:
        """The CPUs free in `part` by count at each candidate moment (free now, plus what running
        jobs release by then, less what holds use then); kept up to date as holds are made.

        At any one moment the running jobs and the holds then use distinct CPUs, and place() sees
        no more than what neither uses. A hold of the main pass on CPUs a running job still has (a
        preemptor's room, kept while its victims end) counts 0: the running job already counts them.
        """
        found = self._profiles.get(part.name)
        if found is not None:
            return found
        nodes = frozenset(part.nodes)
        gives_back: Counter[int] = Counter()  # moment -> CPUs the main pass's holds free then
        in_use = 0
        for hold in self.holds[: self._cycle_holds]:  # thousands on a big cluster: one sweep
            mine = [a for a in hold.start.allocation if a.node in nodes]
            if mine and all(self._busy_now(a.node).isdisjoint(a.cpu_ids) for a in mine):
                cpus = sum(a.cpus for a in mine)
                in_use += cpus
                gives_back[hold.end] += cpus
        candidates = self._times
        times = sorted({*candidates, *(t for t in gives_back if t < FOREVER)})
        free = []
        for moment in times:
            in_use -= gives_back.get(moment, 0)
            free.append(self._released_by(part, moment) - in_use)
        found = self._profiles[part.name] = FreeProfile(nodes, times, free)
        if len(times) > len(candidates):
            member = set(candidates)
            found.begins = [t in member for t in times]
        for hold in self.holds[self._cycle_holds :]:
            cpus = sum(a.cpus for a in hold.start.allocation if a.node in nodes)
            if cpus:
                found.take(hold.begin, hold.end, cpus)
        return found

    def _busy_now(self, name: str) -> frozenset[int]:
        node = self._nodes_now.get(name)
        return node.usage.cpu_ids if node is not None else frozenset()

    def _released_by(self, part: Partition, begin: int) -> int:
        """An upper bound of the CPUs free in `part` at `begin` (holds ignored), from counts alone."""
        found = self._freed.get(part.name)
        if found is None:
            names = frozenset(part.nodes)
            members = {n.name: n for n in self.snap.nodes if n.name in names and n.available}
            free = sum(n.cpus - len(n.usage.cpu_ids) for n in members.values())
            # CPUs each release gives back, as release() does: a node's last holder frees all of it
            used = {name: len(n.usage.cpu_ids) for name, n in members.items()}
            holders = Counter(name for running in self.snap.running for name in running.nodes)
            released = [0]
            for running in self._ends:
                held = {a.node: len(a.cpu_ids) for a in running.allocation}
                cpus = 0
                for name in running.nodes:
                    holders[name] -= 1
                    if name in used:
                        back = used[name] if holders[name] <= 0 else min(used[name], held.get(name, 0))
                        used[name] -= back
                        cpus += back
                released.append(released[-1] + cpus)
            found = self._freed[part.name] = (free, released)
        free, released = found
        return free + released[bisect.bisect_right(self._release_times, begin)]

    def _snapshot_at(self, count: int) -> Snapshot:
        """The snapshot once the first `count` running jobs (by end) have released."""
        cached = self._at.get(count)
        if cached is not None:
            return cached
        base = max(k for k in self._at if k < count)
        nodes = {node.name: node for node in self._at[base].nodes}
        holders = Counter(name for running in self.snap.running for name in running.nodes)
        for running in self._ends[:base]:
            for name in running.nodes:
                holders[name] -= 1
        for running in self._ends[base:count]:
            release(running, nodes, holders)
        later = replace(self.snap, nodes=tuple(nodes[node.name] for node in self.snap.nodes))
        self._at[count] = later
        return later


def run_backfill(
    snap: Snapshot,
    now: int,
    queue: Sequence[JobRequest],
    starts: Sequence[Start],
    verdicts: Mapping[int, Waiting],
    active_tasks: Counter[int] | None = None,
    admit: Callable[[JobRequest], bool] | None = None,
) -> BackfillResult:
    """The backfill pass over `queue` (priority order) after the main pass started `starts`.

    `admit` has the last word on a job that fits now (association/QOS limits, counted as jobs start);
    a job it refuses neither starts nor holds anything.
    """
    config = snap.config
    timeline = Timeline(snap, now, starts)
    horizon = now + max(0, config.bf_window_min) * 60
    now_overlay = timeline.state(now, now + 1)[1]
    free_cpus = sum(len(now_overlay.free(node).cpu_ids) for node in snap.nodes if node.available)
    result = BackfillResult()
    blocked: set[str] = set()
    per_user: Counter[int] = Counter()
    tasks = active_tasks if active_tasks is not None else Counter()
    tested = reserved = 0
    first_reservation = FOREVER  # bf_strict: no job that ends after it is backfilled
    # starving jobs (starve.py) are tested first, oldest first, and each may get a reservation
    if config.wait_target_min > 0 and starve.enabled(config):
        waiting = [job for job in queue if isinstance(verdicts.get(job.job_id), Pend)]
        queue, starving = wait_target.urgent_first(timeline, waiting, _open_partitions)
    else:
        queue, starving = starve.starving_first(queue, {p.name: p for p in snap.partitions}, config, now)
    array_plans: dict[int, list[Planned]] = {}  # array -> the plans (reservations) its tasks got
    no_room: dict[int, JobRequest] = {}  # array -> a task over bf_max_job_array_resv that did not fit now
    for job in queue:
        if not isinstance(verdicts.get(job.job_id), Pend):
            continue  # only a job waiting for room gets a plan (a reservation's job: for its start)
        if tested >= config.bf_max_job_test:
            break
        over_array_limit = (
            job.array_job_id != 0
            and len(array_plans.get(job.array_job_id, ())) >= max(0, config.bf_max_job_array_resv)
            and job.job_id not in starving
        )
        if over_array_limit:
            # no reservation: it shows when its array's last reserved task is planned, as the array's
            # record does in Slurm; a task asking what one that found no room now asked finds none
            # either (this pass only ever takes room), so it is not tried again
            plans = array_plans.get(job.array_job_id)
            if plans:
                result.planned[job.job_id] = Planned(plans[-1].start_time, ())
            seen = no_room.get(job.array_job_id)
            if seen is not None and same_ask(seen, job):
                continue
        if config.bf_max_job_user and per_user[job.user_id] >= config.bf_max_job_user:
            continue
        if job.array_job_id and job.array_max_running and tasks[job.array_job_id] >= job.array_max_running:
            continue
        parts = [p for p in _open_partitions(job, snap) if p.name not in blocked or job.reservation]
        if not parts:
            continue
        tested += 1
        per_user[job.user_id] += 1
        may_reserve = not over_array_limit and (
            config.bf_reservations <= 0 or reserved < config.bf_reservations or job.job_id in starving
        )
        cpus = job_cpus(job)
        if not may_reserve and _cpus_needed(job, parts, cpus) > free_cpus:
            if over_array_limit:
                no_room[job.array_job_id] = job
            continue  # cannot start now, and gets no reservation: no need to place it
        found = _earliest(job, parts, timeline, horizon if may_reserve else now, cpus)
        if found is None:
            if may_reserve and not job.reservation:
                blocked.update(p.name for p in parts)
            if over_array_limit:
                no_room[job.array_job_id] = job
            continue
        begin, start = found
        if begin <= now and config.bf_strict and job_end(now, start.time_limit_min) > first_reservation:
            continue  # fits beside the reservations, but ends after the first (RLScheduler's rule)
        if begin <= now and admit is not None and not admit(job):
            continue
        timeline.hold(begin, start)
        if begin <= now:
            result.planned.pop(job.job_id, None)
            result.starts.append(replace(start, by_backfill=True))
            free_cpus -= sum(a.cpus for a in start.allocation)
            if job.array_job_id:
                tasks[job.array_job_id] += 1
        else:
            reserved += job.job_id not in starving
            first_reservation = min(first_reservation, begin)
            plan = result.planned[job.job_id] = Planned(begin, tuple(a.node for a in start.allocation))
            if job.array_job_id:
                array_plans.setdefault(job.array_job_id, []).append(plan)
    return result


def _earliest(
    job: JobRequest, parts: list[Partition], timeline: Timeline, until: int, cpus: int
) -> tuple[int, Start] | None:
    """The first candidate time (not after `until`) at which the job fits for its whole run
    (`cpus`: job_cpus(job)). Only moments with enough CPUs free by count through the whole run
    (Timeline.profile) are tried: at any other, place() would say Resources."""
    needed = {part.name: _cpus_needed(job, [part], cpus) for part in parts}
    if not placement.SHORTCUTS:  # the plain way, for tests to compare with: every candidate moment
        needed = dict.fromkeys(needed, 0)
    limit = {part.name: limits.effective_time_limit(job, part) for part in parts}

    def next_fit(part: Partition, earliest: int) -> int:
        minutes = limit[part.name]
        return timeline.profile(part).first_fit(
            needed[part.name], lambda t: job_end(t, minutes), earliest, until
        )

    fits = {p.name: next_fit(p, timeline.now) for p in parts}
    while (begin := min(fits.values())) < FOREVER:
        for part in parts:
            if fits[part.name] != begin:
                continue
            snap, overlay = timeline.state(begin, job_end(begin, limit[part.name]))
            found = place(job, part, snap, overlay, begin)
            if isinstance(found, Start):
                return begin, found
            fits[part.name] = next_fit(part, begin + 1)
    return None


def _open_partitions(job: JobRequest, snap: Snapshot) -> list[Partition]:
    return [p for p in candidate_partitions(job, snap) if limits.partition_limit_reason(job, p) is None]


def _cpus_needed(job: JobRequest, parts: list[Partition], cpus: int) -> int:
    """The fewest CPUs the job could start with (0 = unknown: whole nodes); `cpus` = job_cpus(job)."""
    if any(is_exclusive(job, part) for part in parts):
        return 0
    return cpus


def _round_up(seconds: int, step: int) -> int:
    return -(-seconds // step) * step
