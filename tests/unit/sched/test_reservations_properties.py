"""Reservation invariants over random clusters, queues and reservations (hypothesis).

- a job outside a reservation never starts (or is planned by backfill) on its nodes for any part
  of its run that overlaps the reservation;
- a job in a reservation starts only on its nodes, and only while it is active.
"""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from ctld.sched.cycle import run_cycle
from ctld.sched.limits import job_end
from ctld.sched.model import JobRequest, Reservation, Snapshot
from ctld.sched.reservations import is_active, overlaps
from tests.unit.sched.test_backfill_properties import NOW, snapshots


@st.composite
def with_reservations(draw: st.DrawFn) -> Snapshot:
    snap = draw(snapshots())
    names = [n.name for n in snap.nodes]
    reservations = []
    for i in range(draw(st.integers(1, 2))):
        start = NOW + draw(st.integers(-3600, 7200))
        nodes = frozenset(draw(st.lists(st.sampled_from(names), min_size=1, unique=True)))
        flags = frozenset(draw(st.sampled_from([(), (), ("MAINT",), ("DAILY",)])))
        end = start + 60 * draw(st.integers(10, 240))
        reservations.append(Reservation(f"r{i}", start, end, nodes, flags))
    pending = tuple(
        dataclasses.replace(job, reservation=draw(st.sampled_from(["", "", "r0", "r1"])))
        for job in snap.pending
    )
    return dataclasses.replace(snap, pending=pending, reservations=tuple(reservations))


def _others(job: JobRequest, snap: Snapshot) -> list[Reservation]:
    return [r for r in snap.reservations if r.name != job.reservation]


@settings(max_examples=300, deadline=None)
@given(with_reservations())
def test_reserved_nodes_are_kept_for_their_reservation(snap: Snapshot) -> None:
    result = run_cycle(snap, NOW)
    jobs = {job.job_id: job for job in snap.pending}
    by_name = {r.name: r for r in snap.reservations}
    for start in result.starts:
        job = jobs[start.job_id]
        used = {a.node for a in start.allocation}
        end = job_end(NOW, start.time_limit_min)
        for other in _others(job, snap):
            if overlaps(other, NOW, end):
                assert not used & other.nodes, (job, other)
        own = by_name.get(job.reservation)
        if job.reservation:
            assert own is not None and is_active(own, NOW) and used <= own.nodes
    for job_id, plan in result.planned.items():
        job = jobs[job_id]
        end = job_end(plan.start_time, job.time_limit_min)
        for other in _others(job, snap):
            if overlaps(other, plan.start_time, end):
                assert not set(plan.nodes) & other.nodes, (job, other, plan)
