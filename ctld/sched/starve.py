"""shoal's short-jobs-first order and starvation reservations (SchedulerParameters shoal_*).

`shoal_short_first=M`: jobs whose time limit is at most M minutes go first in the queue, shortest
limit first; every other job keeps its place by priority. Nearly all bounded slowdown comes from
jobs that run minutes, and their processor-time is small, so letting them pass costs the rest little.

Short jobs first can starve a wide job: while short ones keep the queue head, the head holds EASY's
one reservation and the wide job never gets one. `shoal_starve_wait=M` and `shoal_starve_xfactor=X`
give a *starving* job (one that has waited M minutes, or whose expansion factor
(wait + limit) / limit has reached X) a backfill reservation of its own, oldest first and before
the queue head's, so no later job is backfilled into the room it needs (selective reservations,
Srinivasan, Kettimuthu, Subramani and Sadayappan 2002). Starving jobs keep their place in the main
pass, so they never block the partition for the jobs above them. `shoal_starve_max=N` keeps it to
the N oldest starving jobs per pass (each reservation costs backfill work; 0 = all). With
`shoal_wait_target`, starving jobs get their reservations only while one of them would miss that
target (wait_target.py). Only what a controller knows is used: the time limit, when the job became
eligible, and now.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ctld.sched import limits
from ctld.sched.limits import FOREVER
from ctld.sched.model import UNLIMITED, Config, JobRequest, Partition

LONG = 2**62  # the short-first rank of a job that is not short


def enabled(config: Config) -> bool:
    """Whether any job may starve (a reservation of its own)."""
    return config.starve_wait_min > 0 or config.starve_xfactor > 0


def _limit_min(job: JobRequest, parts: Mapping[str, Partition]) -> int:
    """The job's time limit in minutes as its first partition applies it (UNLIMITED: -2)."""
    first = next((parts[name] for name in job.partitions if name in parts), None)
    return limits.effective_time_limit(job, first) if first is not None else job.time_limit_min


def short_rank(job: JobRequest, parts: Mapping[str, Partition], config: Config) -> int:
    """The job's time limit when shoal_short_first counts it short (lower runs first), else LONG."""
    if config.short_first_min <= 0:
        return LONG
    limit = _limit_min(job, parts)
    if limit == UNLIMITED or limit < 0 or limit > config.short_first_min:
        return LONG
    return limit


def waiting_since(job: JobRequest) -> int:
    return max(job.submit_time, job.begin_time)


def starves_at(job: JobRequest, parts: Mapping[str, Partition], config: Config) -> int:
    """The moment the job starts starving (FOREVER: never)."""
    moments = []
    if config.starve_wait_min > 0:
        moments.append(waiting_since(job) + 60 * config.starve_wait_min)
    limit = _limit_min(job, parts) if config.starve_xfactor > 0 else UNLIMITED
    if limit != UNLIMITED and limit >= 0:
        # (wait + limit) / limit >= X  <=>  wait >= (X - 1) * limit; a limit under a minute counts as one
        moments.append(waiting_since(job) + (config.starve_xfactor - 1) * 60 * max(1, limit))
    return min(moments, default=FOREVER)


def starving_first(
    queue: Sequence[JobRequest], parts: Mapping[str, Partition], config: Config, now: int
) -> tuple[list[JobRequest], frozenset[int]]:
    """`queue` with its starving jobs (the oldest shoal_starve_max) moved to the front, oldest first;
    and their ids."""
    if not enabled(config):
        return list(queue), frozenset()
    starving = [job for job in queue if starves_at(job, parts, config) <= now]
    if not starving:
        return list(queue), frozenset()
    starving.sort(key=lambda job: (waiting_since(job), job.job_id))
    if config.starve_max > 0:
        starving = starving[: config.starve_max]  # the oldest: each reservation costs backfill work
    ids = frozenset(job.job_id for job in starving)
    return starving + [job for job in queue if job.job_id not in ids], ids
