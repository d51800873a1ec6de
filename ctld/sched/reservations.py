"""Advance reservations in the core: which nodes a job may use over one run window, and when.

A reservation keeps its nodes for its own jobs over [start, end), again and again for the recurring
ones (DAILY, WEEKLY, WEEKDAY, WEEKEND: occurrence k covers [start + k*period, end + k*period)). A job
without it may not use those nodes for any part of its run, so a long job never starts on nodes a
reservation needs before it ends; a job in it (`--reservation`) runs only on its nodes and only
while it is active, unless FLEX lets it use other nodes and start early. The gate is asked for a
run window, so "now" (the main pass) and "later" (backfill, --test-only) use the same rule.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from ctld.sched.model import JobRequest, Pend, Reservation, Unresolvable
from ctld.sched.reasons import MAY_BE_RESERVED, RESERVATION, RESERVATION_DELETED, RESERVED_FOR_MAINT

DAY = 86400
WEEK = 7 * DAY
DAY_FLAGS = frozenset({"DAILY", "WEEKDAY", "WEEKEND"})

WAIT_REASONS = frozenset({RESERVATION, RESERVED_FOR_MAINT, MAY_BE_RESERVED})  # backfill may plan these


@dataclass(frozen=True, slots=True)
class Gate:
    """The nodes one job may use over one run window."""

    only: frozenset[str] | None  # the job's own reservation's nodes; None = any node
    closed: frozenset[str]  # kept by reservations the job is not in
    maint_closed: frozenset[str]  # the part of `closed` kept for maintenance

    def admits(self, name: str) -> bool:
        return name not in self.closed and (self.only is None or name in self.only)

    def reason_for(self, names: Iterable[str]) -> str | None:
        """The reason word when some of `names` are closed to the job, else None."""
        shut = self.closed.intersection(names)
        if not shut:
            return None
        return RESERVED_FOR_MAINT if shut & self.maint_closed else MAY_BE_RESERVED


def find(reservations: Iterable[Reservation], name: str) -> Reservation | None:
    return next((r for r in reservations if r.name == name), None)


def _period(resv: Reservation) -> int:
    """Seconds between occurrences of a recurring reservation; 0 for a one-off."""
    if "WEEKLY" in resv.flags:
        return WEEK
    if resv.flags & DAY_FLAGS:
        return DAY
    return 0


def _occurs(resv: Reservation, k: int) -> bool:
    """Whether occurrence k takes place (WEEKDAY/WEEKEND skip the other days)."""
    if not resv.flags & {"WEEKDAY", "WEEKEND"}:
        return True
    local_day = (resv.start_time + k * DAY + resv.utc_offset_s) // DAY
    weekday = (local_day + 3) % 7  # 1970-01-01 was a Thursday; Monday = 0
    return weekday < 5 if "WEEKDAY" in resv.flags else weekday >= 5


def overlaps(resv: Reservation, begin: int, end: int) -> bool:
    """Whether the reservation (any occurrence of a recurring one) holds its nodes during [begin, end)."""
    if end <= begin or end <= resv.start_time:
        return False
    period = _period(resv)
    if not period:
        return begin < resv.end_time
    # occurrence k overlaps [begin, end) when start + k*period < end and end_time + k*period > begin
    first = max(0, (begin - resv.end_time) // period + 1)
    last = (end - resv.start_time - 1) // period
    if last - first >= 7:  # a week of occurrences: one of them takes place
        return True
    return any(_occurs(resv, k) for k in range(first, last + 1))


def is_active(resv: Reservation, at: int) -> bool:
    return overlaps(resv, at, at + 1)


def waiting_reason(
    job: JobRequest, reservations: Iterable[Reservation], now: int
) -> Pend | Unresolvable | None:
    """Why a job in a reservation cannot start now whatever is free: deleted (for good), or not
    started yet (backfill plans it for the reservation's start)."""
    if not job.reservation:
        return None
    own = find(reservations, job.reservation)
    if own is None:
        return Unresolvable(RESERVATION_DELETED)
    if "FLEX" not in own.flags and not is_active(own, now):
        return Pend(RESERVATION)
    return None


def gate(job: JobRequest, reservations: tuple[Reservation, ...], begin: int, end: int) -> Gate | None:
    """What the job may use if it runs over [begin, end); None when no reservation restricts it."""
    if not reservations:
        return None
    own = find(reservations, job.reservation) if job.reservation else None
    others = [r for r in reservations if r is not own and overlaps(r, begin, end)]
    closed = frozenset(name for r in others for name in r.nodes)
    maint = frozenset(name for r in others if "MAINT" in r.flags for name in r.nodes)
    only: frozenset[str] | None = None
    if job.reservation and (own is None or "FLEX" not in own.flags):
        only = own.nodes if own is not None and is_active(own, begin) else frozenset()
    if only is None and not closed:
        return None
    return Gate(only=only, closed=closed, maint_closed=maint)


def boundaries(reservations: Iterable[Reservation], now: int) -> set[int]:
    """The moments after `now` when some reservation starts or ends (backfill tries these)."""
    times: set[int] = set()
    for resv in reservations:
        period = _period(resv)
        upcoming = [k for k in range(8) if _occurs(resv, k)][:2] if period else [0]
        for k in upcoming:
            for t in (resv.start_time + k * period, resv.end_time + k * period):
                if t > now:
                    times.add(t)
    return times


def roll(resv: Reservation, now: int) -> Reservation | None:
    """The reservation as it stands at `now`: None once over, a recurring one moved to its next
    occurrence that has not ended (and takes place: WEEKDAY/WEEKEND skip the other days)."""
    period = _period(resv)
    if now < resv.end_time and (not period or _occurs(resv, 0)):
        return resv
    if not period:
        return None
    k = max(1, (now - resv.end_time) // period + 1)
    while not _occurs(resv, k):
        k += 1
    return replace(resv, start_time=resv.start_time + k * period, end_time=resv.end_time + k * period)
