"""sched/backfill: lower-priority jobs start now only when they delay no reservation."""

from __future__ import annotations

import dataclasses

import pytest

from ctld.sched.cycle import run_cycle
from ctld.sched.model import Config, JobRequest, NodeAllocation, RunningJob, Snapshot
from tests.unit.sched.builders import cluster, job, node, snapshot

NOW = 10_000
BACKFILL = Config(def_mem_per_cpu_mb=100, scheduler="sched/backfill", bf_resolution_s=1)


def _busy_n1(end_time: int) -> tuple[tuple[object, ...], RunningJob]:
    """Two 4-CPU nodes; a running job holds all of n1 until `end_time` (0 = no limit)."""
    nodes = (node("n1").cpus(4).used(cpus=range(4), mem=400).obj(), node("n2").cpus(4).obj())
    alloc = NodeAllocation("n1", (0, 1, 2, 3), 400, tasks=4)
    return nodes, RunningJob(99, ("n1",), end_time, allocation=(alloc,))


def _snap(end_time: int, pending: list[JobRequest], config: Config = BACKFILL) -> Snapshot:
    nodes, run = _busy_n1(end_time)
    return snapshot(nodes, pending=pending, running=[run], config=config)


BIG = job(1).nodes(2).tasks(8).time(60).obj()  # needs both nodes: waits for the running job


CASES = [
    # id, running job's end, pending jobs, config, started, reasons, planned start of job 1
    (
        "short job backfills",
        NOW + 3600,
        [BIG, job(2).tasks(4).time(30).obj()],
        BACKFILL,
        [2],
        {1: "Resources"},
        NOW + 3600,
    ),
    (
        "job ending exactly at the reservation backfills",
        NOW + 3600,
        [BIG, job(2).tasks(4).time(60).obj()],
        BACKFILL,
        [2],
        {1: "Resources"},
        NOW + 3600,
    ),
    (
        "long job would delay the big one",
        NOW + 3600,
        [BIG, job(2).tasks(4).time(61).obj()],
        BACKFILL,
        [],
        {1: "Resources", 2: "Priority"},
        NOW + 3600,
    ),
    (
        "unlimited job would delay the big one",
        NOW + 3600,
        [BIG, job(2).tasks(4).obj()],
        BACKFILL,
        [],
        {1: "Resources", 2: "Priority"},
        NOW + 3600,
    ),
    (
        "builtin scheduler never backfills",
        NOW + 3600,
        [BIG, job(2).tasks(4).time(30).obj()],
        dataclasses.replace(BACKFILL, scheduler="sched/builtin"),
        [],
        {1: "Resources", 2: "Priority"},
        None,
    ),
    (
        "unknown end: the big job blocks its partition",
        0,
        [BIG, job(2).tasks(4).time(30).obj()],
        BACKFILL,
        [],
        {1: "Resources", 2: "Priority"},
        None,
    ),
    (
        "start beyond bf_window: blocks",
        NOW + 3 * 3600,
        [BIG, job(2).tasks(4).time(30).obj()],
        dataclasses.replace(BACKFILL, bf_window_min=60),
        [],
        {1: "Resources", 2: "Priority"},
        None,
    ),
    (
        "bf_max_job_test=1 tests only the big job",
        NOW + 3600,
        [BIG, job(2).tasks(4).time(30).obj()],
        dataclasses.replace(BACKFILL, bf_max_job_test=1),
        [],
        {1: "Resources", 2: "Priority"},
        NOW + 3600,
    ),
    (
        "bf_max_job_user=1 skips the user's second job",
        NOW + 3600,
        [BIG, job(2).tasks(4).time(30).obj()],
        dataclasses.replace(BACKFILL, bf_max_job_user=1),
        [],
        {1: "Resources", 2: "Priority"},
        NOW + 3600,
    ),
    (
        "bf_max_job_user counts per user",
        NOW + 3600,
        [BIG, job(2).tasks(4).time(30).user(7).obj()],
        dataclasses.replace(BACKFILL, bf_max_job_user=1),
        [2],
        {1: "Resources"},
        NOW + 3600,
    ),
    (
        "resolution rounds the planned start up",
        NOW + 3601,
        [BIG],
        dataclasses.replace(BACKFILL, bf_resolution_s=60),
        [],
        {1: "Resources"},
        NOW + 3660,
    ),
]


