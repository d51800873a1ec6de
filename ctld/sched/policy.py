"""Queue-order policies for `shoal sim`, expressed as the priority the core sorts by.

`fcfs` and `easy` order by submit time (easy adds EASY backfill); `sjf` orders by the estimate
(shortest first, then submit time), with backfill. `sjf-age` is shortest-estimate-first with an
age term: a job's priority grows by AGE_WEIGHT seconds of estimate per second it waits, so
priority(now) = AGE_WEIGHT * (now - submit) - estimate. The growth is the same for every job, so
the order never changes with `now` (it is the order of estimate + AGE_WEIGHT * submit) and a long
job waits at most about estimate / AGE_WEIGHT behind jobs submitted after it. Larger priority runs
first, as in the core. `conf` leaves the priority to priority.py, as a live cluster would.
"""

from __future__ import annotations

from ctld.sched.model import Config

POLICIES = ("fcfs", "easy", "sjf", "sjf-age", "conf")
TOP = 2**62
AGE_WEIGHT = (1, 1)  # seconds of estimate forgiven per second of waiting, as a fraction (num, den)


def policy_priority(policy: str, submit_time: int, estimate_s: int) -> int | None:
    """The admin priority a trace job gets under `policy` (None: the core computes it)."""
    if policy in ("fcfs", "easy"):
        return TOP - submit_time
    if policy == "sjf":
        return TOP - estimate_s * 2**32 - submit_time
    if policy == "sjf-age":
        num, den = AGE_WEIGHT
        return TOP - (estimate_s * den + submit_time * num)
    return None


def policy_config(policy: str, base: Config) -> Config:
    """The scheduler knobs a policy implies on top of `base` (the slurm.conf's, or the defaults)."""
    from dataclasses import replace

    if policy == "fcfs":
        return replace(base, scheduler="sched/builtin")
    if policy in ("easy", "sjf", "sjf-age"):
        return replace(base, scheduler="sched/backfill", bf_reservations=1)
    return base
