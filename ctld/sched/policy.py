"""Queue-order policies for `shoal sim`, expressed as the priority the core sorts by.

`fcfs` and `easy` order by submit time (easy adds EASY backfill); `sjf` orders by the estimate
(shortest first, then submit time), with backfill. `sjbf` is EASY with shortest job backfilled
first (Tsafrir, Etsion and Feitelson's EASY-SJBF): the oldest waiting job ranks above all others,
so it is the one that holds EASY's reservation (no job waits behind younger ones once it is the
oldest), and every other job is ordered shortest estimate first, so short jobs backfill first.
The simulator gives the oldest waiting job `promoted_priority` before each cycle.

`shoal` is the configuration shoal ships for small-job-heavy workloads: jobs estimated under
`SHORT_S` go first, shortest first; every other job follows in submit order; EASY backfill. Nearly
all bounded slowdown comes from jobs that run minutes (bench/README.md measures it), and their
processor-time is small, so letting them pass costs the long jobs little, while long jobs keep
first-come-first-served order among themselves (pure sjf lets a long job wait behind every shorter
one). The priority depends only on what a live controller knows at submit (time limit, submit
time), so priority.py could compute it as well.

Larger priority runs first, as in the core. `conf` leaves the priority to priority.py, as a live
cluster would.
"""

from __future__ import annotations

from ctld.sched.model import Config

POLICIES = ("fcfs", "easy", "sjf", "sjbf", "shoal", "conf")
TOP = 2**62
SHORT_S = 600  # `shoal`: jobs estimated under this many seconds go first
LONG = 2**50  # below every short job's priority (estimates up to years)


def policy_priority(policy: str, submit_time: int, estimate_s: int) -> int | None:
    """The admin priority a trace job gets under `policy` (None: the core computes it)."""
    if policy in ("fcfs", "easy"):
        return TOP - submit_time
    if policy == "sjf":
        return TOP - estimate_s * 2**32 - submit_time
    if policy == "sjbf":
        return policy_priority("sjf", submit_time, estimate_s)
    if policy == "shoal":
        if estimate_s < SHORT_S:
            return policy_priority("sjf", submit_time, estimate_s)
        return TOP - LONG - submit_time
    return None


def promotes_oldest(policy: str) -> bool:
    """Whether the oldest waiting job gets `promoted_priority` (sjbf)."""
    return policy == "sjbf"


def promoted_priority(submit_time: int) -> int:
    """Above every unpromoted priority; older first among promoted jobs."""
    return 2 * TOP - submit_time


def policy_config(policy: str, base: Config) -> Config:
    """The scheduler knobs a policy implies on top of `base` (the slurm.conf's, or the defaults)."""
    from dataclasses import replace

    if policy == "fcfs":
        return replace(base, scheduler="sched/builtin")
    if policy in ("easy", "sjf", "sjbf", "shoal"):
        return replace(base, scheduler="sched/backfill", bf_reservations=1)
    return base
