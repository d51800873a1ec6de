"""Advance reservations in the core: which nodes a job may use over one run window, and when.

A reservation keeps its nodes for its own jobs over [start, end) (every day for DAILY). A job
without it may not use those nodes for any part of its run, so a long job never starts on nodes a
reservation needs before it ends; a job in it (`--reservation`) runs only on its nodes and only
while it is active, unless FLEX lets it use other nodes and start early. The gate is asked for a
run window, so "now" (the main pass) and "later" (backfill, --test-only) use the same rule.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from ctld.sched.model import JobRequest, Reservation

DAY = 86400
RESERVATION = "Reservation"  # the job's reservation has not started yet
RESERVATION_DELETED = "ReservationDeleted"
RESERVED_FOR_MAINT = "ReqNodeNotAvail, Reserved for maintenance"  # Slurm says so for any reservation
MAY_BE_RESERVED = "ReqNodeNotAvail, May be reserved for other job"
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


def overlaps(resv: Reservation, begin: int, end: int) -> bool:
    """Whether the reservation (any day of a DAILY one) holds its nodes during [begin, end)."""
    if end <= begin or end <= resv.start_time:
        return False
    if "DAILY" not in resv.flags:
        return begin < resv.end_time
    if end - begin >= DAY:
        return True
    day = max(0, (begin - resv.start_time) // DAY)
    return any(
        begin < resv.end_time + k * DAY and end > resv.start_time + k * DAY for k in (day, day + 1)
    )


def is_active(resv: Reservation, at: int) -> bool:
    return overlaps(resv, at, at + 1)


def waiting_reason(job: JobRequest, reservations: Iterable[Reservation], now: int) -> str | None:
    """Why a job in a reservation cannot start now whatever is free: deleted, or not started yet."""
    if not job.reservation:
        return None
    own = find(reservations, job.reservation)
    if own is None:
        return RESERVATION_DELETED
    if "FLEX" not in own.flags and not is_active(own, now):
        return RESERVATION
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
        days = (0, DAY) if "DAILY" in resv.flags else (0,)
        for k in days:
            for t in (resv.start_time + k, resv.end_time + k):
                if t > now:
                    times.add(t)
    return times


def roll(resv: Reservation, now: int) -> Reservation | None:
    """The reservation as it stands at `now`: None once over, a DAILY one moved to its next day."""
    if now < resv.end_time:
        return resv
    if "DAILY" not in resv.flags:
        return None
    days = (now - resv.end_time) // DAY + 1
    return replace(resv, start_time=resv.start_time + days * DAY, end_time=resv.end_time + days * DAY)
