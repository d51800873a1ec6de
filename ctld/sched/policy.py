"""Queue-order policies for `shoal sim`, expressed as the priority the core sorts by.

`fcfs` and `easy` order by submit time (easy adds EASY backfill); `sjf` orders by the estimate
(shortest first, then submit time), with backfill. `sjbf` is EASY with shortest job backfilled
first (Tsafrir, Etsion and Feitelson's EASY-SJBF): the oldest waiting job ranks above all others,
so it is the one that holds EASY's reservation (no job waits behind younger ones once it is the
oldest), and every other job is ordered shortest estimate first, so short jobs backfill first.
The simulator gives the oldest waiting job `promoted_priority` before each cycle. Larger priority runs first, as in the core. `conf` leaves the priority to
priority.py, as a live cluster would.
"""

from __future__ import annotations

from collections.abc import Callable

from ctld.sched.model import Config

POLICIES = ("fcfs", "easy", "sjf", "sjbf", "conf")
TOP = 2**62


def policy_priority(policy: str, submit_time: int, estimate_s: int) -> int | None:
    """The admin priority a trace job gets under `policy` (None: the core computes it)."""
    if policy in ("fcfs", "easy"):
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


def waiting_priority(policy: str) -> Callable[[int, int, int], int] | None:
    """For a policy whose order changes as jobs wait: priority(submit, estimate_s, now)."""
    return None


def policy_config(policy: str, base: Config) -> Config:
    """The scheduler knobs a policy implies on top of `base` (the slurm.conf's, or the defaults)."""
    from dataclasses import replace

    if policy == "fcfs":
        return replace(base, scheduler="sched/builtin")
    if policy in ("easy", "sjf", "sjbf"):
        return replace(base, scheduler="sched/backfill", bf_reservations=1)
    return base