@pytest.mark.parametrize(
    ("end_time", "pending", "config", "started", "reasons", "planned"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_backfill(
    end_time: int,
    pending: list[JobRequest],
    config: Config,
    started: list[int],
    reasons: dict[int, str],
    planned: int | None,
) -> None:
    result = run_cycle(_snap(end_time, pending, config), NOW)
    assert [s.job_id for s in result.starts] == started
    assert result.reasons == reasons
    plan = result.planned.get(1)
    assert (plan.start_time if plan else None) == planned
    if plan:
        assert plan.nodes == ("n1", "n2")


def test_easy_reserves_only_for_the_first_job() -> None:
    """Conservative: the second big job reserves too, so a long small job may not start; EASY: it may."""
    first = job(1).nodes(2).tasks(6).time(60).obj()  # 3 of 4 CPUs per node from NOW+3600
    second = job(2).nodes(2).tasks(8).time(60).obj()  # whole nodes, after the first
    small = job(3).tasks(1).time(180).obj()  # fits beside the first, overlaps the second
    pending = [first, second, small]
    conservative = run_cycle(_snap(NOW + 3600, pending), NOW)
    easy = run_cycle(_snap(NOW + 3600, pending, dataclasses.replace(BACKFILL, bf_reservations=1)), NOW)
    assert [s.job_id for s in conservative.starts] == []
    assert conservative.planned[2].start_time == NOW + 7200
    assert [s.job_id for s in easy.starts] == [3]
    assert easy.planned[1].start_time == NOW + 3600
    assert 2 not in easy.planned


@pytest.mark.parametrize(
    ("strict", "limit", "started"), [(False, 600, [2]), (True, 600, []), (True, 60, [2])]
)
def test_small_job_uses_spare_cpus_beside_a_reservation(strict: bool, limit: int, started: list[int]) -> None:
    """The big job leaves one CPU per node: a long 1-CPU job may use it now (textbook backfill);
    under bf_strict (RLScheduler's rule) only a job that ends by the reservation may start."""
    big = job(1).nodes(2).tasks(6).time(60).obj()
    small = job(2).tasks(1).time(limit).obj()
    result = run_cycle(_snap(NOW + 3600, [big, small], dataclasses.replace(BACKFILL, bf_strict=strict)), NOW)
    assert [s.job_id for s in result.starts] == started
    assert result.planned[1].start_time == NOW + 3600


def test_reservation_nodes_follow_the_cluster() -> None:
    nodes = cluster(3, cpus=4, gpus=0)
    snap = snapshot(nodes, pending=[job(1).nodes(3).time(10).obj()], config=BACKFILL)
    result = run_cycle(snap, NOW)
    assert [s.job_id for s in result.starts] == [1]
    assert result.planned == {}


def test_a_running_job_of_unknown_allocation_frees_its_whole_node_at_its_end() -> None:
    """Its release counts (the CPU-count shortcut once counted nothing and planned no start)."""
    nodes = (
        node("n1").cpus(4).used(cpus=range(4), mem=400).obj(),
        node("n2").cpus(4).used(cpus=range(4)).obj(),
    )
    runs = [RunningJob(98, ("n1",), NOW + 3600), RunningJob(99, ("n2",), NOW + 7200)]
    result = run_cycle(
        snapshot(nodes, pending=[job(1).tasks(4).time(60).obj()], running=runs, config=BACKFILL), NOW
    )
    assert result.reasons == {1: "Resources"}
    assert result.planned[1].start_time == NOW + 3600
    assert result.planned[1].nodes == ("n1",)


def test_the_cpu_count_bound_counts_each_cpu_once() -> None:
    """Backfill skips a moment when too few CPUs are free there by count: free now, plus what running
    jobs release by then, less what holds use. n1's CPUs 0-3 are busy until NOW + 3600; this cycle
    holds CPU 0 again for a preemptor (its victim still has it) and CPU 4 of n2 for a start, and a
    reservation takes CPUs 5-7 from NOW + 600. The bound must count CPU 0 once, and each hold only
    while it lasts."""
    from ctld.sched.backfill import Timeline
    from ctld.sched.model import Start

    nodes, run = _busy_n1(NOW + 3600)
    snap = snapshot(nodes, running=[run], config=BACKFILL)
    part = snap.partitions[0]

    def start(job_id: int, node_name: str, cpus: tuple[int, ...], minutes: int) -> Start:
        alloc = NodeAllocation(node_name, cpus, 100 * len(cpus))
        return Start(job_id=job_id, partition="batch", allocation=(alloc,), time_limit_min=minutes)

    timeline = Timeline(snap, NOW, [start(1, "n1", (0,), 120), start(2, "n2", (0,), 30)])
    assert timeline.profile(part).least(NOW, NOW + 60) == 3  # n2's 4 less job 2's 1
    timeline.hold(NOW + 600, start(3, "n2", (1, 2, 3), 60))
    assert timeline.profile(part).least(NOW, NOW + 60) == 3  # the reservation is not yet
    assert timeline.profile(part).least(NOW, NOW + 900) == 0  # ... but comes within the run
    assert timeline.profile(part).least(NOW + 1800, NOW + 1900) == 1  # job 2 ended, job 3 holds 3
    assert timeline.profile(part).least(NOW + 7200, NOW + 7300) == 8  # everything ended


def test_a_start_says_which_pass_made_it() -> None:
    """scontrol's Scheduler=: the short job behind the blocked big one starts by backfill; a job that
    fits in the main pass (nothing ahead of it) is the main scheduler's."""
    behind = run_cycle(_snap(NOW + 3600, [BIG, job(2).tasks(4).time(30).obj()]), NOW)
    assert [(s.job_id, s.by_backfill) for s in behind.starts] == [(2, True)]
    alone = run_cycle(_snap(NOW + 3600, [job(3).tasks(4).time(30).obj()]), NOW)
    assert [(s.job_id, s.by_backfill) for s in alone.starts] == [(3, False)]
