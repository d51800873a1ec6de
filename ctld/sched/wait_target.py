"""shoal_wait_target: reservations for starving jobs only while one of them would miss a wait target.

A reservation for every job that has waited a while (shoal_starve_wait alone) protects wide jobs but
holds room that the queue's short jobs would have used, so slowdowns rise. With
`shoal_wait_target=M`, the starving jobs (the shoal_starve_max oldest) are first planned, oldest
first, each after the older ones: a cheap plan by CPU count (free now, plus what running jobs
release, less what the main pass started and the older ones are planned to hold), which is a lower
bound of when each could start. If some job's planned start would come more than M minutes after
it became eligible, it and every older starving job (the ones its plan waits for) are *urgent*:
each gets a reservation, tested first in the backfill pass as starving jobs are (starve.py).
Otherwise no starving job holds anything, and backfill runs as without starvation.

This is a deadline on the plan, not on the queue: a convoy of wide, long jobs submitted together
gets its reservations early enough that the last of them still starts near its target, while jobs
whose plan is comfortably within the target never hold room. The plan counts CPUs, not shapes, so
on a cluster of many nodes it can be optimistic (a reservation then comes a little late), never
early.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

from ctld.sched import limits, starve
from ctld.sched.free_profile import FreeProfile
from ctld.sched.limits import FOREVER, job_end
from ctld.sched.model import JobRequest, Partition, Snapshot
from ctld.sched.resources import job_cpus

if TYPE_CHECKING:
    from ctld.sched.backfill import Timeline


def urgent_first(
    timeline: Timeline,
    queue: Sequence[JobRequest],
    open_partitions: Callable[[JobRequest, Snapshot], list[Partition]],
) -> tuple[list[JobRequest], frozenset[int]]:
    """`queue` (the jobs backfill may plan) with its urgent jobs first, oldest first; and their ids."""
    snap, now, config = timeline.snap, timeline.now, timeline.snap.config
    ordered, starving = starve.starving_first(queue, {p.name: p for p in snap.partitions}, config, now)
    if not starving:
        return list(queue), frozenset()
    oldest = ordered[: len(starving)]
    target = 60 * config.wait_target_min
    profiles: dict[str, FreeProfile] = {}
    planned: list[tuple[int, int, int, frozenset[str]]] = []  # (begin, end, CPUs, nodes) so far
    last = -1  # the youngest job whose plan misses its target
    for i, job in enumerate(oldest):
        cpus = job_cpus(job)
        best: tuple[int, int, Partition | None] = (FOREVER, FOREVER, None)
        for part in open_partitions(job, snap):
            limit = limits.effective_time_limit(job, part)
            profile = _profile(profiles, timeline, part, planned)
            begin = profile.first_fit(cpus, partial(_end, limit))
            if begin < best[0]:
                best = (begin, job_end(begin, limit), part)
        begin, end, chosen = best
        if chosen is not None:
            planned.append((begin, end, cpus, frozenset(chosen.nodes)))
            for profile in profiles.values():  # the partitions that share its nodes lose them too
                if not profile.nodes.isdisjoint(chosen.nodes):
                    _take(profile, timeline, begin, end, cpus)
        if begin > starve.waiting_since(job) + target:
            last = i
    urgent = oldest[: last + 1]
    ids = frozenset(job.job_id for job in urgent)
    return [*urgent, *(job for job in queue if job.job_id not in ids)], ids


def _end(limit_min: int, begin: int) -> int:
    return job_end(begin, limit_min)


def _profile(
    profiles: dict[str, FreeProfile],
    timeline: Timeline,
    part: Partition,
    planned: list[tuple[int, int, int, frozenset[str]]],
) -> FreeProfile:
    """The partition's profile, with what is planned so far on nodes it shares."""
    found = profiles.get(part.name)
    if found is None:
        found = profiles[part.name] = timeline.profile(part).copy()
        for begin, end, cpus, nodes in planned:
            if not found.nodes.isdisjoint(nodes):
                _take(found, timeline, begin, end, cpus)
    return found


def _take(profile: FreeProfile, timeline: Timeline, begin: int, end: int, cpus: int) -> None:
    """A planned job's CPUs, and its end as a moment a later one may begin (as Timeline.hold)."""
    profile.take(begin, end, cpus)
    if end < FOREVER:
        profile.add_moment(timeline.rounded(end))
