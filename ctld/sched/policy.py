"""Queue-order policies for `shoal sim`, expressed as the priority the core sorts by.

`fcfs` and `easy` order by submit time (easy adds EASY backfill); `sjf` orders by the estimate
(shortest first, then submit time), with backfill. `sjbf` is EASY with shortest job backfilled
first (Tsafrir, Etsion and Feitelson's EASY-SJBF): the oldest waiting job ranks above all others,
so it is the one that holds EASY's reservation (no job waits behind younger ones once it is the
oldest), and every other job is ordered shortest estimate first, so short jobs backfill first.
The simulator gives the oldest waiting job `promoted_priority` before each cycle.

`short` and `shoal` are slurm.conf settings (starve.py, wait_target.py), so a live controller runs
them as they are: `short` = FCFS with jobs of a time limit up to 10 minutes first, shortest first
(SchedulerParameters=shoal_short_first=10), EASY backfill; `shoal` = jobs of up to 30 minutes
first (shoal_short_first=30), and the 10 oldest jobs that have waited 6 hours are planned by CPU
count; whenever one of them would start more than 2.5 days after it became eligible, it and the
older ones get a reservation each (shoal_starve_wait=360, shoal_wait_target=3600,
shoal_starve_max=10), which bounds what short-jobs-first costs the wide jobs.
bench/README.md has the measurements behind both.

Larger priority runs first, as in the core. `conf` leaves the priority to priority.py, as a live
cluster would.
"""

from __future__ import annotations

from ctld.sched.model import Config

POLICIES = ("fcfs", "easy", "sjf", "sjbf", "short", "shoal", "conf")
TOP = 2**62
SHORT_MIN = 10  # `short`: SchedulerParameters=shoal_short_first=10
# `shoal`: SchedulerParameters=shoal_short_first=30,shoal_starve_wait=360,shoal_wait_target=3600,
# shoal_starve_max=10
SHORT_FIRST_MIN = 30
STARVE_WAIT_MIN = 360
STARVE_XFACTOR = 0
STARVE_MAX = 10
WAIT_TARGET_MIN = 3600


def policy_priority(policy: str, submit_time: int, estimate_s: int) -> int | None:
    """The admin priority a trace job gets under `policy` (None: the core computes it)."""
    if policy in ("fcfs", "easy", "short", "shoal"):
        return TOP - submit_time
    if policy == "sjf":
        return TOP - estimate_s * 2**32 - submit_time
    if policy == "sjbf":
        return policy_priority("sjf", submit_time, estimate_s)
    return None


def promotes_oldest(policy: str) -> bool:
    """Whether the oldest waiting job gets `promoted_priority` (sjbf)."""
    return policy == "sjbf"


def promoted_priority(submit_time: int) -> int:
    """Above every unpromoted priority; older first among promoted jobs."""
    return 2 * TOP - submit_time


def policy_config(policy: str, base: Config) -> Config:
    """The scheduler knobs a policy implies on top of `base` (the slurm.conf's, or the defaults).

    A named policy is that policy whatever the slurm.conf says: its shoal_* options are replaced.
    """
    from dataclasses import replace

    if policy == "conf":
        return base
    plain = replace(
        base, short_first_min=0, starve_wait_min=0, starve_xfactor=0, starve_max=0, wait_target_min=0
    )
    if policy == "fcfs":
        return replace(plain, scheduler="sched/builtin")
    easy = replace(plain, scheduler="sched/backfill", bf_reservations=1)
    if policy == "short":
        return replace(easy, short_first_min=SHORT_MIN)
    if policy == "shoal":
        return replace(
            easy,
            short_first_min=SHORT_FIRST_MIN,
            starve_wait_min=STARVE_WAIT_MIN,
            starve_xfactor=STARVE_XFACTOR,
            starve_max=STARVE_MAX,
            wait_target_min=WAIT_TARGET_MIN,
        )
    return easy
