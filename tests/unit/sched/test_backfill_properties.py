"""Backfill invariants over random clusters and queues (hypothesis).

- a job started by backfill never delays the planned start of a higher-priority job: each planned
  start is the same whether or not the lower jobs are in the queue;
- a reservation is honest: at its start, what it holds is free of every job still running then;
- nothing exceeds capacity and every start is whole.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from ctld.sched.backfill import job_end
from ctld.sched.cycle import run_cycle
from ctld.sched.model import Config, JobRequest, Node, NodeAllocation, NodeUsage, RunningJob, Snapshot, Start
from ctld.sched.resources import node_count_range
from tests.unit.sched.builders import node, snapshot

NOW = 100_000


def _request(job_id: int, draw: st.DrawFn, node_count: int) -> JobRequest:
    spread = draw(st.booleans())
    fewest = draw(st.integers(1, node_count))
    tasks = draw(st.integers(1, 10))
    return JobRequest(
        job_id=job_id,
        user_id=draw(st.sampled_from([1000, 1001])),
        name="j",
        submit_time=job_id,
        partitions=("batch",),
        min_nodes=1 if spread else fewest,
        max_nodes=tasks if spread else 0,
        num_tasks=tasks,
        mem_per_cpu_mb=100,
        time_limit_min=draw(st.integers(1, 120)),
        exclusive=draw(st.integers(0, 5)) == 0,
    )


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    count = draw(st.integers(1, 3))
    nodes = tuple(node(f"n{i}").cpus(draw(st.sampled_from([2, 4, 8]))).obj() for i in range(count))
    config = Config(
        def_mem_per_cpu_mb=100,
        scheduler="sched/backfill",
        bf_resolution_s=draw(st.sampled_from([1, 60])),
        bf_reservations=draw(st.sampled_from([0, 1, 2])),
        bf_max_job_user=draw(st.sampled_from([0, 0, 2])),
    )
    # jobs already running: whatever a cycle on the empty cluster starts, with random ends
    old = [_request(1000 + i, draw, count) for i in range(draw(st.integers(0, 6)))]
    first = run_cycle(snapshot(nodes, pending=old, config=config), NOW - 10)
    running = tuple(
        RunningJob(
            s.job_id,
            tuple(a.node for a in s.allocation),
            NOW + draw(st.integers(1, 7200)),
            "batch",
            s.allocation,
        )
        for s in first.starts
    )
    pending = [_request(i, draw, count) for i in range(1, draw(st.integers(1, 8)) + 1)]
    return snapshot(_with_usage(nodes, running), pending=pending, running=running, config=config)


def _with_usage(nodes: tuple[Node, ...], running: tuple[RunningJob, ...]) -> tuple[Node, ...]:
    cpus: dict[str, set[int]] = defaultdict(set)
    mem: dict[str, int] = defaultdict(int)
    jobs: dict[str, int] = defaultdict(int)
    for r in running:
        for a in r.allocation:
            cpus[a.node].update(a.cpu_ids)
            mem[a.node] += a.mem_mb
            jobs[a.node] += 1
    return tuple(
        dataclasses.replace(
            n, usage=NodeUsage(frozenset(cpus[n.name]), mem[n.name], frozenset(), False, jobs[n.name])
        )
        for n in nodes
    )


def _held_cpus(allocs: list[NodeAllocation]) -> dict[str, list[int]]:
    held: dict[str, list[int]] = defaultdict(list)
    for a in allocs:
        held[a.node].extend(a.cpu_ids)
    return held


@settings(max_examples=300, deadline=None)
@given(snapshots())
def test_backfill_never_delays_a_higher_priority_job(snap: Snapshot) -> None:
    full = run_cycle(snap, NOW)
    started = {s.job_id for s in full.starts}
    for job in snap.pending:
        higher_only = dataclasses.replace(
            snap, pending=tuple(j for j in snap.pending if j.job_id <= job.job_id)
        )
        alone = run_cycle(higher_only, NOW)
        if job.job_id in {s.job_id for s in alone.starts}:
            assert job.job_id in started
        if job.job_id in alone.planned:
            assert full.planned[job.job_id].start_time == alone.planned[job.job_id].start_time


@settings(max_examples=300, deadline=None)
@given(snapshots())
def test_reservations_are_free_when_they_begin(snap: Snapshot) -> None:
    result = run_cycle(snap, NOW)
    starts = {s.job_id: s for s in result.starts}
    for job_id, plan in result.planned.items():
        still = [a for r in snap.running if r.end_time > plan.start_time for a in r.allocation]
        still += [
            a
            for s in starts.values()
            if job_end(NOW, s.time_limit_min) > plan.start_time
            for a in s.allocation
        ]
        for name, ids in _held_cpus(still).items():
            assert len(ids) == len(set(ids)), f"running jobs overlap on {name}"
        assert set(plan.nodes) <= {n.name for n in snap.nodes}
        job = next(j for j in snap.pending if j.job_id == job_id)
        fewest, most = node_count_range(job)
        assert fewest <= len(plan.nodes) <= most


@settings(max_examples=300, deadline=None)
@given(snapshots())
def test_backfill_starts_fit_and_are_whole(snap: Snapshot) -> None:
    result = run_cycle(snap, NOW)
    by_name = {n.name: n for n in snap.nodes}
    allocs: list[NodeAllocation] = [a for r in snap.running for a in r.allocation]
    for start in result.starts:
        _assert_whole(start, next(j for j in snap.pending if j.job_id == start.job_id))
        allocs.extend(start.allocation)
    for name, ids in _held_cpus(allocs).items():
        assert len(ids) == len(set(ids)), f"CPU given twice on {name}"
        assert all(0 <= i < by_name[name].cpus for i in ids)


def _assert_whole(start: Start, job: JobRequest) -> None:
    fewest, most = node_count_range(job)
    assert fewest <= len(start.allocation) <= most
    assert sum(a.tasks for a in start.allocation) >= job.num_tasks
